package bench

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"fngateway/adapters/httpapi"
	"fngateway/core"
	"fngateway/infra/azure"
	"fngateway/infra/filestore"
	"fngateway/internal/emulators"
)

// asyncGateway serves the gateway handler with async on, over the given
// store, in front of target; every request of profile "b" may go async.
func asyncGateway(tb testing.TB, target string, store core.Store, queue core.Queue, trigger time.Duration) *httptest.Server {
	tb.Helper()
	s := &core.Settings{
		DefaultTTLSecs: core.Seconds(300 * time.Second), Timeout: core.Millis(1200 * time.Second),
		RetryBackoffMs: core.Millis(25 * time.Millisecond), MaxRetryBodyBytes: 10 << 20,
		FunctionLimitMarginMs: core.Millis(time.Second), AsyncTriggerTimeout: core.Millis(trigger),
		AsyncTimeout: core.Millis(1800 * time.Second), AsyncTTLSecs: core.Seconds(3600 * time.Second),
		AsyncModeEnabled: true, AsyncStore: "file:unused",
	}
	if err := s.Hosts.Decode(target); err != nil {
		tb.Fatal(err)
	}
	if err := s.UserProfiles.Decode(`[{"userId":"b","async-config":{"enabled":true}}]`); err != nil {
		tb.Fatal(err)
	}
	stats := &core.Stats{}
	fwd := &core.Forwarder{Transport: transport(), Stats: stats}
	h := &httpapi.Handler{Settings: s, Forwarder: fwd, Stats: stats, Logger: slog.New(slog.DiscardHandler)}
	h.Async = &core.Async{Store: store, Queue: queue, Forwarder: fwd, Router: core.NewRouter(s),
		TTL: s.AsyncTTLSecs.D(), Timeout: s.AsyncTimeout.D(), Margin: time.Second, Stats: stats}
	h.Init()
	srv := httptest.NewServer(h)
	tb.Cleanup(srv.Close)
	return srv
}

// benchHandoff measures the time from the trigger to the 202: making the
// continuation durable (request body, record, queue message) and answering.
func benchHandoff(b *testing.B, store core.Store, queue core.Queue) {
	release := make(chan struct{})
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	b.Cleanup(be.Close)
	b.Cleanup(func() { close(release) })
	const trigger = 5 * time.Millisecond
	gw := asyncGateway(b, be.URL, store, queue, trigger)
	c := client()
	var total, worst time.Duration
	for b.Loop() {
		req, _ := http.NewRequestWithContext(context.Background(), "POST", gw.URL+"/job", nil)
		req.Header.Set("S7PAsyncMode", "true")
		req.Header.Set("X-UserProfile", "b")
		start := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 202 {
			b.Fatalf("status %d; want 202", resp.StatusCode)
		}
		d := time.Since(start) - trigger
		total += d
		worst = max(worst, d)
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "handoff-ms/op")
	b.ReportMetric(float64(worst.Microseconds())/1000, "worst-handoff-ms")
}

// BenchmarkAsyncHandoff/store=file: the embedded store.
func BenchmarkAsyncHandoff(b *testing.B) {
	b.Run("store=file", func(b *testing.B) {
		// Not b.TempDir: continuations still settling in the background
		// may write while it is removed.
		dir, err := os.MkdirTemp("", "handoff-bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
		fs, err := filestore.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		benchHandoff(b, fs, fs)
	})
	b.Run("store=azurite", benchAzuriteHandoff)
}

// benchAzuriteHandoff: Azure Blob + Queue, on Azurite started here.
func benchAzuriteHandoff(b *testing.B) {
	az := emulators.StartAzurite(b)
	acct, err := azure.NewAccount(azure.Config{ConnectionString: az.ConnectionString()})
	if err != nil {
		b.Fatal(err)
	}
	q, err := acct.Queue("bench-continuations")
	if err != nil {
		b.Fatal(err)
	}
	benchHandoff(b, acct.Store(), q)
}

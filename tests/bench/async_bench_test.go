package bench

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"fngateway/adapters/httpapi"
	"fngateway/adapters/local"
	"fngateway/core"
	"fngateway/core/async"
	infraaws "fngateway/infra/aws"
	"fngateway/infra/azure"
	"fngateway/infra/filestore"
	"fngateway/internal/emulators"
	"fngateway/internal/settings"
)

// asyncGateway serves the gateway handler with async on, over the given
// store, in front of target; every request of profile "b" may go async.
func asyncGateway(tb testing.TB, target string, store async.Store, queue async.Queue, trigger time.Duration) *httptest.Server {
	tb.Helper()
	s := benchSettings(tb, target)
	s.AsyncModeEnabled = true
	s.AsyncTriggerTimeout = settings.Millis(trigger)
	s.AsyncTTLSecs = settings.Seconds(time.Hour)
	if err := s.UserProfiles.Decode(`[{"userId":"b","async-config":{"enabled":true}}]`); err != nil {
		tb.Fatal(err)
	}
	stats := &core.Stats{}
	fwd := &core.Forwarder{Transport: transport(), Stats: stats}
	h := &httpapi.Handler{Settings: s, Forwarder: fwd, Stats: stats, Logger: slog.New(slog.DiscardHandler)}
	h.Host = local.Caps()
	h.Async = &async.Async{Store: store, Queue: queue, Forwarder: fwd, Router: s.Router(),
		TTL: s.AsyncTTLSecs.D(), Timeout: s.AsyncTimeout.D(), Margin: time.Second, Stats: stats,
		TriggerTimeout: trigger, Host: h.Host, Continuations: async.NewContinuations(core.DefaultMaxContinuations)}
	h.Init()
	srv := httptest.NewServer(h)
	tb.Cleanup(srv.Close)
	return srv
}

// benchHandoff measures the time from the trigger to the 202: making the
// continuation durable (request body, record, queue message) and answering.
func benchHandoff(b *testing.B, store async.Store, queue async.Queue) {
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
	measureLate(b, "POST", gw.URL+"/job", map[string]string{"S7PAsyncMode": "true", "X-UserProfile": "b"}, 202, trigger, "handoff")
}

// BenchmarkAsyncHandoff measures how late after the trigger the 202 comes
// (handoff-ms/op, worst-handoff-ms), per store: store=file (the embedded
// store), store=azurite (Azure Blob and Queue), store=s3sqs (S3 and SQS).
// These are the figures the end-to-end tests (tests/async_test.go,
// azure_test.go, s3sqs_test.go) do not bound: there, only that the 202
// comes after the trigger.
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
	b.Run("store=s3sqs", benchS3SQSHandoff)
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

// benchS3SQSHandoff: S3 and SQS, on versitygw and fauxqs started here.
func benchS3SQSHandoff(b *testing.B) {
	v := emulators.StartVersitygw(b)
	f := emulators.StartFauxqs(b)
	store, err := infraaws.NewStore(infraaws.Config{
		AWS: sdkaws.Config{
			Region:      emulators.VersitygwRegion,
			Credentials: credentials.NewStaticCredentialsProvider(emulators.VersitygwAccessKey, emulators.VersitygwSecretKey, ""),
		},
		S3Endpoint: v.Endpoint(),
	}, "s3://bench-handoff/async")
	if err != nil {
		b.Fatal(err)
	}
	q, err := infraaws.NewQueue(infraaws.Config{
		AWS: sdkaws.Config{
			Region:      emulators.FauxqsRegion,
			Credentials: credentials.NewStaticCredentialsProvider("bench", "bench", ""),
		},
		SQSEndpoint: f.Endpoint(),
	}, f.QueueURL("bench-continuations"))
	if err != nil {
		b.Fatal(err)
	}
	benchHandoff(b, store, q)
}

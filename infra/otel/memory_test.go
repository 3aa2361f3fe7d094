package otel

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"fngateway/core"
)

// hungCollector is a loopback TCP listener that accepts connections and
// never answers: an OTLP collector that has hung.
func hungCollector(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

// heapAfterGC is the live heap, in bytes.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// attackRounds sends rounds of n requests, each with a Content-Type of
// ctLen bytes of its own, through h, the way the gateway's face calls the
// observer: a server span and one attempt span each. It returns the live
// heap's growth after the last round.
func attackRounds(tel *Telemetry, rounds, n, ctLen int) int64 {
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tel != nil {
			end := tel.StartAttempt(r.Context(), core.AttemptStart{N: 1, Host: "backend:80", Method: r.Method, Path: r.URL.Path,
				Scheme: "http", Budget: time.Second, Cause: core.CauseTimeout}, http.Header{})
			end(core.Attempt{Host: "backend:80", Status: 200, Outcome: core.OutcomeStatus})
			tel.EndRequest(r.Context(), core.RequestEnd{Route: "/", Status: 200, Attempts: 1, Deadline: "none"})
		}
	})
	var h http.Handler = inner
	if tel != nil {
		h = tel.Handler(inner)
	}
	before := heapAfterGC()
	for range rounds {
		for i := range n {
			r := httptest.NewRequest("POST", "/x", nil)
			// A value of its own, as a request's header is.
			r.Header.Set("Content-Type", "application/x-"+strings.Repeat(string(rune('a'+i%26)), ctLen))
			r.Header.Set("Tracestate", "a="+strings.Repeat("x", 60<<10))
			r.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
			h.ServeHTTP(httptest.NewRecorder(), r)
		}
	}
	return int64(heapAfterGC()) - int64(before)
}

// TestHeapBoundedWithHungCollector: with the collector hung, three rounds
// of 200 requests with a 400 KB Content-Type keep the live heap within a
// few MiB of telemetry off: the Content-Type is capped
// (OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT, default 256) and copied, and the spans
// waiting for export are bounded (issue 21: 26 → 602 MiB before).
func TestHeapBoundedWithHungCollector(t *testing.T) {
	const rounds, n, ctLen = 3, 200, 400 << 10
	off := attackRounds(nil, rounds, n, ctLen)
	tel, err := New(context.Background(), Options{Stats: &core.Stats{},
		Lookup: lookupMap(map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": hungCollector(t) + "/v1/traces"})})
	if err != nil || tel == nil {
		t.Fatalf("New = %v, %v", tel, err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		tel.Shutdown(ctx)
	}()
	on := attackRounds(tel, rounds, n, ctLen)
	const slack = 4 << 20
	t.Logf("live heap growth after %d×%d requests with a %d KB Content-Type: telemetry off %.1f MiB, on (collector hung) %.1f MiB",
		rounds, n, ctLen>>10, float64(off)/(1<<20), float64(on)/(1<<20))
	if on > off+slack {
		t.Errorf("live heap grew %.1f MiB with telemetry on; want within %d MiB of telemetry off (%.1f MiB)",
			float64(on)/(1<<20), slack>>20, float64(off)/(1<<20))
	}
}

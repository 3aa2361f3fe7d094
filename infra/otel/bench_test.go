package otel

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"fngateway/adapters/httpapi"
	"fngateway/core"
	"fngateway/internal/settings"
)

// benchRT answers every attempt with 64 bytes, without a network.
type benchRT struct{}

var answer64 = bytes.Repeat([]byte("x"), 64)

func (benchRT) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(answer64)),
		ContentLength: 64, Request: r}, nil
}

type discardRW struct{ h http.Header }

func (w *discardRW) Header() http.Header         { return w.h }
func (w *discardRW) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardRW) WriteHeader(int)             {}

// BenchmarkServeHTTPTelemetry is adapters/httpapi's BenchmarkServeHTTP with
// an exporter configured: the server span, the attempt span, the trace ids
// in the log line, the duration histograms. Spans go to a loopback OTLP
// receiver in batches, off the request's path. sampler=off samples nothing
// (OTEL_TRACES_SAMPLER=always_off): the cost of propagation and metrics.
func BenchmarkServeHTTPTelemetry(b *testing.B) {
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	defer rcv.Close()
	for _, sampler := range []string{"on", "off"} {
		b.Run("sampler="+sampler, func(b *testing.B) {
			if sampler == "off" {
				b.Setenv("OTEL_TRACES_SAMPLER", "always_off")
			}
			s := settings.DefaultSettings()
			if err := s.Hosts.Decode("http://backend.test"); err != nil {
				b.Fatal(err)
			}
			stats := &core.Stats{}
			h := &httpapi.Handler{Settings: &s, Forwarder: &core.Forwarder{Transport: benchRT{}, Stats: stats},
				Stats: stats, Logger: slog.New(httpapi.NewJSONLogHandler(io.Discard))}
			h.Init()
			tel, err := New(context.Background(), Options{Stats: stats, BufferedBytes: h.BufferedBytes,
				Lookup: lookupMap(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL})})
			if err != nil {
				b.Fatal(err)
			}
			defer tel.Shutdown(context.Background())
			h.Forwarder.Observer = tel
			hd, _ := httpapi.WithTraceIDs(h.Logger.Handler(), tel.SpanIDs)
			h.Logger = slog.New(hd)
			srv := tel.Handler(h)
			r := httptest.NewRequest("GET", "http://gw.test/v1/items?id=42", nil)
			r.Header.Set("User-Agent", "bench")
			r.Header.Set("Accept", "application/json")
			w := &discardRW{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				srv.ServeHTTP(w, r)
			}
		})
	}
}

package httpapi

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"

	"fngateway/core"
	"fngateway/internal/settings"
)

// answer64 is the 64-byte answer of the per-request benchmarks.
var answer64 = bytes.Repeat([]byte("x"), 64)

// staticRT answers every request with answer64, without a network.
type staticRT struct{}

func (staticRT) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(answer64)),
		ContentLength: int64(len(answer64)), Request: r}, nil
}

// discardRW is a ResponseWriter that keeps nothing but its header map,
// cleared between requests.
type discardRW struct{ h http.Header }

func (w *discardRW) Header() http.Header         { return w.h }
func (w *discardRW) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardRW) WriteHeader(int)             {}
func (w *discardRW) Flush()                      {}

// BenchmarkServeHTTP measures the gateway's per-request path — headers in,
// budget, attempt, relay, one JSON log line — against a bare
// httputil.ReverseProxy on the same static transport, as
// httputil's own BenchmarkServeHTTP does. allocs/op and B/op are per
// request.
func BenchmarkServeHTTP(b *testing.B) {
	gw := benchGateway(b)
	u, _ := url.Parse("http://backend.test")
	bare := httputil.NewSingleHostReverseProxy(u)
	bare.Transport = staticRT{}
	for _, impl := range []struct {
		name string
		h    http.Handler
	}{{"bare", bare}, {"gateway", gw}} {
		b.Run("impl="+impl.name, func(b *testing.B) {
			r := benchRequest()
			w := &discardRW{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				impl.h.ServeHTTP(w, r)
			}
		})
	}
}

// BenchmarkServeHTTPModes is BenchmarkServeHTTP's gateway over three
// hosts in each balancing mode: what ordering the hosts costs a request
// (issue 33: latency within 3 % of priority).
func BenchmarkServeHTTPModes(b *testing.B) {
	for _, mode := range []string{"priority", "latency", "roundrobin", "random"} {
		b.Run("mode="+mode, func(b *testing.B) {
			gw := benchGatewayOver(b, "http://a.test,http://b.test,http://c.test", mode)
			r := benchRequest()
			w := &discardRW{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				gw.ServeHTTP(w, r)
			}
		})
	}
}

// benchGateway is the gateway of BenchmarkServeHTTP: default settings, one
// host, the static transport, the JSON log line written to io.Discard.
func benchGateway(tb testing.TB) *Handler {
	tb.Helper()
	return benchGatewayOver(tb, "http://backend.test", "")
}

// benchGatewayOver is benchGateway over hosts (the Hosts setting) in the
// balancing mode given ("" the default), with a Balancer as the binary
// wires one.
func benchGatewayOver(tb testing.TB, hosts, mode string) *Handler {
	tb.Helper()
	s := settings.DefaultSettings()
	if err := s.Hosts.Decode(hosts); err != nil {
		tb.Fatal(err)
	}
	if mode != "" {
		if err := s.LoadBalanceMode.Decode(mode); err != nil {
			tb.Fatal(err)
		}
	}
	gw := &Handler{Settings: &s, Forwarder: &core.Forwarder{Transport: staticRT{}, BackoffBase: s.RetryBackoffMs.D(),
		Balancer: &core.Balancer{}}, Stats: &core.Stats{}, Logger: slog.New(NewJSONLogHandler(io.Discard))}
	gw.Init()
	return gw
}

// benchRequest is the request of BenchmarkServeHTTP.
func benchRequest() *http.Request {
	r := httptest.NewRequest("GET", "http://gw.test/v1/items?id=42", nil)
	r.Header.Set("User-Agent", "bench")
	r.Header.Set("Accept", "application/json")
	return r
}

// maxServeAllocs is the most allocations BenchmarkServeHTTP's gateway
// request may make (docs/performance.md, Throughput, third round): the
// static transport's answer makes six of them.
const maxServeAllocs = 25

// TestServeHTTPAllocs keeps the per-request path as lean as the
// performance notes say: a request through BenchmarkServeHTTP's gateway
// allocates at most maxServeAllocs times.
func TestServeHTTPAllocs(t *testing.T) {
	gw := benchGateway(t)
	r := benchRequest()
	w := &discardRW{h: http.Header{}}
	got := testing.AllocsPerRun(200, func() {
		clear(w.h)
		gw.ServeHTTP(w, r)
	})
	if got > maxServeAllocs+raceAllocs {
		t.Errorf("a request allocates %v times; want at most %d", got, maxServeAllocs+raceAllocs)
	}
}

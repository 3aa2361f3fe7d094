package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"fngateway/core"
	"fngateway/internal/settings"
)

// TestBackendHostHeader: every answer names the host that served it by
// its label or position, never its URL, and says the gateway's latency.
func TestBackendHostHeader(t *testing.T) {
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }))
	defer busy.Close()
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	defer ok.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close() // a refused port
	for _, tt := range []struct {
		name, hosts string
		status      int
		want        string
	}{
		{"position", busy.URL + "," + ok.URL, 200, "1"},
		{"label", "busy=" + busy.URL + ",fine=" + ok.URL, 200, "fine"},
		{"gateway-made error names the last host tried", "first=" + gone.URL + "," + gone.URL, 502, "1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := testSettings(t, tt.hosts)
			s.RetryBackoffMs = settings.Millis(time.Millisecond)
			h := &Handler{Settings: s, Forwarder: &core.Forwarder{Transport: core.NewTransport(), Balancer: &core.Balancer{}}, Stats: &core.Stats{}}
			h.Init()
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "http://gw/x", nil))
			if rec.Code != tt.status || rec.Header().Get("X-Backend-Host") != tt.want {
				t.Errorf("%d x-Backend-Host %q; want %d %q", rec.Code, rec.Header().Get("X-Backend-Host"), tt.status, tt.want)
			}
			if v := rec.Header().Get("X-Backend-Host"); strings.Contains(v, "127.0.0.1") {
				t.Errorf("x-Backend-Host %q names the URL", v)
			}
			if ms, err := strconv.Atoi(rec.Header().Get("X-Gateway-Latency-Ms")); err != nil || ms < 0 {
				t.Errorf("x-Gateway-Latency-Ms %q; want whole milliseconds", rec.Header().Get("X-Gateway-Latency-Ms"))
			}
		})
	}
}

// TestCallerDeadlineShortensTTL: an incoming grpc-timeout or
// x-envoy-expected-rq-timeout-ms shorter than the TTL ends the request at
// the caller's deadline (504 TTLExpired, the backend's request cancelled);
// a longer one changes nothing; an unreadable one is a 400 naming it.
func TestCallerDeadlineShortensTTL(t *testing.T) {
	cancelled := make(chan struct{}, 4)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		cancelled <- struct{}{}
	}))
	defer be.Close()
	for _, tt := range []struct {
		name, header, value string
		ttl                 time.Duration // DefaultTTLSecs
		status              int
		code                string
		atLeast             time.Duration
	}{
		{"grpc-timeout shortens", "grpc-timeout", "1500m", time.Hour, 504, "TTLExpired", 1500 * time.Millisecond},
		{"envoy shortens", "x-envoy-expected-rq-timeout-ms", "1500", time.Hour, 504, "TTLExpired", 1500 * time.Millisecond},
		{"grpc-timeout cannot lengthen", "grpc-timeout", "1H", 1500 * time.Millisecond, 504, "TTLExpired", 1500 * time.Millisecond},
		{"grpc-timeout unreadable", "grpc-timeout", "soon", time.Hour, 400, "InvalidTimeout", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := testSettings(t, be.URL)
			s.DefaultTTLSecs = settings.Seconds(tt.ttl)
			s.Timeout = settings.Millis(time.Hour)
			h := &Handler{Settings: s, Forwarder: &core.Forwarder{Transport: core.NewTransport()}, Stats: &core.Stats{}}
			h.Init()
			rec := httptest.NewRecorder()
			r := httptest.NewRequest("GET", "http://gw/x", nil)
			r.Header.Set(tt.header, tt.value)
			start := time.Now()
			h.ServeHTTP(rec, r)
			took := time.Since(start)
			var doc struct {
				Error struct{ Code, Message string }
			}
			json.Unmarshal(rec.Body.Bytes(), &doc)
			if rec.Code != tt.status || doc.Error.Code != tt.code {
				t.Fatalf("%d %s (%s); want %d %s", rec.Code, doc.Error.Code, doc.Error.Message, tt.status, tt.code)
			}
			if took < tt.atLeast || took > tt.atLeast+answerSlack {
				t.Errorf("answered after %v; want from %v to %v", took, tt.atLeast, tt.atLeast+answerSlack)
			}
			if tt.status == 400 {
				if !strings.Contains(doc.Error.Message, tt.header) {
					t.Errorf("message %q does not name %s", doc.Error.Message, tt.header)
				}
				return
			}
			<-cancelled // the backend saw its request end
		})
	}
}

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

// TestStampShared: the request id and stamp's two values share one backing
// array, each its own full slice; a second stamp (a refused answer after
// the relayed one's) leaves the values of the first one's headers as they
// were.
func TestStampShared(t *testing.T) {
	lg := requestLog{id: "rid", vals: []string{"rid", "", ""}, arrival: time.Now()}
	first := http.Header{"X-Request-Id": lg.idValue()}
	lg.stamp(first, nil, &core.Result{Backend: "one", BackendURL: "http://one"})
	second := http.Header{}
	lg.stamp(second, []core.Attempt{{Host: "two:1", Label: "two"}}, nil)
	for _, c := range []struct {
		h         http.Header
		key, want string
	}{
		{first, "X-Request-Id", "rid"},
		{first, "X-Backend-Host", "one"},
		{second, "X-Backend-Host", "two"},
	} {
		if got := c.h[c.key]; len(got) != 1 || got[0] != c.want || cap(got) != 1 {
			t.Errorf("%s = %q (cap %d); want [%q], a full slice", c.key, got, cap(got), c.want)
		}
	}
	if got := first["X-Gateway-Latency-Ms"]; len(got) != 1 || cap(got) != 1 {
		t.Errorf("first X-Gateway-Latency-Ms = %q (cap %d); want one value, a full slice", got, cap(got))
	}
	first.Add("X-Request-Id", "appended")
	if lg.vals[1] != "one" {
		t.Errorf("an append to X-Request-Id changed the next value to %q", lg.vals[1])
	}
	var zero requestLog // as a test's fail makes it: no backing array
	h := http.Header{"X-Request-Id": zero.idValue()}
	zero.stamp(h, []core.Attempt{{Host: "h:1", Label: "0"}}, nil)
	if h.Get("X-Backend-Host") != "0" || h.Get("X-Gateway-Latency-Ms") == "" {
		t.Errorf("stamp without a backing array: %v", h)
	}
}

// TestNewIDs: a request a client sent without ids gets a request id and an
// Idempotency-Key, made together (newKeyPair), each 32 hex digits and
// different from the other and from the next request's.
func TestNewIDs(t *testing.T) {
	var got []string
	s := testSettings(t, "http://backend.test")
	h := &Handler{Settings: s, Forwarder: &core.Forwarder{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = append(got, r.Header.Get("X-Request-Id"), r.Header.Get("Idempotency-Key"))
		return staticRT{}.RoundTrip(r)
	})}, Stats: &core.Stats{}}
	h.Init()
	for range 2 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "http://gw/x", nil))
		if rec.Code != 200 {
			t.Fatalf("status %d; want 200", rec.Code)
		}
	}
	seen := map[string]bool{}
	for _, id := range got {
		if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" || seen[id] {
			t.Errorf("ids %q: %q is not 32 fresh hex digits", got, id)
		}
		seen[id] = true
	}
	if len(got) != 4 {
		t.Errorf("the backend saw %d ids; want 4", len(got))
	}
}

package httpapi

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"fngateway/core"
	"fngateway/core/async"
	"fngateway/internal/settings"
)

func testSettings(tb testing.TB, hosts string) *settings.Settings {
	tb.Helper()
	s := settings.DefaultSettings()
	s.Timeout = settings.Millis(time.Minute)
	s.MaxRetryBodyBytes = 1 << 20
	s.AsyncTimeout = settings.Millis(time.Minute)
	s.AsyncTTLSecs = settings.Seconds(time.Hour)
	s.AsyncStore = "file:x"
	s.AsyncModeEnabled = true
	if err := s.Hosts.Decode(hosts); err != nil {
		tb.Fatal(err)
	}
	if err := s.UserProfiles.Decode(`[{"userId":"on","async-config":{"enabled":true}},{"userId":"off"}]`); err != nil {
		tb.Fatal(err)
	}
	if err := s.Routes.Decode(`[{"prefix":"/never","async":false}]`); err != nil {
		tb.Fatal(err)
	}
	return &s
}

func TestAbsolute(t *testing.T) {
	tests := []struct {
		name   string
		public string
		tls    bool
		hdr    map[string]string
		in     string
		want   string
	}{
		{"relative over http", "", false, nil, "/_gateway/async/1", "http://gw.example/_gateway/async/1"},
		{"relative over tls", "", true, nil, "/_gateway/async/1", "https://gw.example/_gateway/async/1"},
		{"behind a TLS front end", "", false, map[string]string{"X-Forwarded-Proto": "https"}, "/x", "https://gw.example/x"},
		{"unknown forwarded proto ignored", "", false, map[string]string{"X-Forwarded-Proto": "gopher"}, "/x", "http://gw.example/x"},
		{"forwarded host never trusted", "", false, map[string]string{"X-Forwarded-Host": "attacker.example"}, "/x", "http://gw.example/x"},
		{"absolute kept", "", false, nil, "https://acct.blob.core.windows.net/c/b?sig=1", "https://acct.blob.core.windows.net/c/b?sig=1"},
		{"public base wins", "https://api.example.com/gw", false, map[string]string{"X-Forwarded-Host": "attacker.example", "X-Forwarded-Proto": "http"},
			"/_gateway/blobs/c/k?se=1&sig=x", "https://api.example.com/gw/_gateway/blobs/c/k?se=1&sig=x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &Handler{Settings: &settings.Settings{PublicBaseURL: settings.BaseURL(tt.public)}}
			r := httptest.NewRequest("GET", "http://gw.example/", nil)
			if tt.tls {
				r.TLS = &tls.ConnectionState{}
			}
			for k, v := range tt.hdr {
				r.Header.Set(k, v)
			}
			if got := h.absolute(r, tt.in); got != tt.want {
				t.Errorf("absolute(%q) = %q; want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestAsyncEligible: a request goes async only when the gateway, its
// profile and the request agree; one that asked (S7PAsyncMode: true) and
// may not is told why (x-Async-Declined), one that did not ask is not.
func TestAsyncEligible(t *testing.T) {
	h := &Handler{Settings: testSettings(t, "http://a:1"), Async: &async.Async{}}
	h.Init()
	tests := []struct {
		name     string
		path     string
		hdr      map[string]string
		gateway  bool
		want     bool
		streamed bool
		upgrade  bool
		declined string
	}{
		{"all three agree", "/x", map[string]string{"S7PAsyncMode": "true", "X-UserProfile": "on"}, true, true, false, false, ""},
		{"header case-insensitive value", "/x", map[string]string{"S7PAsyncMode": "TRUE", "X-UserProfile": "on"}, true, true, false, false, ""},
		{"gateway off", "/x", map[string]string{"S7PAsyncMode": "true", "X-UserProfile": "on"}, false, false, false, false, "async-disabled"},
		{"profile off", "/x", map[string]string{"S7PAsyncMode": "true", "X-UserProfile": "off"}, true, false, false, false, "profile-async-off"},
		{"no profile", "/x", map[string]string{"S7PAsyncMode": "true"}, true, false, false, false, "profile-missing"},
		{"unknown profile", "/x", map[string]string{"S7PAsyncMode": "true", "X-UserProfile": "who"}, true, false, false, false, "profile-unknown"},
		{"request did not ask", "/x", map[string]string{"X-UserProfile": "on"}, true, false, false, false, ""},
		{"request asked for something else", "/x", map[string]string{"S7PAsyncMode": "false", "X-UserProfile": "who"}, false, false, false, false, ""},
		{"route forbids", "/never/x", map[string]string{"S7PAsyncMode": "true", "X-UserProfile": "on"}, true, false, false, false, "route-async-off"},
		{"body too large to snapshot", "/x", map[string]string{"S7PAsyncMode": "true", "X-UserProfile": "on"}, true, false, true, false, "streamed-body"},
		{"upgrade", "/x", map[string]string{"S7PAsyncMode": "true", "X-UserProfile": "on"}, true, false, false, true, "upgrade"},
		{"the gateway's reason first", "/never/x", map[string]string{"S7PAsyncMode": "true", "X-UserProfile": "who"}, false, false, true, false, "async-disabled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.Settings.AsyncModeEnabled = settings.Bool(tt.gateway)
			r := httptest.NewRequest("POST", "http://gw"+tt.path, nil)
			for k, v := range tt.hdr {
				r.Header.Set(k, v)
			}
			req := &core.Request{}
			if tt.streamed {
				req.BodyStream = r.Body
			}
			if tt.upgrade {
				req.Upgrade = "websocket"
			}
			got, declined := h.asyncEligible(r, h.router.Match(tt.path), req)
			if got != tt.want || declined != tt.declined {
				t.Errorf("asyncEligible = %v, %q; want %v, %q", got, declined, tt.want, tt.declined)
			}
		})
	}
}

// TestOwnEndpoints: the gateway's own paths answer without a backend, with
// x-Attempts 0, and unknown ones are JSON 404s.
func TestOwnEndpoints(t *testing.T) {
	h := &Handler{Settings: testSettings(t, "http://127.0.0.1:1"), Forwarder: &core.Forwarder{}, Stats: &core.Stats{}}
	h.Init()
	tests := []struct {
		path   string
		status int
		code   string
	}{
		{"/_gateway/health", 200, ""},
		{"/_gateway/stats", 200, ""},
		{"/_gateway/nope", 404, "NotFound"},
		{"/_gateway/blobs/x/y", 404, "NotFound"}, // no embedded store here
		{"/_gateway/async/abc", 404, "NotFound"}, // no async engine here
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "http://gw"+tt.path, nil))
			if rec.Code != tt.status || rec.Header().Get("X-Attempts") != "0" {
				t.Fatalf("%s = %d (x-Attempts %q); want %d with x-Attempts 0", tt.path, rec.Code, rec.Header().Get("X-Attempts"), tt.status)
			}
			if tt.code != "" {
				var doc struct{ Error struct{ Code string } }
				if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || doc.Error.Code != tt.code {
					t.Errorf("body %q: want code %s", rec.Body, tt.code)
				}
				if rec.Header().Get("X-Gateway-Error") != tt.code {
					t.Errorf("x-Gateway-Error = %q; want %s", rec.Header().Get("X-Gateway-Error"), tt.code)
				}
			}
		})
	}
	if got := h.Stats.Requests.Load(); got != 0 {
		t.Errorf("own endpoints counted as %d proxied requests", got)
	}
}

// TestBadHeadersNameThemselves: a bad S7PTTL or S7PTimeout is a 400 whose
// message names the header and its value, and nothing is forwarded.
func TestBadHeadersNameThemselves(t *testing.T) {
	called := false
	be := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true }))
	defer be.Close()
	h := &Handler{Settings: testSettings(t, be.URL), Forwarder: &core.Forwarder{}, Stats: &core.Stats{}}
	h.Init()
	for _, hdr := range [][2]string{{"S7PTTL", "12abc"}, {"S7PTimeout", "-5"}} {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "http://gw/x", nil)
		r.Header.Set(hdr[0], hdr[1])
		h.ServeHTTP(rec, r)
		var doc struct {
			Error struct{ Code, Message string }
		}
		json.Unmarshal(rec.Body.Bytes(), &doc)
		if rec.Code != 400 || doc.Error.Message == "" ||
			!strings.Contains(doc.Error.Message, hdr[0]) || !strings.Contains(doc.Error.Message, hdr[1]) {
			t.Errorf("%s: %s = %d %q; want 400 naming the header and value", hdr[0], hdr[1], rec.Code, rec.Body)
		}
	}
	if called {
		t.Error("a request with a bad header reached the backend")
	}
}

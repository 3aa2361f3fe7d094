package azurefunctions

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestPlatformPeer: a request the Functions host forwards names the client
// in the last X-Forwarded-For entry, which App Service's front end wrote
// (with the client's port); that one hop is believed, and the entries
// before it, which the client wrote, are left for TrustedProxies to judge.
func TestPlatformPeer(t *testing.T) {
	tests := []struct {
		name, peer, xff, proto string
		wantRemote, wantXFF    string
		wantTLS                bool
	}{
		{"front end's hop", "127.0.0.1:50000", "203.0.113.9:51234", "https", "203.0.113.9", "", true},
		{"client wrote entries", "127.0.0.1:50000", "6.6.6.6, 10.0.0.1, 203.0.113.9:51234", "https", "203.0.113.9", "6.6.6.6, 10.0.0.1", true},
		{"IPv6 client", "[::1]:50000", "[2001:db8::7]:443", "http", "2001:db8::7", "", false},
		{"no X-Forwarded-For: the host run locally", "127.0.0.1:50000", "", "", "127.0.0.1:50000", "", false},
		{"garbage last entry: nothing believed", "127.0.0.1:50000", "6.6.6.6, unknown", "https", "127.0.0.1:50000", "6.6.6.6, unknown", false},
		{"not from loopback: untouched", "192.0.2.1:1", "203.0.113.9:51234", "https", "192.0.2.1:1", "203.0.113.9:51234", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got *http.Request
			s := &Server{Gateway: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r })}
			r := httptest.NewRequest("GET", "/api/x", nil)
			r.RemoteAddr = tt.peer
			r.Header.Set("X-Azure-Functions-InvocationId", "inv-1")
			if tt.xff != "" {
				r.Header.Set("X-Forwarded-For", tt.xff)
			}
			if tt.proto != "" {
				r.Header.Set("X-Forwarded-Proto", tt.proto)
			}
			s.ServeHTTP(httptest.NewRecorder(), r)
			if got.RemoteAddr != tt.wantRemote || got.Header.Get("X-Forwarded-For") != tt.wantXFF || (got.TLS != nil) != tt.wantTLS {
				t.Errorf("RemoteAddr %q, X-Forwarded-For %q, TLS %v; want %q, %q, %v",
					got.RemoteAddr, got.Header.Get("X-Forwarded-For"), got.TLS != nil, tt.wantRemote, tt.wantXFF, tt.wantTLS)
			}
		})
	}
}

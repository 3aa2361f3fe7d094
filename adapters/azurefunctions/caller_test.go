package azurefunctions

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"fngateway/core/async"
)

// TestCallerIdentity: with App Service Authentication on (AuthEnabled,
// from WEBSITE_AUTH_ENABLED) the principal it verified
// (X-MS-CLIENT-PRINCIPAL-ID, with its provider) reaches the HTTP face as
// the request's verified caller (async.CallerOf), which scopes its
// Idempotency-Keys and its cancel; the platform's front end removes
// copies a client sends. With it off nothing removes them, so the Server
// does: every X-MS-CLIENT-PRINCIPAL* header is gone and there is no
// verified caller. Before, a client's own header was taken as verified.
func TestCallerIdentity(t *testing.T) {
	principal := map[string]string{"X-MS-CLIENT-PRINCIPAL-ID": "00000000-1111", "X-MS-CLIENT-PRINCIPAL-IDP": "aad",
		"X-MS-CLIENT-PRINCIPAL-NAME": "alice@example.com", "X-MS-CLIENT-PRINCIPAL": "eyJjbGFpbXMiOltdfQ=="}
	tests := []struct {
		name        string
		authEnabled bool
		header      map[string]string
		want        string
		wantHeaders bool // the principal headers reach the HTTP face
	}{
		{"authenticated", true, principal, "azure-appservice:aad:00000000-1111", true},
		{"no provider named", true, map[string]string{"x-ms-client-principal-id": "p1"}, "azure-appservice::p1", true},
		{"anonymous", true, nil, "", false},
		{"authentication off: forged", false, principal, "", false},
		{"authentication off: lower case forged", false, map[string]string{"x-ms-client-principal-id": "p1"}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := "unset"
			var hdr http.Header
			s := &Server{AuthEnabled: tt.authEnabled, Gateway: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got, hdr = async.CallerOf(r.Context()), r.Header
			})}
			r := httptest.NewRequest("POST", "/reports/1", nil)
			r.Header.Set(headerInvocationID, "inv-1")
			for k, v := range tt.header {
				r.Header.Set(k, v)
			}
			s.ServeHTTP(httptest.NewRecorder(), r)
			if got != tt.want {
				t.Errorf("verified caller = %q; want %q", got, tt.want)
			}
			for k := range tt.header {
				if _, ok := hdr[http.CanonicalHeaderKey(k)]; ok != tt.wantHeaders {
					t.Errorf("header %s reached the HTTP face: %v; want %v", k, ok, tt.wantHeaders)
				}
			}
		})
	}
}

// TestFunctionKeysRemoved: the caller's Azure Functions key, in the
// x-functions-key header or the code query parameter, never reaches the
// HTTP face, and the rest of the query stays exactly as written. Before,
// it went on to every backend.
func TestFunctionKeysRemoved(t *testing.T) {
	tests := []struct {
		target, wantQuery, wantURI string
	}{
		{"/r?code=secret", "", "/r"},
		{"/r?a=1&code=secret&b=%2F2", "a=1&b=%2F2", "/r?a=1&b=%2F2"},
		{"/r?CODE=secret&cod%65=s2&a=%20", "a=%20", "/r?a=%20"},
		{"/r?codes=1&xcode=2", "codes=1&xcode=2", "/r?codes=1&xcode=2"},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			var got *http.Request
			s := &Server{Gateway: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r })}
			r := httptest.NewRequest("GET", tt.target, nil)
			r.Header.Set(headerInvocationID, "inv-1")
			r.Header.Set("x-functions-key", "secret")
			r.Header["x-functions-key"] = []string{"secret2"}
			s.ServeHTTP(httptest.NewRecorder(), r)
			for k := range got.Header {
				if http.CanonicalHeaderKey(k) == "X-Functions-Key" {
					t.Errorf("%s reached the HTTP face", k)
				}
			}
			if got.URL.RawQuery != tt.wantQuery || got.RequestURI != tt.wantURI {
				t.Errorf("query %q, RequestURI %q; want %q, %q", got.URL.RawQuery, got.RequestURI, tt.wantQuery, tt.wantURI)
			}
		})
	}
}

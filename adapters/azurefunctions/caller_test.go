package azurefunctions

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"fngateway/core"
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
		// Issue 34: the spellings with '_', which a CGI or WSGI backend
		// reads as the platform's headers, are forged either way.
		{"authentication off: '_' forged", false, map[string]string{"X_MS_CLIENT_PRINCIPAL_ID": "p1", "x_ms_client_principal": "e30="}, "", false},
		{"authentication on: '_' forged", true, map[string]string{"X_MS_CLIENT_PRINCIPAL_ID": "p1", "X_Ms_Client_Principal_Idp": "aad"}, "", false},
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
			for k := range hdr {
				if strings.Contains(k, "_") {
					t.Errorf("header %s reached the HTTP face", k)
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
		{"/r?a=1;code=secret", "a=1", "/r?a=1"},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			var got *http.Request
			s := &Server{Gateway: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r })}
			r := httptest.NewRequest("GET", tt.target, nil)
			r.Header.Set(headerInvocationID, "inv-1")
			r.Header.Set("x-functions-key", "secret")
			r.Header["x-functions-key"] = []string{"secret2"}
			r.Header["X_Functions_Key"] = []string{"secret3"}
			s.ServeHTTP(httptest.NewRecorder(), r)
			for k := range got.Header {
				if core.HeaderKey(k) == "x-functions-key" {
					t.Errorf("%s reached the HTTP face", k)
				}
			}
			if got.URL.RawQuery != tt.wantQuery || got.RequestURI != tt.wantURI {
				t.Errorf("query %q, RequestURI %q; want %q, %q", got.URL.RawQuery, got.RequestURI, tt.wantQuery, tt.wantURI)
			}
		})
	}
}

// FuzzCallerCredentials: whatever header and query a client sends through
// the Functions host, no spelling of a function key or an invocation
// header reaches the HTTP face, nor a code parameter (split at '&' or
// ';'); an X-MS-CLIENT-PRINCIPAL* header only with authentication on and
// in a spelling without '_'; and every other header does.
func FuzzCallerCredentials(f *testing.F) {
	f.Add("X_MS_CLIENT_PRINCIPAL_ID", "a=1;code=k", true)
	f.Add("x_functions_key", "CODE=1", false)
	f.Add("X-Ms-Client-Principal-Name", "x", true)
	f.Fuzz(func(t *testing.T, name, rawQuery string, authEnabled bool) {
		if !core.IsToken(name) || strings.ContainsAny(rawQuery, "# ?") {
			return
		}
		r, err := http.NewRequest("GET", "http://127.0.0.1/p?"+rawQuery, nil)
		if err != nil {
			return
		}
		r.RequestURI = "/p?" + rawQuery
		r.RemoteAddr = "127.0.0.1:1"
		r.Header = http.Header{name: {"v"}, "X-Kept": {"k"}, headerInvocationID: {"inv-1"}}
		var got *http.Request
		s := &Server{AuthEnabled: authEnabled, Gateway: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r })}
		s.ServeHTTP(httptest.NewRecorder(), r)
		if got == nil {
			return // answered by the Server itself (the continuation path)
		}
		n := core.HeaderKey(name)
		principal := strings.HasPrefix(n, "x-ms-client-principal")
		gone := n == "x-functions-key" || n == "x-azure-functions-invocationid" || n == "x-azure-functions-hostversion" ||
			principal && (!authEnabled || strings.Contains(name, "_"))
		if _, left := got.Header[name]; left == gone && n != "x-kept" {
			t.Fatalf("header %q (authentication %v) reached the HTTP face: %v", name, authEnabled, left)
		}
		for k := range got.Header {
			if kn := core.HeaderKey(k); kn == "x-functions-key" || strings.HasPrefix(kn, "x-azure-functions-") {
				t.Fatalf("header %q reached the HTTP face", k)
			}
		}
		for _, p := range strings.FieldsFunc(got.URL.RawQuery, func(c rune) bool { return c == '&' || c == ';' }) {
			k, _, _ := strings.Cut(p, "=")
			if u, err := url.QueryUnescape(k); err == nil && strings.EqualFold(u, "code") {
				t.Fatalf("query %q: %q reached the HTTP face", rawQuery, p)
			}
		}
	})
}

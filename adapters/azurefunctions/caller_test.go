package azurefunctions

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"fngateway/core/async"
)

// TestCallerIdentity: on this host the principal App Service
// authentication verified (X-MS-CLIENT-PRINCIPAL-ID, with its provider)
// reaches the HTTP face as the request's verified caller (async.CallerOf),
// which scopes its Idempotency-Keys. The platform's front end removes
// copies a client sends, so only this host reads them.
func TestCallerIdentity(t *testing.T) {
	tests := []struct {
		name   string
		header map[string]string
		want   string
	}{
		{"authenticated", map[string]string{"X-MS-CLIENT-PRINCIPAL-ID": "00000000-1111", "X-MS-CLIENT-PRINCIPAL-IDP": "aad"},
			"azure-appservice:aad:00000000-1111"},
		{"no provider named", map[string]string{"x-ms-client-principal-id": "p1"}, "azure-appservice::p1"},
		{"anonymous", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := "unset"
			s := &Server{Gateway: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got = async.CallerOf(r.Context())
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
		})
	}
}

package tests

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"fngateway/internal/emulators"
)

// principalHeaders are what App Service Authentication sets on a request
// it authenticated — or, with authentication off, what a client forges.
func principalHeaders(id string) map[string]string {
	return map[string]string{
		"X-MS-CLIENT-PRINCIPAL-ID":   id,
		"X-MS-CLIENT-PRINCIPAL-IDP":  "aad",
		"X-MS-CLIENT-PRINCIPAL-NAME": id + "@example.com",
		"X-MS-CLIENT-PRINCIPAL":      "eyJhdXRoX3R5cCI6ImFhZCIsImNsYWltcyI6W119",
	}
}

// TestAzureFunctionsCallerCredentials: on the Azure Functions custom
// handler (the binary driven with the host's exact forwarding), the
// caller's function key — x-functions-key header, code query parameter —
// never reaches a backend, the rest of the query unchanged; client-address
// look-alikes (X-Real-IP, True-Client-IP, X-Client-IP, X_Forwarded_For) from
// the client are dropped; and X-MS-CLIENT-PRINCIPAL* reach the backend only
// with WEBSITE_AUTH_ENABLED=True, when App Service Authentication set them.
// Before, all of them went on, whatever the platform said. Spellings with
// '_' (X_MS_CLIENT_PRINCIPAL_ID, X_Functions_Key) and a code parameter
// after ';' never reach it, with or without authentication (issue 34).
func TestAzureFunctionsCallerCredentials(t *testing.T) {
	t.Parallel()
	for _, authEnabled := range []bool{false, true} {
		name := "authentication off"
		if authEnabled {
			name = "WEBSITE_AUTH_ENABLED=True"
		}
		t.Run(name, func(t *testing.T) {
			seen := make(chan *http.Request, 4)
			be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.ReadAll(r.Body)
				seen <- r
			}))
			defer be.Close()
			env := map[string]string{"Hosts": be.URL, "AzureFunctionsJobHost__functionTimeout": "00:05:00"}
			if authEnabled {
				env["WEBSITE_AUTH_ENABLED"] = "True"
			}
			g := StartAzureHandler(t, env)
			hdr := principalHeaders("p-alice")
			for k, v := range map[string]string{
				"x-functions-key": "function-key-secret",
				"X-Real-IP":       "6.6.6.6",
				"True-Client-IP":  "6.6.6.6",
				"X-Client-IP":     "6.6.6.6",
				"X_Forwarded_For": "6.6.6.6",
				// Spellings with '_', which the platform neither sets nor
				// removes and a CGI or WSGI backend reads as its headers.
				"X_MS_CLIENT_PRINCIPAL_ID":   "p-mallory",
				"X_Ms_Client_Principal_Name": "mallory@example.com",
				"X_Functions_Key":            "function-key-secret",
				// What App Service's front end appends: the client.
				"X-Forwarded-For": "203.0.113.5:51000",
			} {
				hdr[k] = v
			}
			resp, body, _ := Forward(t, g, "GET", "/api/who?code=function-key-secret&x=1;code=function-key-secret", hdr, "")
			if resp.StatusCode != 200 {
				t.Fatalf("forwarded = %d %s; want 200", resp.StatusCode, body)
			}
			r := <-seen
			if r.RequestURI != "/api/who?x=1" {
				t.Errorf("backend got %s; want /api/who?x=1 (no code parameter)", r.RequestURI)
			}
			for k, v := range r.Header {
				lk := strings.ToLower(k)
				switch {
				case lk == "x-functions-key", strings.Contains(strings.Join(v, ","), "function-key-secret"):
					t.Errorf("backend got the function key in %s", k)
				case lk == "x-real-ip", lk == "true-client-ip", lk == "x-client-ip", lk == "x_forwarded_for":
					t.Errorf("backend got the client's %s: %q", k, v)
				case strings.HasPrefix(lk, "x_ms_client_principal"), strings.Contains(strings.Join(v, ","), "mallory"):
					t.Errorf("backend got the client's %s: %q", k, v)
				}
			}
			if xff := r.Header.Get("X-Forwarded-For"); xff != "203.0.113.5" {
				t.Errorf("backend X-Forwarded-For = %q; want the client as the front end saw it, 203.0.113.5", xff)
			}
			for k := range principalHeaders("") {
				if got := r.Header.Get(k) != ""; got != authEnabled {
					t.Errorf("backend got %s: %v; want %v", k, got, authEnabled)
				}
			}
			g.WaitLog(t, loadMargin, func(m map[string]any) bool {
				return m["msg"] == "azure functions host" && m["appServiceAuthentication"] == authEnabled
			})
		})
	}
}

// TestAzureFunctionsCallerScope: async on the Azure custom handler against
// Azurite. With WEBSITE_AUTH_ENABLED=True the principal App Service
// Authentication verified is the caller: its Idempotency-Key deduplicates
// though its bearer token was refreshed, and its status URI is cancelled
// only by it (another principal's DELETE is 404 NotFound, its own 202).
// With authentication off the same headers are the client's forgery and
// count for nothing: a DELETE naming the submitter's principal with another
// Authorization is 404. Before, the principal headers were believed
// without authentication, and anyone could cancel.
func TestAzureFunctionsCallerScope(t *testing.T) {
	t.Parallel()
	az := emulators.StartAzurite(t)
	createQueues(t, az.ConnectionString(), "u1-status") // asyncProfile's topic, as Terraform creates it
	for _, authEnabled := range []bool{true, false} {
		name := "authentication off"
		if authEnabled {
			name = "WEBSITE_AUTH_ENABLED=True"
		}
		t.Run(name, func(t *testing.T) {
			be := newHangFirstBackend(t, 8)
			env := map[string]string{
				"Hosts":                                  be.URL,
				"AsyncModeEnabled":                       "true",
				"AsyncTriggerTimeout":                    "300",
				"UserProfiles":                           asyncProfile,
				"AsyncStore":                             "azure",
				"AzureWebJobsStorage":                    az.ConnectionString(),
				"AzureFunctionsJobHost__functionTimeout": "00:05:00",
			}
			if authEnabled {
				env["WEBSITE_AUTH_ENABLED"] = "True"
			}
			g := StartAzureHandler(t, env)
			as := func(principal, token string, extra map[string]string) map[string]string {
				h := principalHeaders(principal)
				h["Authorization"] = "Bearer " + token
				for k, v := range extra {
					h[k] = v
				}
				return h
			}
			async := map[string]string{"S7PAsyncMode": "true", "X-UserProfile": "u1", "Idempotency-Key": "key-az-" + name}
			submit := func(token string) acceptedDoc {
				t.Helper()
				resp, body, _ := Forward(t, g, "POST", "/reports/who", as("p-alice", token, async), "payload")
				if resp.StatusCode != 202 {
					t.Fatalf("submission = %d %s; want 202", resp.StatusCode, body)
				}
				var acc acceptedDoc
				if err := json.Unmarshal(body, &acc); err != nil || acc.ID == "" {
					t.Fatalf("202 body %q: %v", body, err)
				}
				return acc
			}
			first := submit("token-1")
			if authEnabled {
				if again := submit("token-2"); again.ID != first.ID {
					t.Errorf("the same principal with a refreshed token got id %s; want the first submission's %s", again.ID, first.ID)
				}
			}
			status := "/_gateway/async/" + first.ID
			// Another caller: another principal when the platform
			// verified it; with authentication off, a client that forges
			// the submitter's principal but holds another token.
			other, submitter := as("p-mallory", "token-1", nil), as("p-alice", "token-2", nil)
			if !authEnabled {
				other, submitter = as("p-alice", "token-of-mallory", nil), as("p-whoever", "token-1", nil)
			}
			if resp, body, _ := Forward(t, g, "DELETE", status, other, ""); resp.StatusCode != 404 || !strings.Contains(string(body), `"NotFound"`) {
				t.Errorf("DELETE by another caller = %d %s; want 404 NotFound", resp.StatusCode, body)
			}
			if resp, body, _ := Forward(t, g, "DELETE", status, submitter, ""); resp.StatusCode != 202 {
				t.Errorf("DELETE by the submitter = %d %s; want 202", resp.StatusCode, body)
			}
		})
	}
}

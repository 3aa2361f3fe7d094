package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The check's Azure credentials end to end through the binary's wiring
// (checkCmd: infra/azure's token authorizer); the command line's own tests
// are internal/ops's.

// azureFrontDoor is a loopback stand-in for the gateway behind App Service
// Authentication and a function key: a request without the token or the key
// is answered 401 without x-Attempts, as the platform answers before the
// gateway; one with both gets the gateway's answers to the check's probes.
func azureFrontDoor(t *testing.T, token, key string, seen *atomic.Int32) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gw.example"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.Header.Get("x-functions-key") != key {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		seen.Add(1)
		if r.Header.Get("S7PTTL") == "0" {
			w.Header().Set("x-Attempts", "0")
			w.Header().Set("x-Gateway-Error", "TTLExpired")
			w.WriteHeader(http.StatusPreconditionFailed)
			return
		}
		w.Header().Set("x-Attempts", "1")
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// managedIdentityEndpoint is a loopback App Service managed identity
// endpoint (IDENTITY_ENDPOINT, IDENTITY_HEADER): it hands out token for
// resource, and counts the requests.
func managedIdentityEndpoint(t *testing.T, header, resource, token string, calls *atomic.Int32) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Header.Get("X-IDENTITY-HEADER") != header {
			http.Error(w, "wrong identity header", http.StatusBadRequest)
			return
		}
		if got := r.URL.Query().Get("resource"); got != resource {
			http.Error(w, "resource "+got+", want "+resource, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{
			"access_token": token,
			"expires_on":   strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10),
			"resource":     resource,
			"token_type":   "Bearer",
		})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// unsetAzureEnv removes, for the test, the environment variables by which
// the Azure SDK's default chain would use another credential than the
// managed identity endpoint the test serves.
func unsetAzureEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{"AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH",
		"AZURE_USERNAME", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_TOKEN_CREDENTIALS", "MSI_ENDPOINT", "MSI_SECRET", "IDENTITY_SERVER_THUMBPRINT"} {
		t.Setenv(k, "") // restored after the test
		os.Unsetenv(k)
	}
}

// TestCheckAzureCredentials runs the check against an Azure front door that
// wants an Entra ID token and a function key: the token comes from the
// default credential chain through a loopback managed identity endpoint, as
// App Service provides one, for the resource of --entra-scope.
func TestCheckAzureCredentials(t *testing.T) {
	const (
		clientID = "11111111-2222-3333-4444-555555555555"
		token    = "token-from-the-identity-endpoint"
		key      = "the-function-key"
	)
	// Only the managed identity source of the chain may answer: no
	// service principal, workload identity or chain selection from the
	// environment the test runs in.
	unsetAzureEnv(t)
	// The front door takes only the token the identity endpoint hands out
	// (the SDK may serve it from its cache on later runs).
	var mi, reached atomic.Int32
	idp := managedIdentityEndpoint(t, "identity-header-secret", "api://"+clientID, token, &mi)
	t.Setenv("IDENTITY_ENDPOINT", idp.URL+"/msi/token")
	t.Setenv("IDENTITY_HEADER", "identity-header-secret")
	gw := azureFrontDoor(t, token, key, &reached)

	tests := []struct {
		name    string
		args    []string
		code    int
		want    string
		gateway bool // the probes got past the front door
	}{
		{"token and key", []string{"--entra-scope", "api://" + clientID + "/.default", "--function-key", key, gw.URL}, 0, "2 passed, 0 failed", true},
		{"no credentials", []string{gw.URL}, 1, "--entra-scope api://<client-id>/.default", false},
		{"token without key", []string{"--entra-scope", "api://" + clientID + "/.default", gw.URL}, 1, "give --function-key", false},
		{"key without token", []string{"--function-key", key, gw.URL}, 1, "App Service Authentication wants a token", false},
		{"wrong key", []string{"--entra-scope", "api://" + clientID + "/.default", "--function-key", "other", gw.URL}, 1, "check the function key", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reached.Store(0)
			var out, errOut bytes.Buffer
			code := checkCmd(context.Background(), tt.args, &out, &errOut)
			if code != tt.code || !strings.Contains(out.String()+errOut.String(), tt.want) {
				t.Fatalf("check %q = %d, want %d and output containing %q:\n%s%s", tt.args, code, tt.code, tt.want, out.String(), errOut.String())
			}
			if got := reached.Load() > 0; got != tt.gateway {
				t.Errorf("requests past the front door: %d, want some: %v", reached.Load(), tt.gateway)
			}
		})
	}
}

// TestCheckAzureNoToken: a scope for which no credential gives a token stops
// the check before any probe, exit 2, naming the flag.
func TestCheckAzureNoToken(t *testing.T) {
	unsetAzureEnv(t)
	// The managed identity source alone, and its endpoint refuses.
	t.Setenv("AZURE_TOKEN_CREDENTIALS", "ManagedIdentityCredential")
	var mi, reached atomic.Int32
	idp := managedIdentityEndpoint(t, "identity-header-secret", "api://someone-else", "t", &mi)
	t.Setenv("IDENTITY_ENDPOINT", idp.URL+"/msi/token")
	t.Setenv("IDENTITY_HEADER", "identity-header-secret")
	gw := azureFrontDoor(t, "t", "k", &reached)
	var out, errOut bytes.Buffer
	code := checkCmd(context.Background(), []string{"--entra-scope", "api://cid/.default", gw.URL}, &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "check: --entra-scope api://cid/.default: no token") {
		t.Fatalf("check = %d, want 2 and a message naming --entra-scope:\n%s%s", code, out.String(), errOut.String())
	}
	if reached.Load() != 0 || strings.Contains(out.String(), "PASS") {
		t.Errorf("probes were sent without a token: %s", out.String())
	}
}

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

func TestParseCheckArgs(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want func(c *checkConfig) string // "" when c is as wanted
	}{
		{"defaults", []string{"https://gw.example"}, func(c *checkConfig) string {
			if c.base.String() != "https://gw.example" || c.method != "GET" || c.path != "/" || c.slowPath != "" ||
				c.ttl != 2*time.Second || c.tolerance != time.Second || c.async || c.asyncPath != "/" || c.sigv4 {
				return "not the documented defaults"
			}
			return ""
		}},
		{"URL between flags", []string{"--slow-path", "/delay/10", "https://gw.example/base", "--ttl", "0.5", "--async", "--profile", "u1", "-header", "X-Api-Key: k"}, func(c *checkConfig) string {
			if c.base.Path != "/base" || c.slowPath != "/delay/10" || c.ttl != 500*time.Millisecond || c.ttlText != "0.5" ||
				!c.async || c.profile != "u1" || c.asyncPath != "/delay/10" || c.headers.Get("X-Api-Key") != "k" {
				return "flags after the URL not read"
			}
			return ""
		}},
		{"async path given", []string{"--async", "--profile", "u1", "--async-path", "/report", "--slow-path", "/s", "http://127.0.0.1:8080"}, func(c *checkConfig) string {
			if c.asyncPath != "/report" {
				return "async path " + c.asyncPath
			}
			return ""
		}},
		{"sigv4", []string{"--aws-sigv4", "--region", "eu-west-1", "--method", "post", "https://x.lambda-url.eu-west-1.on.aws/"}, func(c *checkConfig) string {
			if !c.sigv4 || c.region != "eu-west-1" || c.method != "POST" {
				return "sigv4 flags not read"
			}
			return ""
		}},
		{"azure credentials", []string{"--entra-scope", "api://11111111-2222-3333-4444-555555555555/.default", "--function-key", "k3y==", "https://gw.azurewebsites.net"}, func(c *checkConfig) string {
			if c.entraScope != "api://11111111-2222-3333-4444-555555555555/.default" || c.functionKey != "k3y==" || c.sigv4 {
				return "azure credential flags not read"
			}
			return ""
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, code, err := parseCheckArgs(tt.args, io.Discard)
			if err != nil || code != 0 {
				t.Fatalf("parseCheckArgs(%q) = %d, %v", tt.args, code, err)
			}
			if msg := tt.want(c); msg != "" {
				t.Errorf("parseCheckArgs(%q): %s: %+v", tt.args, msg, c)
			}
		})
	}
}

func TestParseCheckArgsErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, "want one URL, got 0"},
		{[]string{"https://a", "https://b"}, "want one URL, got 2"},
		{[]string{"gw.example"}, `URL "gw.example": want an absolute http or https URL`},
		{[]string{"https://gw.example/?a=1"}, "without query"},
		{[]string{"--ttl", "0", "https://gw"}, `--ttl "0": want seconds, more than 0`},
		{[]string{"--ttl", "NaN", "https://gw"}, `--ttl "NaN"`},
		{[]string{"--ttl", "3601", "https://gw"}, `--ttl "3601"`},
		{[]string{"--path", "api", "https://gw"}, `--path "api": want a path starting with /`},
		{[]string{"--slow-path", "/a b", "https://gw"}, `--slow-path "/a b"`},
		{[]string{"--method", "G T", "https://gw"}, `--method "G T"`},
		{[]string{"--header", "no colon", "https://gw"}, `want "Name: value"`},
		{[]string{"--async", "https://gw"}, "--async needs --profile"},
		{[]string{"--wait", "0s", "https://gw"}, "positive durations"},
		{[]string{"--bogus", "https://gw"}, "flag provided but not defined: -bogus"},
		{[]string{"--entra-scope", "api://x", "https://gw"}, `--entra-scope "api://x": want the app registration's scope`},
		{[]string{"--entra-scope", "/.default", "https://gw"}, `--entra-scope "/.default"`},
		{[]string{"--entra-scope", "api://x /.default", "https://gw"}, `--entra-scope "api://x /.default"`},
		{[]string{"--function-key", "a b", "https://gw"}, "--function-key: want the key itself"},
		{[]string{"--aws-sigv4", "--function-key", "k", "https://gw"}, "give one or the other"},
		{[]string{"--aws-sigv4", "--entra-scope", "api://x/.default", "https://gw"}, "give one or the other"},
	}
	for _, tt := range tests {
		_, code, err := parseCheckArgs(tt.args, io.Discard)
		if err == nil || code != 2 || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parseCheckArgs(%q) = %d, %v; want exit 2 and an error containing %q", tt.args, code, err, tt.want)
		}
	}
}

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

// FuzzCheckCredentials: whatever --entra-scope and --function-key say, the
// flags are either refused (exit 2, naming the flag) or give a scope that
// ends in /.default and a key that can be sent as one header value.
func FuzzCheckCredentials(f *testing.F) {
	f.Add("api://11111111-2222-3333-4444-555555555555/.default", "k3y==")
	f.Add("/.default", "")
	f.Add("api://x /.default", "a\r\nb")
	f.Add("", "key")
	f.Fuzz(func(t *testing.T, scope, key string) {
		args := []string{"https://gw.example"}
		if scope != "" {
			args = append(args, "--entra-scope", scope)
		}
		if key != "" {
			args = append(args, "--function-key", key)
		}
		c, code, err := parseCheckArgs(args, io.Discard)
		if err != nil {
			if code != 2 || !(strings.Contains(err.Error(), "--entra-scope") || strings.Contains(err.Error(), "--function-key")) {
				t.Fatalf("parseCheckArgs(%q) = %d, %v; want exit 2 naming the flag", args, code, err)
			}
			return
		}
		if c.entraScope != "" && (!strings.HasSuffix(c.entraScope, "/.default") || strings.ContainsAny(c.entraScope, " \t\r\n") || c.entraScope == "/.default") {
			t.Fatalf("scope %q accepted", c.entraScope)
		}
		if c.functionKey != "" && !checkHeaderValue(c.functionKey) {
			t.Fatalf("key %q accepted", c.functionKey)
		}
		if (scope != "") != (c.entraScope != "") || (key != "") != (c.functionKey != "") {
			t.Fatalf("flags %q %q became scope %q key %q", scope, key, c.entraScope, c.functionKey)
		}
	})
}

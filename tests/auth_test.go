package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"fngateway/internal/emulators"
)

// noSecretsLogged fails when a log line of gw carries a credential. It
// first waits for the log lines of the requests sent (a line may follow
// its answer).
func noSecretsLogged(tb testing.TB, gw *Gateway, requests int, secrets ...string) {
	tb.Helper()
	for deadline := time.Now().Add(loadMargin); ; time.Sleep(10 * time.Millisecond) { // polling a log with a deadline
		n := 0
		for _, m := range gw.Logs() {
			if m["msg"] == "request" {
				n++
			}
		}
		if n >= requests {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d request log lines after %v; want %d", n, loadMargin, requests)
		}
	}
	for _, l := range gw.Logs() {
		line, _ := json.Marshal(l)
		for _, s := range append(secrets, "AWS4-HMAC-SHA256", "Signature=", "Bearer ") {
			if s != "" && strings.Contains(string(line), s) {
				tb.Errorf("a log line carries a credential (%q): %s", s, line)
			}
		}
	}
}

// TestSigV4ToVersitygw sends S3 requests through the gateway to versitygw,
// which checks their SigV4 signatures: the gateway signs with the SDK's
// default credentials (here the environment's), a buffered body with its
// hash and a streamed one as UNSIGNED-PAYLOAD; the client's own
// Authorization does not reach the backend; and a gateway holding a wrong
// secret is refused by versitygw itself.
func TestSigV4ToVersitygw(t *testing.T) {
	t.Parallel()
	v := emulators.StartVersitygw(t)
	env := func(secret string) map[string]string {
		return map[string]string{
			"Hosts":                     v.Endpoint(),
			"Routes":                    `[{"prefix":"/gwbucket","methods":["GET","HEAD","PUT"],"auth":{"type":"sigv4","service":"s3","region":"` + emulators.VersitygwRegion + `"}}]`,
			"MaxRetryBodyBytes":         "64",
			"AWS_ACCESS_KEY_ID":         emulators.VersitygwAccessKey,
			"AWS_SECRET_ACCESS_KEY":     secret,
			"AWS_EC2_METADATA_DISABLED": "true",
		}
	}
	gw := StartGateway(t, env(emulators.VersitygwSecretKey))
	client := map[string]string{"Authorization": "Bearer client-secret-token"}
	resp, body, _ := Do(t, "PUT", gw.URL+"/gwbucket", client, "")
	if resp.StatusCode != 200 {
		t.Fatalf("create bucket through the gateway: %d %s", resp.StatusCode, body)
	}
	resp, body, _ = Do(t, "PUT", gw.URL+"/gwbucket/small.txt", client, "hello, signed body")
	if resp.StatusCode != 200 {
		t.Fatalf("PUT a buffered body: %d %s", resp.StatusCode, body)
	}
	large := strings.Repeat("streamed ", 100) // over MaxRetryBodyBytes: streamed, UNSIGNED-PAYLOAD
	resp, body, _ = Do(t, "PUT", gw.URL+"/gwbucket/dir/large%20file.txt", client, large)
	if resp.StatusCode != 200 {
		t.Fatalf("PUT a streamed body: %d %s", resp.StatusCode, body)
	}
	for key, want := range map[string]string{"small.txt": "hello, signed body", "dir/large%20file.txt": large} {
		resp, body, _ = Do(t, "GET", gw.URL+"/gwbucket/"+key, nil, "")
		if resp.StatusCode != 200 || string(body) != want {
			t.Errorf("GET %s: %d %.80q; want 200 and the body put", key, resp.StatusCode, body)
		}
	}
	noSecretsLogged(t, gw, 5, emulators.VersitygwSecretKey, "client-secret-token")

	bad := StartGateway(t, env("not-the-secret"))
	resp, body, _ = Do(t, "GET", bad.URL+"/gwbucket/small.txt", nil, "")
	if resp.StatusCode != 403 || !strings.Contains(string(body), "SignatureDoesNotMatch") {
		t.Errorf("a wrong secret: %d %s; want versitygw's 403 SignatureDoesNotMatch", resp.StatusCode, body)
	}
}

// TestEntraToAzurite sends Blob requests through the gateway to Azurite in
// OAuth mode. Tokens come from a managed-identity endpoint as App Service
// serves it (IDENTITY_ENDPOINT, IDENTITY_HEADER), played by a loopback
// server issuing tokens Azurite accepts: one token serves every request.
// Without a token the request is 502 BackendAuthFailed and nothing is sent.
func TestEntraToAzurite(t *testing.T) {
	t.Parallel()
	az := emulators.StartAzuriteOAuth(t)
	cred := az.TokenCredential("0b7b2a2e-1c9c-4d59-9c4b-6a0f2d1e3f40")
	var fetches atomic.Int64
	identity := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Identity-Header") != "the-identity-header" || r.URL.Query().Get("resource") != "https://storage.azure.com" {
			http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
			return
		}
		fetches.Add(1)
		tok, err := cred.GetToken(context.Background(), policy.TokenRequestOptions{})
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":%q,"expires_on":"%d","resource":"https://storage.azure.com","token_type":"Bearer"}`, tok.Token, tok.ExpiresOn.Unix())
	}))
	defer identity.Close()
	u, err := url.Parse(az.BlobEndpoint())
	if err != nil {
		t.Fatal(err)
	}
	blob := "https://127.0.0.1:" + u.Port()
	routes := `[{"prefix":"/devstoreaccount1","hosts":["` + blob + `"],"methods":["GET","HEAD","PUT"],"allowHeaders":["x-ms-blob-type"],` +
		`"allowQuery":["restype=container"],"auth":{"type":"entra","scope":"https://storage.azure.com/.default"}}]`
	gw := StartGateway(t, map[string]string{
		"Hosts":             blob,
		"Routes":            routes,
		"IDENTITY_ENDPOINT": identity.URL + "/msi/token",
		"IDENTITY_HEADER":   "the-identity-header",
		"SSL_CERT_FILE":     az.CertFile(),
	})
	v := map[string]string{"x-ms-version": "2021-08-06", "Authorization": "Bearer client-secret-token"}
	resp, body, _ := Do(t, "PUT", gw.URL+"/devstoreaccount1/gwcontainer?restype=container", v, "")
	if resp.StatusCode != 201 {
		t.Fatalf("create container through the gateway: %d %s", resp.StatusCode, body)
	}
	put := map[string]string{"x-ms-version": "2021-08-06", "x-ms-blob-type": "BlockBlob"}
	resp, body, _ = Do(t, "PUT", gw.URL+"/devstoreaccount1/gwcontainer/b1", put, "blob via managed identity")
	if resp.StatusCode != 201 {
		t.Fatalf("put blob: %d %s", resp.StatusCode, body)
	}
	resp, body, _ = Do(t, "GET", gw.URL+"/devstoreaccount1/gwcontainer/b1", v, "")
	if resp.StatusCode != 200 || string(body) != "blob via managed identity" {
		t.Errorf("get blob: %d %q", resp.StatusCode, body)
	}
	if n := fetches.Load(); n != 1 {
		t.Errorf("the identity endpoint was asked %d times; want once, the token cached", n)
	}
	noSecretsLogged(t, gw, 3, "client-secret-token")

	// An identity endpoint that cannot give a token: 502, nothing sent.
	var reached atomic.Int64
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1) }))
	defer backend.Close()
	identity.Close()
	down := StartGateway(t, map[string]string{
		"Hosts":             backend.URL,
		"Routes":            `[{"prefix":"/m","methods":["POST"],"auth":{"type":"entra","scope":"https://cognitiveservices.azure.com/.default"}}]`,
		"IDENTITY_ENDPOINT": identity.URL + "/msi/token",
		"IDENTITY_HEADER":   "the-identity-header",
	})
	resp, body, _ = Do(t, "POST", down.URL+"/m/chat", nil, "{}")
	if ed := decodeError(t, resp, body); resp.StatusCode != 502 || ed.Error.Code != "BackendAuthFailed" || resp.Header.Get("x-Gateway-Error") != "BackendAuthFailed" {
		t.Errorf("no token: %d %s; want 502 BackendAuthFailed", resp.StatusCode, body)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the backend was reached %d times without a credential; want 0", n)
	}
}

package tests

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"fngateway/internal/emulators"
)

// TestLambdaHedgeAndSigV4 runs hedging and SigV4 signing on the Lambda
// host (the binary under the Runtime Interface Emulator, frozen between
// invocations): the first attempt, kept running past its Timeout beside
// the hedge, answers, and the hedge's backend sees its connection closed
// before the invocation returns; S3 requests reach versitygw signed with
// the function's credentials.
func TestLambdaHedgeAndSigV4(t *testing.T) {
	t.Parallel()
	const timeout = hedgeTimeout
	first, second := newHedgedBackends(t)
	v := emulators.StartVersitygw(t)
	routes := fmt.Sprintf(`[{"prefix":"/h","hosts":[%q,%q],"timeoutMs":%d,"hedgeOnPerTryTimeout":true},`+
		`{"prefix":"/lambdabucket","hosts":[%q],"methods":["GET","HEAD","PUT"],"auth":{"type":"sigv4","service":"s3","region":%q}}]`,
		first.URL, second.URL, timeout.Milliseconds(), v.Endpoint(), emulators.VersitygwRegion)
	f := startFunction(t, binary, map[string]string{"Hosts": second.URL, "Routes": routes, "AWS_LAMBDA_FUNCTION_TIMEOUT": "10",
		"AWS_ACCESS_KEY_ID": emulators.VersitygwAccessKey, "AWS_SECRET_ACCESS_KEY": emulators.VersitygwSecretKey,
		"AWS_EC2_METADATA_DISABLED": "true"})

	a, body, took := f.invokeHTTP(t, httpEvent(t, "lambda-urls-request.json", httpRequest{method: "GET", rawPath: "/h/x"}))
	// The first attempt, still running past its Timeout, answers once the
	// hedge has started: without hedging it would be cut at its Timeout.
	if a.StatusCode != 200 || string(body) != "first" || a.Headers["X-Attempts"] != "2" {
		t.Fatalf("hedged GET: %d %q x-Attempts %q; want 200 from the first attempt after 2 attempts", a.StatusCode, body, a.Headers["X-Attempts"])
	}
	if took < timeout {
		t.Errorf("answered after %v; want after the first attempt's Timeout (%v), when the hedge has started", took, timeout)
	}
	// The function is frozen now: a close the backend sees was sent before
	// the invocation returned (its server notices it a moment later).
	select {
	case <-second.closed:
	case <-time.After(loadMargin):
		t.Errorf("the hedge's backend never saw its connection closed: it was left open when the invocation returned")
	}

	for _, r := range []struct {
		method, path, body string
	}{{"PUT", "/lambdabucket", ""}, {"PUT", "/lambdabucket/k", "signed on Lambda"}} {
		a, body, _ = f.invokeHTTP(t, httpEvent(t, "lambda-urls-request.json", httpRequest{method: r.method, rawPath: r.path, body: []byte(r.body),
			headers: map[string]string{"authorization": "Bearer client-token"}}))
		if a.StatusCode != 200 {
			t.Fatalf("%s %s: %d %s", r.method, r.path, a.StatusCode, body)
		}
	}
	a, body, _ = f.invokeHTTP(t, httpEvent(t, "lambda-urls-request.json", httpRequest{method: "GET", rawPath: "/lambdabucket/k"}))
	if a.StatusCode != 200 || string(body) != "signed on Lambda" {
		t.Errorf("GET the object: %d %q", a.StatusCode, body)
	}
}

// TestAzureFunctionsHedgeAndEntra runs hedging and Entra ID tokens on the
// Azure Functions custom handler: the first attempt answers past its
// Timeout beside the hedge, which is cancelled, and Blob requests
// reach Azurite (OAuth) with a token from the App Service managed-identity
// endpoint, fetched once.
func TestAzureFunctionsHedgeAndEntra(t *testing.T) {
	t.Parallel()
	const timeout = hedgeTimeout
	first, second := newHedgedBackends(t)
	az := emulators.StartAzuriteOAuth(t)
	cred := az.TokenCredential("6c1d2f3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f")
	var fetches atomic.Int64
	identity := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Identity-Header") != "azure-identity-header" {
			http.Error(w, `{"error":"bad header"}`, http.StatusBadRequest)
			return
		}
		fetches.Add(1)
		tok, err := cred.GetToken(context.Background(), policy.TokenRequestOptions{})
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		fmt.Fprintf(w, `{"access_token":%q,"expires_on":"%d","resource":%q,"token_type":"Bearer"}`, tok.Token, tok.ExpiresOn.Unix(), r.URL.Query().Get("resource"))
	}))
	defer identity.Close()
	u, err := url.Parse(az.BlobEndpoint())
	if err != nil {
		t.Fatal(err)
	}
	blob := "https://127.0.0.1:" + u.Port()
	routes := fmt.Sprintf(`[{"prefix":"/h","hosts":[%q,%q],"timeoutMs":%d,"hedgeOnPerTryTimeout":true},`+
		`{"prefix":"/devstoreaccount1","hosts":[%q],"methods":["GET","HEAD","PUT"],"allowHeaders":["x-ms-blob-type"],"allowQuery":["restype=container"],`+
		`"auth":{"type":"entra","scope":"https://storage.azure.com/.default"}}]`,
		first.URL, second.URL, timeout.Milliseconds(), blob)
	g := StartAzureHandler(t, map[string]string{"Hosts": second.URL, "Routes": routes,
		"IDENTITY_ENDPOINT": identity.URL + "/msi/token", "IDENTITY_HEADER": "azure-identity-header", "SSL_CERT_FILE": az.CertFile()})

	resp, body, took := Forward(t, g, "GET", "/h/x", nil, "")
	if resp.StatusCode != 200 || string(body) != "first" || resp.Header.Get("X-Attempts") != "2" || took < timeout {
		t.Errorf("hedged GET: %d %q x-Attempts %q after %v; want 200 from the first attempt, past its Timeout (%v)", resp.StatusCode, body, resp.Header.Get("X-Attempts"), took, timeout)
	}
	select {
	case <-second.closed:
	case <-time.After(loadMargin):
		t.Error("the hedge's backend never saw its connection closed")
	}
	ver := map[string]string{"x-ms-version": "2021-08-06"}
	if resp, body, _ := Forward(t, g, "PUT", "/devstoreaccount1/fncontainer?restype=container", ver, ""); resp.StatusCode != 201 {
		t.Fatalf("create container: %d %s", resp.StatusCode, body)
	}
	if resp, body, _ := Forward(t, g, "PUT", "/devstoreaccount1/fncontainer/b", map[string]string{"x-ms-version": "2021-08-06", "x-ms-blob-type": "BlockBlob"}, "on Azure"); resp.StatusCode != 201 {
		t.Fatalf("put blob: %d %s", resp.StatusCode, body)
	}
	if resp, body, _ := Forward(t, g, "GET", "/devstoreaccount1/fncontainer/b", ver, ""); resp.StatusCode != 200 || string(body) != "on Azure" {
		t.Errorf("get blob: %d %q", resp.StatusCode, body)
	}
	if n := fetches.Load(); n != 1 {
		t.Errorf("token fetches = %d; want 1", n)
	}
}

package tests

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// callerTrigger is the AsyncTriggerTimeout of the caller tests, whose
// backend must see each submission's attempt before the 202 freezes the
// function: long enough for the attempt to get there on a loaded machine.
var callerTrigger = fmt.Sprint((loadMargin / 5).Milliseconds())

// TestLambdaIdempotencyPerIAMCaller: on the Lambda host (the real binary
// under the Runtime Interface Emulator, invoked with AWS's Function URL
// sample event) an Idempotency-Key is scoped to the AWS_IAM caller Lambda
// verified, requestContext.authorizer.iam.userArn: the same key, request and
// headers from another IAM user is another request (new id, a backend
// call of its own), from the same user the first submission's 202. Before,
// the second user was handed the first user's id, and so its result.
func TestLambdaIdempotencyPerIAMCaller(t *testing.T) {
	t.Parallel()
	hang, cancelled := silentBackend(t)
	f := startFunction(t, binary, map[string]string{
		"Hosts":                       hang.URL,
		"AsyncModeEnabled":            "true",
		"AsyncTriggerTimeout":         callerTrigger,
		"UserProfiles":                asyncProfile,
		"AsyncStore":                  "file:" + t.TempDir(),
		"AWS_LAMBDA_FUNCTION_TIMEOUT": "10",
	})
	submit := func(userArn string) acceptedDoc {
		t.Helper()
		ev := httpEvent(t, "lambda-urls-request.json", httpRequest{
			method: "POST", rawPath: "/reports/iam",
			headers: map[string]string{"s7pasyncmode": "true", "x-userprofile": "u1", "idempotency-key": "key-iam-1",
				"authorization": "AWS4-HMAC-SHA256 Credential=shared/20200312/us-west-2/lambda/aws4_request"},
			body: []byte("payload"),
		})
		var m map[string]any
		if err := json.Unmarshal(ev, &m); err != nil {
			t.Fatal(err)
		}
		iam := m["requestContext"].(map[string]any)["authorizer"].(map[string]any)["iam"].(map[string]any)
		if userArn != "" {
			iam["userArn"] = userArn
		}
		ev, _ = json.Marshal(m)
		a, body, _ := f.invokeHTTP(t, ev)
		if a.StatusCode != http.StatusAccepted {
			t.Fatalf("submission as %q: %d %s; want 202", userArn, a.StatusCode, body)
		}
		var acc acceptedDoc
		if err := json.Unmarshal(body, &acc); err != nil || acc.ID == "" {
			t.Fatalf("202 body %q: %v", body, err)
		}
		return acc
	}
	first := submit("") // the sample's own caller: arn:aws:iam::111122223333:user/example-user
	other := submit("arn:aws:iam::111122223333:user/another-user")
	if other.ID == first.ID {
		t.Fatalf("another IAM caller with the same key and request got the first caller's id %s", first.ID)
	}
	// Each new request reached the backend once, its attempt cancelled by
	// the 202 (the function is frozen after it answers).
	for i := range 2 {
		select {
		case <-cancelled:
		case <-time.After(loadMargin):
			t.Fatalf("backend attempts seen = %d; want one per caller, 2", i)
		}
	}
	if again := submit(""); again.ID != first.ID {
		t.Errorf("the same IAM caller again got id %s; want the first submission's %s", again.ID, first.ID)
	}
}

// headerBackend never answers; it sends the headers of every request it
// gets on seen, and ends when the gateway cancels the request.
func headerBackend(tb testing.TB) (*httptest.Server, chan http.Header) {
	seen := make(chan http.Header, 16)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		seen <- r.Header.Clone()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	tb.Cleanup(func() { close(release); srv.Close() })
	return srv, seen
}

// sigV4Event is a Function URL event (AWS's sample, AuthType AWS_IAM, its
// caller userArn) carrying a request really signed with SigV4 by the AWS
// SDK's signer at signedAt, as a client signs its call to the Function URL:
// Authorization, X-Amz-Date, X-Amz-Security-Token, X-Amz-Content-Sha256.
func sigV4Event(tb testing.TB, method, path, userArn string, hdr map[string]string, body []byte, signedAt time.Time) []byte {
	tb.Helper()
	const host = "abcdefghij.lambda-url.us-west-2.on.aws"
	req, err := http.NewRequest(method, "https://"+host+path, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	sum := sha256.Sum256(body)
	payload := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", payload)
	creds := aws.Credentials{AccessKeyID: "ASIAEXAMPLEKEY", SecretAccessKey: "example-secret", SessionToken: "example-session-token"}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, payload, "lambda", "us-west-2", signedAt); err != nil {
		tb.Fatal(err)
	}
	headers := map[string]string{"host": host}
	for k, v := range req.Header {
		headers[strings.ToLower(k)] = strings.Join(v, ",")
	}
	ev := httpEvent(tb, "lambda-urls-request.json", httpRequest{method: method, rawPath: path, headers: headers, body: body})
	var m map[string]any
	if err := json.Unmarshal(ev, &m); err != nil {
		tb.Fatal(err)
	}
	delete(m["headers"].(map[string]any), "header1")
	m["requestContext"].(map[string]any)["authorizer"].(map[string]any)["iam"].(map[string]any)["userArn"] = userArn
	m["requestContext"].(map[string]any)["domainName"] = host
	ev, err = json.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return ev
}

// TestLambdaIAMSignatureStaysOut: behind an AWS_IAM Function URL (the real
// binary under the Runtime Interface Emulator) the caller's SigV4
// signature — Authorization, X-Amz-Date, X-Amz-Security-Token,
// X-Amz-Content-Sha256, really signed by the AWS SDK — reaches no backend
// and no record (a backend could have replayed the signed request to the
// Function URL within its window); an Idempotency-Key from one userArn
// deduplicates across two differently signed requests (same id back); and
// the status URI is cancelled only by its submitter: a DELETE signed by
// another IAM user is 404 NotFound, one from the submitter (signed anew)
// 202. Before, the signature went to every backend, the key never
// deduplicated (the signature was in its scope) and anyone could cancel.
func TestLambdaIAMSignatureStaysOut(t *testing.T) {
	t.Parallel()
	backend, seen := headerBackend(t)
	store := t.TempDir()
	f := startFunction(t, binary, map[string]string{
		"Hosts":                       backend.URL,
		"AsyncModeEnabled":            "true",
		"AsyncTriggerTimeout":         callerTrigger,
		"UserProfiles":                asyncProfile,
		"AsyncStore":                  "file:" + store,
		"AWS_LAMBDA_FUNCTION_TIMEOUT": "10",
	})
	const alice, mallory = "arn:aws:iam::111122223333:user/alice", "arn:aws:iam::111122223333:user/mallory"
	hdr := map[string]string{"S7PAsyncMode": "true", "X-UserProfile": "u1", "Idempotency-Key": "key-signed-1", "Content-Type": "text/plain"}
	first := time.Now().UTC()
	submit := func(signedAt time.Time) (acceptedDoc, string) {
		t.Helper()
		ev := sigV4Event(t, "POST", "/reports/signed", alice, hdr, []byte("payload"), signedAt)
		var m map[string]any
		json.Unmarshal(ev, &m)
		auth, _ := m["headers"].(map[string]any)["authorization"].(string)
		a, body, _ := f.invokeHTTP(t, ev)
		if a.StatusCode != http.StatusAccepted {
			t.Fatalf("signed submission: %d %s; want 202", a.StatusCode, body)
		}
		var acc acceptedDoc
		if err := json.Unmarshal(body, &acc); err != nil || acc.ID == "" {
			t.Fatalf("202 body %q: %v", body, err)
		}
		return acc, auth
	}
	acc1, auth1 := submit(first)
	var got http.Header
	select {
	case got = <-seen:
	case <-time.After(30 * time.Second):
		t.Fatal("the backend never saw the request")
	}
	for _, k := range []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-Sha256"} {
		if v := got.Values(k); len(v) > 0 {
			t.Errorf("backend got %s: %q; want it removed", k, v)
		}
	}
	if got.Get("Idempotency-Key") != "key-signed-1" || got.Get("Content-Type") != "text/plain" {
		t.Errorf("backend headers %v; want the client's own kept", got)
	}
	acc2, auth2 := submit(first.Add(2 * time.Second))
	if auth1 == auth2 {
		t.Fatalf("the two requests carry the same signature %q; want two signatures", auth1)
	}
	if acc2.ID != acc1.ID {
		t.Errorf("the same IAM caller, signed anew, got id %s; want the first submission's %s", acc2.ID, acc1.ID)
	}
	// Nothing of the signature is stored, in the record or anywhere else.
	filepath.WalkDir(store, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(p)
		for _, secret := range []string{"AWS4-HMAC-SHA256", "example-session-token", "ASIAEXAMPLEKEY", "user/alice"} {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s holds %q", p, secret)
			}
		}
		return nil
	})

	status := "/_gateway/async/" + acc1.ID
	cancel := func(userArn string, signedAt time.Time) (int, []byte) {
		t.Helper()
		a, body, _ := f.invokeHTTP(t, sigV4Event(t, "DELETE", status, userArn, nil, nil, signedAt))
		return a.StatusCode, body
	}
	if code, body := cancel(mallory, first.Add(3*time.Second)); code != http.StatusNotFound || !bytes.Contains(body, []byte(`"NotFound"`)) {
		t.Errorf("DELETE by another IAM user: %d %s; want 404 NotFound", code, body)
	}
	if code, body := cancel(alice, first.Add(4*time.Second)); code != http.StatusAccepted {
		t.Errorf("DELETE by the submitter, signed anew: %d %s; want 202", code, body)
	}
}

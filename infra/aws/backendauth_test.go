package aws

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"fngateway/internal/emulators"
)

// TestSignerAgainstVersitygw signs requests that versitygw checks: a
// bucket made and an object put and read back with the right secret, a
// streamed body as UNSIGNED-PAYLOAD, and a 403 from versitygw itself with a
// wrong one.
func TestSignerAgainstVersitygw(t *testing.T) {
	v := emulators.StartVersitygw(t)
	ctx := context.Background()
	good := NewSigner(credentials.NewStaticCredentialsProvider(emulators.VersitygwAccessKey, emulators.VersitygwSecretKey, ""), "s3", emulators.VersitygwRegion)
	bad := NewSigner(credentials.NewStaticCredentialsProvider(emulators.VersitygwAccessKey, "wrong-secret", ""), "s3", emulators.VersitygwRegion)
	send := func(s *Signer, method, path, body string, streamed bool) (int, string) {
		t.Helper()
		r, err := http.NewRequestWithContext(ctx, method, v.Endpoint()+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var buf []byte
		if !streamed {
			buf = []byte(body)
		}
		if err := s.Authorize(ctx, r, buf, streamed); err != nil {
			t.Fatalf("Authorize: %v", err)
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		method, path, body string
		streamed           bool
	}{{"PUT", "/signed-bucket", "", false}, {"PUT", "/signed-bucket/a%20b", "buffered", false}, {"PUT", "/signed-bucket/s", "streamed body", true}} {
		if code, body := send(good, c.method, c.path, c.body, c.streamed); code != 200 {
			t.Fatalf("%s %s: %d %s", c.method, c.path, code, body)
		}
	}
	if code, body := send(good, "GET", "/signed-bucket/s", "", false); code != 200 || body != "streamed body" {
		t.Errorf("GET: %d %q", code, body)
	}
	if code, body := send(bad, "GET", "/signed-bucket/s", "", false); code != 403 || !strings.Contains(body, "SignatureDoesNotMatch") {
		t.Errorf("a wrong secret: %d %s; want versitygw's 403 SignatureDoesNotMatch", code, body)
	}
}

// TestSignerStreamedBodyOutsideS3: only S3 accepts UNSIGNED-PAYLOAD.
func TestSignerStreamedBodyOutsideS3(t *testing.T) {
	s := NewSigner(credentials.NewStaticCredentialsProvider("k", "s", ""), "lambda", "eu-west-1")
	r, _ := http.NewRequest("POST", "http://127.0.0.1:9/x", strings.NewReader("x"))
	err := s.Authorize(context.Background(), r, nil, true)
	if err == nil || !strings.Contains(err.Error(), "UNSIGNED-PAYLOAD") {
		t.Errorf("err = %v; want one saying only s3 accepts UNSIGNED-PAYLOAD", err)
	}
	if r.Header.Get("Authorization") != "" {
		t.Error("a request that cannot be signed got an Authorization")
	}
}

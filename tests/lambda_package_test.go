package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"fngateway/internal/emulators"
)

var (
	lambdaPackageOnce sync.Once
	lambdaPackageBin  string
	lambdaPackageErr  error
)

// lambdaPackage builds the gateway once with the tags of the Makefile's
// package-aws rule (-tags lambdaonly among them: the AWS configuration from
// what Lambda gives, no SDK config package), for this machine.
func lambdaPackage(tb testing.TB) string {
	tb.Helper()
	lambdaPackageOnce.Do(func() {
		mk, err := os.ReadFile("../Makefile")
		if err != nil {
			lambdaPackageErr = err
			return
		}
		m := regexp.MustCompile(`(?m)^package-aws:(?:\n\t.*)*?go build -tags (\S+)`).FindSubmatch(mk)
		if m == nil {
			lambdaPackageErr = fmt.Errorf("no go build -tags in the Makefile's package-aws rule")
			return
		}
		lambdaPackageBin = filepath.Join(filepath.Dir(binary), "bootstrap-package-aws")
		build := exec.Command("go", "build", "-tags", string(m[1]), "-trimpath", "-ldflags=-s -w", "-o", lambdaPackageBin, "../functions")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			lambdaPackageErr = fmt.Errorf("building the gateway as make package-aws does (-tags %s): %v\n%s", m[1], err, out)
		}
	})
	if lambdaPackageErr != nil {
		tb.Fatal(lambdaPackageErr)
	}
	return lambdaPackageBin
}

// TestLambdaPackageAsyncS3SQS: the Lambda zip's bootstrap, which builds its
// AWS configuration from the environment alone (-tags lambdaonly), reaches
// S3 and SQS through AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL_SQS with the
// credentials of AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, as the
// function's role gives them: 202 with the record in S3 and the
// continuation on the queue; the continuation, delivered as an SQS event,
// writes the result, which the status URI answers 303 to, presigned with
// the same credentials.
func TestLambdaPackageAsyncS3SQS(t *testing.T) {
	t.Parallel()
	bootstrap := lambdaPackage(t)
	v := emulators.StartVersitygw(t)
	fq := emulators.StartFauxqs(t)
	be := newAsyncBackend(t)
	env := lambdaS3SQSEnv(t, be.URL, v, fq)
	env["AWS_LAMBDA_FUNCTION_TIMEOUT"] = strconv.Itoa(int((loadMargin + 5*time.Second) / time.Second))
	f := startFunction(t, bootstrap, env)

	a, body, _ := f.invokeHTTP(t, httpEvent(t, "lambda-urls-request.json", httpRequest{
		method: "POST", rawPath: "/reports/package",
		headers: map[string]string{"s7pasyncmode": "true", "x-userprofile": "u1"},
		body:    []byte("payload"),
	}))
	be.release("/reports/package")
	var acc acceptedDoc
	if a.StatusCode != http.StatusAccepted || json.Unmarshal(body, &acc) != nil || acc.ID == "" {
		t.Fatalf("status %d %s, want 202 with the request's id\n%s", a.StatusCode, body, f.rie.Log())
	}
	msgID, msgBody, _ := receiveContinuation(t, sqsClient(fq), env["AsyncQueue"])
	if want := fmt.Sprintf(`{"v":1,"id":"%s"}`, acc.ID); msgBody != want {
		t.Fatalf("continuation message %q, want %q", msgBody, want)
	}
	if failed := f.invokeSQS(t, sqsEvent(t, [2]string{msgID, msgBody})); len(failed) != 0 {
		t.Fatalf("batch item failures %v, want none\n%s", failed, f.rie.Log())
	}
	su, err := url.Parse(acc.StatusURI)
	if err != nil {
		t.Fatal(err)
	}
	sa, sb, _ := f.invokeHTTP(t, httpEvent(t, "lambda-urls-request.json", httpRequest{method: "GET", rawPath: su.EscapedPath()}))
	if sa.StatusCode != http.StatusSeeOther || sa.Headers["Location"] == "" {
		t.Fatalf("status URI: %d %s, want 303\n%s", sa.StatusCode, sb, f.rie.Log())
	}
	resp, data, _ := Do(t, "GET", sa.Headers["Location"], nil, "")
	if resp.StatusCode != http.StatusOK || !bytes.Equal(data, asyncResult) {
		t.Errorf("presigned data URL: %d %x, want 200 and the backend's exact body", resp.StatusCode, data)
	}
}

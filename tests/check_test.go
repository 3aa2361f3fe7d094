package tests

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"fngateway/internal/emulators"
)

// `gateway check` against each host: the local server, the Lambda
// function under aws-lambda-rie behind a loopback Function URL (AuthType
// AWS_IAM: it verifies SigV4 signatures), and the Azure custom handler
// behind a loopback front that forwards as the Functions host does; and
// against servers that break the contract, where it must fail.

// runCheckCmd runs the binary's check subcommand with the extra
// environment env and returns its output and exit code.
func runCheckCmd(tb testing.TB, env []string, args ...string) (string, int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append([]string{"check"}, args...)...)
	cmd.Env = append(baseEnv(), env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	tb.Fatalf("gateway check: %v\n%s", err, out)
	return "", 0
}

// ttlTolerance is the --tolerance of the TTL probes against real hosts:
// how much later than --ttl the 504 may arrive on a loaded machine (on
// Lambda, a thaw and the emulator's invocation too). The tolerance bounds
// only the lateness: check still fails a 504 before --ttl.
var ttlTolerance = loadMargin.String()

// checkBackend serves the probes' paths: "/" at once, "/slow" after 5 s
// (or when the gateway cancels it), "/async" after asyncDelay.
func checkBackend(tb testing.TB, asyncDelay time.Duration) *httptest.Server {
	tb.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var d time.Duration
		switch r.URL.Path {
		case "/slow":
			d = 5 * time.Second
		case "/async":
			d = asyncDelay
		}
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(201)
		fmt.Fprintf(w, "done %s", r.URL.Path)
	}))
	tb.Cleanup(srv.Close)
	return srv
}

// wantReport checks check's exit code and that its output holds every
// line part in want.
func wantReport(tb testing.TB, out string, code, wantCode int, want ...string) {
	tb.Helper()
	tb.Logf("gateway check exit %d:\n%s", code, out)
	if code != wantCode {
		tb.Errorf("exit code %d; want %d\n%s", code, wantCode, out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			tb.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

// TestCheckLocal runs the probes against the local host.
func TestCheckLocal(t *testing.T) {
	t.Parallel()
	be := checkBackend(t, time.Second)
	g := StartGateway(t, map[string]string{
		"Hosts": be.URL, "AsyncModeEnabled": "true", "UserProfiles": asyncProfile, "AsyncTriggerTimeout": "300",
	})
	t.Run("defaults", func(t *testing.T) {
		out, code := runCheckCmd(t, nil, g.URL)
		wantReport(t, out, code, 0, "PASS  pass-through  GET / → 201", "x-Attempts: 1",
			"PASS  ttl           GET / with S7PTTL: 0 → 412 TTLExpired", "2 passed, 0 failed")
	})
	t.Run("slow path and async", func(t *testing.T) {
		out, code := runCheckCmd(t, nil, "--slow-path", "/slow", "--ttl", "1", "--tolerance", ttlTolerance, g.URL, "--async", "--profile", "u1", "--async-path", "/async")
		wantReport(t, out, code, 0, "PASS  ttl           GET /slow with S7PTTL: 1 → 504 TTLExpired",
			"PASS  async         GET /async with S7PAsyncMode: true, X-UserProfile: u1 → 202", "3 passed, 0 failed")
	})
	t.Run("async path too fast", func(t *testing.T) {
		out, code := runCheckCmd(t, nil, "--async", "--profile", "u1", g.URL)
		wantReport(t, out, code, 1, "FAIL  async", "want 202 Accepted", "2 passed, 1 failed")
	})
	t.Run("slow path too fast", func(t *testing.T) {
		out, code := runCheckCmd(t, nil, "--slow-path", "/", "--ttl", "1", g.URL)
		wantReport(t, out, code, 1, "FAIL  ttl", "→ 201", "is / slower than 1s?")
	})
	t.Run("profile without async", func(t *testing.T) {
		out, code := runCheckCmd(t, nil, "--async", "--profile", "sync-only", "--async-path", "/async", g.URL)
		wantReport(t, out, code, 1, "FAIL  async", "want 202 Accepted")
	})
	t.Run("bad flags", func(t *testing.T) {
		for _, args := range [][]string{{}, {"--ttl", "0", g.URL}, {"--async", g.URL}, {"ftp://x"}, {"--path", "x", g.URL}, {g.URL, g.URL}} {
			out, code := runCheckCmd(t, nil, args...)
			if code != 2 || !strings.HasPrefix(out, "check: ") || strings.Count(out, "\n") != 1 {
				t.Errorf("check %q = %d %q; want exit 2 and one line", args, code, out)
			}
		}
	})
}

// TestCheckFails runs the probes against servers that break the contract:
// each must make check exit non-zero, naming the probe that failed.
func TestCheckFails(t *testing.T) {
	t.Parallel()
	const lateSleep = 1500 * time.Millisecond // "expired late": the 504 after this
	tests := []struct {
		name    string
		handler http.HandlerFunc
		args    []string
		want    []string
	}{
		{"not a gateway", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") },
			nil, []string{"FAIL  pass-through", "no x-Attempts", "FAIL  ttl"}},
		{"TTL ignored", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("x-Attempts", "1")
			if r.URL.Path == "/slow" {
				time.Sleep(1500 * time.Millisecond)
			}
			io.WriteString(w, "hello")
		}, []string{"--slow-path", "/slow", "--ttl", "0.5"}, []string{"PASS  pass-through", "FAIL  ttl", "GET /slow with S7PTTL: 0.5 → 200", "1 passed, 1 failed"}},
		{"expired late", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("x-Attempts", "1")
			if r.Header.Get("S7PTTL") != "" {
				time.Sleep(lateSleep)
				w.Header().Set("x-Gateway-Error", "TTLExpired")
				w.WriteHeader(504)
			}
		}, []string{"--slow-path", "/slow", "--ttl", "0.5", "--tolerance", "300ms"}, []string{"FAIL  ttl", "504 TTLExpired in ", "want 504 TTLExpired between 500ms and 800ms"}},
		{"wrong status for an expired TTL", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("x-Attempts", "0")
			if r.Header.Get("S7PTTL") != "" {
				w.Header().Set("x-Gateway-Error", "TTLExpired")
				w.WriteHeader(503)
				return
			}
			w.Header().Set("x-Attempts", "1")
		}, nil, []string{"PASS  pass-through", "FAIL  ttl", "503 TTLExpired", "want 412 TTLExpired"}},
		{"gateway error", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("x-Attempts", "3")
			w.Header().Set("x-Gateway-Error", "BackendUnavailable")
			w.WriteHeader(502)
		}, nil, []string{"FAIL  pass-through", "502 BackendUnavailable", "the backend was not reached"}},
		{"async result lost", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("x-Attempts", "1")
			switch {
			case r.Header.Get("S7PAsyncMode") == "true":
				w.Header().Set("Location", "/_gateway/async/0123")
				w.WriteHeader(202)
			case strings.HasPrefix(r.URL.Path, "/_gateway/"):
				w.Header().Set("x-Gateway-Error", "CorruptRecord")
				w.WriteHeader(500)
			case r.Header.Get("S7PTTL") == "0":
				w.Header().Set("x-Attempts", "0")
				w.Header().Set("x-Gateway-Error", "TTLExpired")
				w.WriteHeader(412)
			}
		}, []string{"--async", "--profile", "u1"}, []string{"PASS  ttl", "FAIL  async", "500 CorruptRecord", "the request failed", "2 passed, 1 failed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			out, code := runCheckCmd(t, nil, append(tt.args, srv.URL)...)
			wantReport(t, out, code, 1, tt.want...)
			if tt.name == "expired late" {
				// The figure reported is the time the 504 took: at least
				// the server's sleep, however loaded the machine.
				m := regexp.MustCompile(`504 TTLExpired in ([0-9.]+m?s),`).FindStringSubmatch(out)
				if m == nil {
					t.Fatalf("no time in the report:\n%s", out)
				}
				if d, err := time.ParseDuration(m[1]); err != nil || d < lateSleep {
					t.Errorf("reported the 504 in %s; want at least the server's %v", m[1], lateSleep)
				}
			}
		})
	}
}

// The static credentials of the SigV4 tests (AWS's documentation example).
var testCreds = aws.Credentials{AccessKeyID: "AKIAIOSFODNN7EXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}

// verifySigV4 checks r's SigV4 signature for service lambda in region the
// way the service does: it signs a copy of r, with the headers r says it
// signed, the body's hash and r's own X-Amz-Date, with creds, using the
// SDK's signer, and compares the Authorization headers.
func verifySigV4(r *http.Request, body []byte, creds aws.Credentials, region string) error {
	auth := r.Header.Get("Authorization")
	wantScope := "/" + region + "/lambda/aws4_request"
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential="+creds.AccessKeyID+"/") || !strings.Contains(auth, wantScope) {
		return fmt.Errorf("Authorization %q: want a SigV4 signature by %s for %s", auth, creds.AccessKeyID, wantScope)
	}
	t, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return fmt.Errorf("X-Amz-Date %q: %v", r.Header.Get("X-Amz-Date"), err)
	}
	if d := time.Since(t); d > 5*time.Minute || d < -5*time.Minute {
		return fmt.Errorf("X-Amz-Date %s is more than 5 minutes off", t)
	}
	_, signed, _ := strings.Cut(auth, "SignedHeaders=")
	signed, _, _ = strings.Cut(signed, ",")
	cp, err := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), nil)
	if err != nil {
		return err
	}
	cp.ContentLength = r.ContentLength
	for _, h := range strings.Split(signed, ";") {
		if h != "host" && h != "content-length" {
			cp.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, cp, hex.EncodeToString(sum[:]), "lambda", region, t); err != nil {
		return err
	}
	if got := cp.Header.Get("Authorization"); got != auth {
		return fmt.Errorf("signature mismatch:\n got  %s\n want %s", auth, got)
	}
	return nil
}

// functionURL is a loopback Lambda Function URL (AuthType AWS_IAM) in
// front of a function under the emulator: it verifies each request's
// SigV4 signature, answers 403 (without x-Attempts) when it does not hold,
// and otherwise invokes the function with a payload 2.0 event and answers
// with its response.
type functionURL struct {
	*httptest.Server
	f        *function
	template []byte // lambda-urls-request.json
	mu       sync.Mutex
	verified atomic.Int64
	refused  atomic.Int64
}

func startFunctionURL(tb testing.TB, f *function, region string) *functionURL {
	tb.Helper()
	tmpl, err := json.Marshal(sample(tb, "lambda-urls-request.json"))
	if err != nil {
		tb.Fatal(err)
	}
	fu := &functionURL{f: f, template: tmpl}
	fu.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := verifySigV4(r, body, testCreds, region); err != nil {
			fu.refused.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			json.NewEncoder(w).Encode(map[string]string{"Message": "Forbidden", "detail": err.Error()})
			return
		}
		fu.verified.Add(1)
		event, err := fu.event(r, body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		out, err := fu.invoke(event)
		var a httpAnswer
		if err == nil {
			err = json.Unmarshal(out, &a)
		}
		if err != nil || a.StatusCode == 0 {
			http.Error(w, fmt.Sprintf("function: %v %s", err, out), http.StatusBadGateway)
			return
		}
		rb := []byte(a.Body)
		if a.IsBase64Encoded {
			rb, _ = base64.StdEncoding.DecodeString(a.Body)
		}
		for k, v := range a.Headers {
			w.Header().Set(k, v)
		}
		for _, c := range a.Cookies {
			w.Header().Add("Set-Cookie", c)
		}
		w.WriteHeader(a.StatusCode)
		w.Write(rb)
	}))
	tb.Cleanup(fu.Close)
	return fu
}

// event builds the Function URL's payload 2.0 event for r, arriving now.
func (fu *functionURL) event(r *http.Request, body []byte) ([]byte, error) {
	var e map[string]any
	if err := json.Unmarshal(fu.template, &e); err != nil {
		return nil, err
	}
	hdr := map[string]any{}
	for k, vs := range r.Header {
		if strings.EqualFold(k, "Cookie") {
			continue
		}
		hdr[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	hdr["host"] = r.Host
	var cookies []string
	for _, c := range r.Cookies() {
		cookies = append(cookies, c.String())
	}
	now := time.Now()
	e["rawPath"], e["rawQueryString"], e["headers"], e["cookies"] = r.URL.EscapedPath(), r.URL.RawQuery, hdr, cookies
	q := map[string]any{}
	for k, vs := range r.URL.Query() {
		q[k] = strings.Join(vs, ",")
	}
	e["queryStringParameters"] = q
	e["body"], e["isBase64Encoded"] = base64.StdEncoding.EncodeToString(body), true
	rc := e["requestContext"].(map[string]any)
	rc["timeEpoch"], rc["time"] = now.UnixMilli(), now.UTC().Format("02/Jan/2006:15:04:05 -0700")
	rc["requestId"] = newInvocationID()
	h := rc["http"].(map[string]any)
	h["method"], h["path"], h["sourceIp"], h["userAgent"] = r.Method, r.URL.Path, "127.0.0.1", r.UserAgent()
	return json.Marshal(e)
}

// invoke runs one invocation: the emulator takes one at a time, and the
// function is frozen between them as Lambda freezes an idle instance.
func (fu *functionURL) invoke(event []byte) ([]byte, error) {
	fu.mu.Lock()
	defer fu.mu.Unlock()
	if fu.f.started {
		if err := fu.f.rie.Thaw(); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := fu.f.rie.Invoke(ctx, event)
	fu.f.started = true
	if ferr := fu.f.rie.Freeze(); err == nil {
		err = ferr
	}
	return out, err
}

// TestCheckLambdaSigV4 runs the probes against the Lambda host through an
// AWS_IAM Function URL: signed with the SDK's default credentials (here the
// environment's static ones) they pass; unsigned, or signed with the wrong
// secret, the URL refuses them and check fails.
func TestCheckLambdaSigV4(t *testing.T) {
	t.Parallel()
	be := checkBackend(t, 0)
	f := startFunction(t, binary, map[string]string{"Hosts": be.URL, "AWS_LAMBDA_FUNCTION_TIMEOUT": "10"})
	const region = "eu-west-1"
	fu := startFunctionURL(t, f, region)
	env := func(secret string) []string {
		return []string{"AWS_ACCESS_KEY_ID=" + testCreds.AccessKeyID, "AWS_SECRET_ACCESS_KEY=" + secret,
			"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_EC2_METADATA_DISABLED=true"}
	}

	out, code := runCheckCmd(t, env(testCreds.SecretAccessKey), "--aws-sigv4", "--region", region, "--slow-path", "/slow", "--ttl", "1", "--tolerance", ttlTolerance, fu.URL)
	wantReport(t, out, code, 0, "PASS  pass-through  GET / → 201", "PASS  ttl           GET /slow with S7PTTL: 1 → 504 TTLExpired", "2 passed, 0 failed")
	if fu.verified.Load() != 2 || fu.refused.Load() != 0 {
		t.Errorf("signatures verified %d, refused %d; want 2 and 0", fu.verified.Load(), fu.refused.Load())
	}

	// AWS_REGION instead of --region.
	out, code = runCheckCmd(t, append(env(testCreds.SecretAccessKey), "AWS_REGION="+region), "--aws-sigv4", fu.URL)
	wantReport(t, out, code, 0, "2 passed, 0 failed")

	out, code = runCheckCmd(t, nil, fu.URL)
	wantReport(t, out, code, 1, "FAIL  pass-through  GET / → 403", "an AWS_IAM Function URL wants --aws-sigv4")

	refused := fu.refused.Load()
	out, code = runCheckCmd(t, env("wrong"+testCreds.SecretAccessKey), "--aws-sigv4", "--region", region, fu.URL)
	wantReport(t, out, code, 1, "FAIL  pass-through  GET / → 403", "the signature was refused", "0 passed, 2 failed")
	if fu.refused.Load() != refused+2 {
		t.Errorf("refused %d signatures by the wrong secret; want 2", fu.refused.Load()-refused)
	}

	out, code = runCheckCmd(t, []string{"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_EC2_METADATA_DISABLED=true"}, "--aws-sigv4", fu.URL)
	if code != 2 || !strings.Contains(out, "--aws-sigv4") {
		t.Errorf("no region or credentials: %d %q; want exit 2 naming --aws-sigv4", code, out)
	}
}

// TestCheckAzure runs the probes against the Azure custom handler behind
// a front that forwards requests as the Functions host does (with the
// invocation headers), async on Azurite.
func TestCheckAzure(t *testing.T) {
	t.Parallel()
	az := emulators.StartAzurite(t)
	be := checkBackend(t, time.Second)
	g := StartAzureHandler(t, map[string]string{
		"Hosts": be.URL, "AsyncModeEnabled": "true", "UserProfiles": asyncProfile, "AsyncTriggerTimeout": "300",
		"AsyncStore": "azure", "AzureWebJobsStorage": az.ConnectionString(),
		"AzureFunctionsJobHost__functionTimeout": "00:05:00",
	})
	target, _ := url.Parse(g.URL)
	front := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = r.In.Host // the handler sees the client's host, as forwarded by the host
		r.Out.Header.Set("X-Azure-Functions-InvocationId", newInvocationID())
		r.Out.Header.Set("X-Azure-Functions-HostVersion", "4.1040.300.0")
	}})
	t.Cleanup(front.Close)

	out, code := runCheckCmd(t, nil, "--slow-path", "/slow", "--ttl", "1", "--tolerance", ttlTolerance, "--async", "--profile", "u1", "--async-path", "/async", front.URL)
	wantReport(t, out, code, 0, "PASS  pass-through  GET / → 201", "PASS  ttl           GET /slow with S7PTTL: 1 → 504 TTLExpired",
		"PASS  async", "3 passed, 0 failed")
}

package tests

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"fngateway/internal/emulators"
)

// The Lambda host end to end: the real binary as a function under the AWS
// Lambda Runtime Interface Emulator, invoked with events built from
// aws-lambda-go's own samples (testdata/lambda). The function process is
// frozen (SIGSTOP) between invocations, as Lambda freezes an instance once an
// invocation returns, so nothing passes that relies on work after the
// answer.

// function is a gateway running as a Lambda function under the emulator.
type function struct {
	rie     *emulators.RIE
	started bool // the emulator has started the function process
}

// startFunction starts the emulator for the gateway binary with env.
func startFunction(tb testing.TB, bootstrap string, env map[string]string) *function {
	tb.Helper()
	return &function{rie: emulators.StartRIE(tb, bootstrap, env)}
}

// invoke thaws the function, sends event, freezes the function again and
// returns the raw answer and how long the invocation took.
func (f *function) invoke(tb testing.TB, event []byte) ([]byte, time.Duration) {
	tb.Helper()
	if f.started {
		if err := f.rie.Thaw(); err != nil {
			tb.Fatalf("thaw: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	out, err := f.rie.Invoke(ctx, event)
	took := time.Since(start)
	if err != nil {
		tb.Fatalf("%v\n%s", err, f.rie.Log())
	}
	f.started = true
	if err := f.rie.Freeze(); err != nil {
		tb.Fatalf("freeze: %v\n%s", err, f.rie.Log())
	}
	return out, took
}

// warm has the emulator start the function process with an invocation of
// the gateway's own health endpoint, so that the next invocation, the one
// a test times, is a warm one. The emulator starts the process on the first
// invocation and that start counts against the invocation's deadline;
// Lambda initialises a function before the invocation, which then has the
// whole timeout. On a loaded machine the start of the race-enabled binary
// took longer than limitAnswer, and the first invocation of the tests of
// the execution limit found its time spent before it began.
func (f *function) warm(tb testing.TB) {
	tb.Helper()
	out, _ := f.invoke(tb, httpEvent(tb, "lambda-urls-request.json", httpRequest{method: "GET", rawPath: "/_gateway/health"}))
	if !bytes.Contains(out, []byte(`"statusCode":200`)) {
		tb.Fatalf("warm-up invocation of /_gateway/health: %q, want status 200\n%s", out, f.rie.Log())
	}
}

// httpAnswer is the payload 2.0 response of a Function URL or HTTP API.
type httpAnswer struct {
	StatusCode      int               `json:"statusCode"`
	Headers         map[string]string `json:"headers"`
	Cookies         []string          `json:"cookies"`
	Body            string            `json:"body"`
	IsBase64Encoded bool              `json:"isBase64Encoded"`
}

func (f *function) invokeHTTP(tb testing.TB, event []byte) (httpAnswer, []byte, time.Duration) {
	tb.Helper()
	out, took := f.invoke(tb, event)
	var a httpAnswer
	if err := json.Unmarshal(out, &a); err != nil || a.StatusCode == 0 {
		tb.Fatalf("answer %q is not an HTTP response (%v)\n%s", out, err, f.rie.Log())
	}
	body := []byte(a.Body)
	if a.IsBase64Encoded {
		var err error
		if body, err = base64.StdEncoding.DecodeString(a.Body); err != nil {
			tb.Fatalf("answer body is not base64: %v", err)
		}
	}
	return a, body, took
}

// sample loads one of aws-lambda-go's sample events as a JSON object.
func sample(tb testing.TB, name string) map[string]any {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "lambda", name))
	if err != nil {
		tb.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		tb.Fatal(err)
	}
	return m
}

// httpRequest describes the variations an HTTP event gets.
type httpRequest struct {
	method, rawPath, rawQuery string
	cookies                   []string
	headers                   map[string]string
	body                      []byte
}

// httpEvent varies a payload 2.0 sample: a Function URL one
// (lambda-urls-request.json) or an HTTP API one
// (apigw-v2-request-no-authorizer.json).
func httpEvent(tb testing.TB, name string, r httpRequest) []byte {
	tb.Helper()
	e := sample(tb, name)
	e["rawPath"], e["rawQueryString"] = r.rawPath, r.rawQuery
	e["cookies"] = r.cookies
	hdr := map[string]any{}
	if h, ok := e["headers"].(map[string]any); ok {
		for k, v := range h {
			if k != "content-length" {
				hdr[k] = v
			}
		}
	}
	for k, v := range r.headers {
		hdr[k] = v
	}
	e["headers"] = hdr
	e["body"], e["isBase64Encoded"] = base64.StdEncoding.EncodeToString(r.body), true
	rc := e["requestContext"].(map[string]any)
	h := rc["http"].(map[string]any)
	h["method"], h["path"], h["sourceIp"] = r.method, r.rawPath, "198.51.100.7"
	// The platform stamps the event when it accepts the request: now, not
	// when the sample was recorded (the TTL starts there).
	rc["timeEpoch"] = time.Now().UnixMilli()
	b, err := json.Marshal(e)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// echoBackend answers with what it received: the request target, cookie
// and repeated header as headers, the body as the body (binary), and two
// cookies set.
func echoBackend(tb testing.TB) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Got-Method", r.Method)
		w.Header().Set("X-Got-Uri", r.RequestURI)
		w.Header().Set("X-Got-Cookie", r.Header.Get("Cookie"))
		w.Header().Set("X-Got-Multi", strings.Join(r.Header.Values("X-Multi"), "|"))
		w.Header().Set("X-Got-Forwarded-For", r.Header.Get("X-Forwarded-For"))
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Add("Set-Cookie", "session=abc; Path=/; HttpOnly")
		w.Header().Add("Set-Cookie", "theme=dark, blue; Path=/")
		w.WriteHeader(http.StatusCreated)
		w.Write(b)
	}))
	tb.Cleanup(srv.Close)
	return srv
}

func TestLambdaHTTPRoundTrip(t *testing.T) {
	t.Parallel()
	backend := echoBackend(t)
	f := startFunction(t, binary, map[string]string{"Hosts": backend.URL, "AWS_LAMBDA_FUNCTION_TIMEOUT": "10"})
	binaryBody := make([]byte, 256)
	for i := range binaryBody {
		binaryBody[i] = byte(255 - i)
	}
	req := httpRequest{
		method:   "PUT",
		rawPath:  "/echo/a%20b/%E2%82%AC/x",
		rawQuery: "k=2&k=1&k=2&e=%20%2B%26&flag&z=",
		cookies:  []string{"c1=v1", "c2=v=2"},
		headers:  map[string]string{"x-multi": "one,two", "content-type": "application/octet-stream"},
		body:     binaryBody,
	}
	for _, name := range []string{"lambda-urls-request.json", "apigw-v2-request-no-authorizer.json"} {
		t.Run(name, func(t *testing.T) {
			a, body, _ := f.invokeHTTP(t, httpEvent(t, name, req))
			if a.StatusCode != http.StatusCreated {
				t.Fatalf("status %d, want 201: %s", a.StatusCode, body)
			}
			for k, want := range map[string]string{
				"X-Got-Method": "PUT",
				"X-Got-Uri":    req.rawPath + "?" + req.rawQuery,
				"X-Got-Cookie": "c1=v1; c2=v=2",
				"X-Got-Multi":  "one,two",
				"X-Attempts":   "1",
			} {
				if got := a.Headers[k]; got != want {
					t.Errorf("header %s = %q, want %q", k, got, want)
				}
			}
			if want := []string{"session=abc; Path=/; HttpOnly", "theme=dark, blue; Path=/"}; fmt.Sprint(a.Cookies) != fmt.Sprint(want) {
				t.Errorf("cookies = %q, want %q", a.Cookies, want)
			}
			// sourceIp is the client's address: the last X-Forwarded-For hop.
			if xff := a.Headers["X-Got-Forwarded-For"]; !strings.HasSuffix(xff, "198.51.100.7") {
				t.Errorf("X-Forwarded-For = %q, want it to end with the event's sourceIp", xff)
			}
			if _, ok := a.Headers["Set-Cookie"]; ok {
				t.Errorf("Set-Cookie sent as a header too")
			}
			if !a.IsBase64Encoded || !bytes.Equal(body, binaryBody) {
				t.Errorf("body (base64 %v) = %x, want %x", a.IsBase64Encoded, body, binaryBody)
			}
		})
	}
	if strings.Contains(f.rie.Log(), "Task timed out") {
		t.Errorf("the emulator reported a timeout:\n%s", f.rie.Log())
	}
	// With async off the function opens no store: Lambda's working
	// directory (/var/task) is read-only.
	if ents, err := os.ReadDir(f.rie.Dir()); err != nil || len(ents) != 0 {
		t.Errorf("the function wrote into its working directory with async off: %v %v", ents, err)
	}
}

// silentBackend never answers; it counts the requests whose context ended
// (the gateway cancelled them) on cancelled.
func silentBackend(tb testing.TB) (*httptest.Server, chan time.Time) {
	cancelled := make(chan time.Time, 16)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read the body: net/http notices a closed connection (and ends
		// r.Context()) only once the body has been read.
		io.ReadAll(r.Body)
		select {
		case <-r.Context().Done():
			cancelled <- time.Now()
		case <-release:
		}
	}))
	tb.Cleanup(func() { close(release); srv.Close() })
	return srv, cancelled
}

// limitAnswer is when a request that runs into the execution limit is due
// to be answered in the tests of that limit: they set a function timeout of
// limitAnswer + loadMargin and a FunctionLimitMarginMs of loadMargin
// (limitSettings), so the answer is due limitAnswer after the invocation
// starts and the platform's own timeout leaves loadMargin of room for a
// loaded machine beyond it.
const limitAnswer = 2 * time.Second

// limitSettings is limitAnswer's function timeout, in whole seconds as
// AWS_LAMBDA_FUNCTION_TIMEOUT takes it, and margin, in ms as
// FunctionLimitMarginMs takes it.
func limitSettings() (timeoutSecs, marginMs string) {
	return strconv.Itoa(int((limitAnswer + loadMargin) / time.Second)), strconv.Itoa(int(loadMargin / time.Millisecond))
}

// TestLambdaFunctionLimit: with a function timeout of limitAnswer +
// loadMargin, a margin of loadMargin and a 60 s TTL, a hanging backend is
// answered 504 FunctionLimit at the limit less the margin, before Lambda's
// own timeout; the backend's request is cancelled, and the emulator (which
// judges the timeout as Lambda does) never reports "Task timed out".
func TestLambdaFunctionLimit(t *testing.T) {
	t.Parallel()
	backend, cancelled := silentBackend(t)
	timeout, margin := limitSettings()
	f := startFunction(t, binary, map[string]string{"Hosts": backend.URL, "AWS_LAMBDA_FUNCTION_TIMEOUT": timeout, "FunctionLimitMarginMs": margin})
	f.warm(t)
	for i, name := range []string{"lambda-urls-request.json", "apigw-v2-request-no-authorizer.json", "lambda-urls-request.json"} {
		t.Run(fmt.Sprint(i, name), func(t *testing.T) {
			ev := httpEvent(t, name, httpRequest{method: "GET", rawPath: "/slow", headers: map[string]string{"s7pttl": "60"}})
			a, body, took := f.invokeHTTP(t, ev)
			if a.StatusCode != http.StatusGatewayTimeout || a.Headers["X-Gateway-Error"] != "FunctionLimit" {
				t.Errorf("answer %d %s %s, want 504 FunctionLimit", a.StatusCode, a.Headers["X-Gateway-Error"], body)
			}
			// Answered at the limit minus the margin, not before; the
			// emulator judges the timeout itself (below).
			if took < limitAnswer-500*time.Millisecond {
				t.Errorf("answered after %v, want at about %v (%s s timeout, %s ms margin)", took, limitAnswer, timeout, margin)
			}
			// The function is frozen now: a cancellation the backend sees was
			// sent before the answer. Its server notices the closed
			// connection a moment later.
			select {
			case <-cancelled:
			case <-time.After(loadMargin):
				t.Errorf("the backend's request was not cancelled when the function answered")
			}
		})
	}
	if strings.Contains(f.rie.Log(), "Task timed out") {
		t.Errorf("the emulator reported a timeout:\n%s", f.rie.Log())
	}
}

// TestLambdaColdStart measures process start to first invocation answered
// for the binary as make package-aws builds it.
func TestLambdaColdStart(t *testing.T) {
	t.Parallel()
	bootstrap := productionGateway(t)
	var hits atomic.Int32
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	t.Cleanup(backend.Close)
	f := startFunction(t, bootstrap, map[string]string{"Hosts": backend.URL, "AWS_LAMBDA_FUNCTION_TIMEOUT": "10"})
	ev := httpEvent(t, "lambda-urls-request.json", httpRequest{method: "GET", rawPath: "/"})
	a, _, cold := f.invokeHTTP(t, ev)
	_, _, warm := f.invokeHTTP(t, ev)
	if a.StatusCode != http.StatusOK || hits.Load() != 2 {
		t.Fatalf("status %d, backend hits %d", a.StatusCode, hits.Load())
	}
	t.Logf("cold start (process start to first invocation answered, under the RIE): %v; warm invocation: %v", cold, warm)
	// Its speed is a figure to read (-v, docs/deploy-aws.md), not a bound a
	// loaded machine could break; this only says it came up at all.
	if cold > loadMargin {
		t.Errorf("cold start %v, want well under %v", cold, loadMargin)
	}
}

// TestLambdaResponseStream: with InvokeMode=RESPONSE_STREAM a Function URL
// event is answered in Lambda's streaming form (a JSON prelude with status,
// headers and cookies, eight NUL bytes, then the body); a body cut by the
// execution limit after its status ends the stream without a second status,
// before the function's timeout.
func TestLambdaResponseStream(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Add("Set-Cookie", "a=1")
		w.Write([]byte("chunk1 "))
		w.(http.Flusher).Flush()
		if r.URL.Path == "/hang" {
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		w.Write([]byte("chunk2"))
	}))
	t.Cleanup(func() { close(release); backend.Close() })
	timeout, margin := limitSettings() // /hang is cut limitAnswer after the invocation starts
	f := startFunction(t, binary, map[string]string{"Hosts": backend.URL, "AWS_LAMBDA_FUNCTION_TIMEOUT": timeout, "FunctionLimitMarginMs": margin, "InvokeMode": "RESPONSE_STREAM"})
	f.warm(t)

	out, _ := f.invoke(t, httpEvent(t, "lambda-urls-request.json", httpRequest{method: "GET", rawPath: "/s"}))
	prelude, body, ok := bytes.Cut(out, make([]byte, 8))
	var p struct {
		StatusCode int               `json:"statusCode"`
		Headers    map[string]string `json:"headers"`
		Cookies    []string          `json:"cookies"`
	}
	if !ok || json.Unmarshal(prelude, &p) != nil {
		t.Fatalf("answer %q is not a streamed response", out)
	}
	if p.StatusCode != 200 || p.Headers["Content-Type"] != "text/plain" || fmt.Sprint(p.Cookies) != "[a=1]" || string(body) != "chunk1 chunk2" {
		t.Errorf("streamed answer %+v %q", p, body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.rie.Thaw(); err != nil {
		t.Fatal(err)
	}
	out, err := f.rie.Invoke(ctx, httpEvent(t, "lambda-urls-request.json", httpRequest{method: "GET", rawPath: "/hang", headers: map[string]string{"s7pttl": "60"}}))
	if err != nil {
		t.Fatal(err)
	}
	// The emulator hands on the part sent and drops the runtime's error
	// trailer; the gateway's own log line says why the stream broke. The
	// emulator copies the function's output on its own time: wait for it.
	cutLogged := func() bool {
		return strings.Contains(f.rie.Log(), `"msg":"request stream cut"`) && strings.Contains(f.rie.Log(), `"deadline":"function-limit"`)
	}
	for wait := time.Now().Add(loadMargin); !cutLogged() && time.Now().Before(wait); {
		time.Sleep(20 * time.Millisecond)
	}
	if !cutLogged() {
		t.Errorf("no log line for the cut stream:\n%s", f.rie.Log())
	}
	if n := bytes.Count(out, []byte(`"statusCode"`)); n > 1 || !bytes.Contains(out, []byte("chunk1 ")) || bytes.Contains(out, []byte("FunctionLimit")) {
		t.Errorf("cut stream answered %q: want the part sent, then a break, never a second status", out)
	}
	if strings.Contains(f.rie.Log(), "Task timed out") {
		t.Errorf("the emulator reported a timeout:\n%s", f.rie.Log())
	}
}

// TestLambdaSettingsAgainstDeadline: Lambda does not put the function's
// timeout in the environment; a setting that cannot nest under the timeout
// the first invocation's deadline tells (the emulator's default, 300 s)
// fails the invocation with the one-line setting error. The timeout a
// deadline tells is the time left when the gateway reads it, rounded up to
// whole seconds, and never less than an earlier invocation told: 300 s
// unless the read came a second or more after the emulator set the
// deadline, which the test's own Invoke call encloses, so the bound
// follows from how long that call took, not from how loaded the machine is.
func TestLambdaSettingsAgainstDeadline(t *testing.T) {
	t.Parallel()
	const timeout, margin = 300000, 1000 // ms: the emulator's default, FunctionLimitMarginMs's
	backend := echoBackend(t)
	f := startFunction(t, binary, map[string]string{"Hosts": backend.URL, "Timeout": "400000"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second+loadMargin)
	defer cancel()
	settingErr := regexp.MustCompile(`setting Timeout=\\"400000\\": want at most (\d+) ms`)
	told := int64(0)
	for i := range 2 {
		start := time.Now()
		out, err := f.rie.Invoke(ctx, httpEvent(t, "lambda-urls-request.json", httpRequest{method: "GET", rawPath: "/"}))
		took := time.Since(start).Milliseconds()
		m := settingErr.FindSubmatch(out)
		if m == nil {
			t.Errorf("invocation %d: answer %q (%v), want the setting error", i, out, err)
			continue
		}
		atMost, _ := strconv.ParseInt(string(m[1]), 10, 64)
		if atMost > timeout-margin || atMost < timeout-margin-took || atMost%1000 != 0 || atMost < told {
			t.Errorf("invocation %d (%d ms): want at most %d ms, want a whole second in [%d, %d] and at least %d",
				i, took, atMost, timeout-margin-took, timeout-margin, told)
		}
		told = atMost
	}
}

// TestLambdaBadSettings: on the Lambda host a bad setting stops the start-up
// (exit 2) with one line naming it, before the runtime API is contacted.
func TestLambdaBadSettings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  []string
		want string
	}{
		{"InvokeMode", []string{"InvokeMode=STREAM"}, `setting InvokeMode="STREAM": want BUFFERED or RESPONSE_STREAM`},
		{"AWS_LAMBDA_FUNCTION_TIMEOUT", []string{"AWS_LAMBDA_FUNCTION_TIMEOUT=3s"}, `setting AWS_LAMBDA_FUNCTION_TIMEOUT="3s": want a positive whole number of seconds`},
		{"nesting", []string{"AWS_LAMBDA_FUNCTION_TIMEOUT=3", "Timeout=5000"}, `setting Timeout="5000": want at most 2000 ms`},
		{"body buffer beyond what the collector may use", []string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=128", "MaxBufferedBytes=120000000"},
			`setting MaxBufferedBytes="120000000": want at most 107374182 bytes, the soft memory limit, 80 % of AWS_LAMBDA_FUNCTION_MEMORY_SIZE=128 MB`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(binary)
			cmd.Env = append(baseEnv(), "AWS_LAMBDA_RUNTIME_API=127.0.0.1:1", "Hosts=http://127.0.0.1:1")
			cmd.Env = append(cmd.Env, tt.env...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
				t.Errorf("exit %v, want 2", err)
			}
			if got := strings.TrimSpace(stderr.String()); !strings.Contains(got, tt.want) || strings.Count(got, "\n") != 0 {
				t.Errorf("stderr %q, want one line with %q", got, tt.want)
			}
		})
	}
}

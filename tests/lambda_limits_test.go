package tests

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// lambdaMemoryMB is the function's configured memory in the answer-cap
// test: Lambda's smallest size.
const lambdaMemoryMB = 128

// lambdaBufferedPayload is Lambda's limit on a buffered response payload,
// "6 MB" (AWS Lambda Developer Guide, Lambda quotas), in the smaller
// reading: 6 MiB.
const lambdaBufferedPayload = 6 << 20

// peakRSS returns the peak resident set (VmHWM) of process pid, in bytes.
func peakRSS(tb testing.TB, pid int) int64 {
	tb.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				tb.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	tb.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// bigBackend answers GET /<n>?type=<media type>&length=<yes|no> with n
// bytes of a repeating pattern (text or binary by the type), in 32 KiB
// writes, with or without a Content-Length. When an answer's handler ends
// it reports on ended what it sent and whether its client went away
// before the end.
type bigBackend struct {
	*httptest.Server
	ended chan backendEnd
}

type backendEnd struct {
	sent   int64
	cutOff bool
}

func newBigBackend(tb testing.TB) *bigBackend {
	b := &bigBackend{ended: make(chan backendEnd, 16)}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var end backendEnd
		defer func() { b.ended <- end }()
		ct := r.URL.Query().Get("type")
		w.Header().Set("Content-Type", ct)
		if r.URL.Query().Get("length") == "yes" {
			w.Header().Set("Content-Length", strconv.Itoa(n))
		}
		chunk := make([]byte, 32<<10)
		for i := range chunk {
			if strings.HasPrefix(ct, "text/") {
				chunk[i] = "abcdefghijklmnopqrstuvwxyz0123456789 ."[i%38]
			} else {
				chunk[i] = byte(255 - i%256)
			}
		}
		for left := n; left > 0; {
			m, err := w.Write(chunk[:min(left, len(chunk))])
			end.sent += int64(m)
			left -= m
			if err != nil {
				end.cutOff = true
				return
			}
		}
	}))
	tb.Cleanup(b.Close)
	return b
}

// end waits for the backend's answer to the last invocation to end: once
// the gateway closed the connection, the backend's next write fails. The
// function's timeout bounds the wait: the invocation is over by then.
func (b *bigBackend) end(tb testing.TB, timeout time.Duration) backendEnd {
	tb.Helper()
	select {
	case e := <-b.ended:
		return e
	case <-time.After(timeout):
		tb.Fatalf("the backend's answer did not end within %v of the invocation's end: the gateway kept its connection", timeout)
		return backendEnd{}
	}
}

// TestLambdaAnswerCap: a Lambda function with 128 MB of memory answering
// buffered (BUFFERED Function URL, API Gateway) never holds more than
// Lambda's 6 MB payload: a 5 MB binary answer (which base64 takes past
// 6 MB), a 7 MB text one and a 200 MB one are each 502 ResponseTooLarge
// with x-Attempts, the backend's transfer is cut short, the function
// process stays the same (no runtime exit, no cold start) and its peak
// memory stays far below its 128 MB; answers just under the cap, text and
// binary, pass through whole.
func TestLambdaAnswerCap(t *testing.T) {
	t.Parallel()
	const functionTimeout = 60 * time.Second
	backend := newBigBackend(t)
	f := startFunction(t, productionGateway(t), map[string]string{
		"Hosts":                           backend.URL,
		"AWS_LAMBDA_FUNCTION_TIMEOUT":     strconv.Itoa(int(functionTimeout / time.Second)),
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": strconv.Itoa(lambdaMemoryMB),
	})
	// The payload limit and the share of the function's memory the
	// gateway may take at its peak: the binary's own footprint, the body
	// held to the cap and its JSON form, well under the configured size.
	limit := int64(lambdaBufferedPayload)
	maxPeak := int64(lambdaMemoryMB<<20) / 2
	event := func(name, target string) []byte {
		path, query, _ := strings.Cut(target, "?")
		return httpEvent(t, name, httpRequest{method: "GET", rawPath: path, rawQuery: query})
	}
	var pid int
	samePID := func(t *testing.T) {
		t.Helper()
		p, err := f.rie.FunctionPID()
		if err != nil {
			t.Fatalf("the function process is gone: %v\n%s", err, f.rie.Log())
		}
		if pid == 0 {
			pid = p
		} else if p != pid {
			t.Fatalf("function process %d, was %d: the runtime exited and Lambda cold-started", p, pid)
		}
	}

	tooLarge := []struct {
		name, target string
		size         int
	}{
		{"5 MB binary, length known", "/5000000?type=application/octet-stream&length=yes", 5_000_000},
		{"5 MB binary, length unknown", "/5000000?type=application/octet-stream", 5_000_000},
		{"7 MB text, length unknown", "/7000000?type=text/plain", 7_000_000},
		{"200 MB binary, length unknown", "/200000000?type=application/octet-stream", 200_000_000},
	}
	for _, tt := range tooLarge {
		for _, ev := range []string{"lambda-urls-request.json", "apigw-v2-request-no-authorizer.json"} {
			t.Run(tt.name+"/"+ev, func(t *testing.T) {
				a, body, _ := f.invokeHTTP(t, event(ev, tt.target))
				if a.StatusCode != http.StatusBadGateway || a.Headers["X-Gateway-Error"] != "ResponseTooLarge" || a.Headers["X-Attempts"] != "1" {
					t.Fatalf("answer %d %v %.300s; want 502 ResponseTooLarge with x-Attempts 1", a.StatusCode, a.Headers, body)
				}
				var doc struct {
					Error struct{ Code, Message string }
				}
				if err := json.Unmarshal(body, &doc); err != nil || doc.Error.Code != "ResponseTooLarge" {
					t.Errorf("body %.300s, want the ResponseTooLarge error document", body)
				}
				samePID(t)
				t.Logf("peak RSS so far: %.1f MiB", float64(peakRSS(t, pid))/(1<<20))
				// The gateway stopped reading at the cap: the backend's
				// connection closed long before the answer's end (what
				// it sent past the cap sat in socket buffers).
				// (A 5 or 7 MB answer may fit whole in the loopback's
				// socket buffers: only the 200 MB one must see the cut.)
				if end := backend.end(t, functionTimeout); tt.size > 100<<20 && (!end.cutOff || end.sent > int64(tt.size)/2) {
					t.Errorf("the backend sent %d of %d bytes (cut off: %v): the upstream was not cancelled", end.sent, tt.size, end.cutOff)
				}
			})
		}
	}
	peak := peakRSS(t, pid)
	t.Logf("peak RSS after the refused answers: %.1f MiB (function memory %d MB)", float64(peak)/(1<<20), lambdaMemoryMB)
	if peak > maxPeak {
		t.Errorf("peak RSS %d bytes, want at most %d (half the function's %d MB)", peak, maxPeak, lambdaMemoryMB)
	}

	// Just under the cap: the payload (body as a JSON string or base64, plus
	// the headers and the JSON members) stays within limit; 8 KiB is left
	// for the headers.
	text := int(limit - 8<<10)
	binary := int(limit-8<<10) / 4 * 3
	fits := []struct {
		name, target string
		size         int
		b64          bool
	}{
		{"text just under the cap", "/" + strconv.Itoa(text) + "?type=text/plain", text, false},
		{"binary just under the cap", "/" + strconv.Itoa(binary) + "?type=application/octet-stream&length=yes", binary, true},
	}
	for _, tt := range fits {
		t.Run(tt.name, func(t *testing.T) {
			out, _ := f.invoke(t, event("lambda-urls-request.json", tt.target))
			if int64(len(out)) > limit {
				t.Errorf("payload of %d bytes, over the %d the gateway allows itself", len(out), limit)
			}
			var a httpAnswer
			if err := json.Unmarshal(out, &a); err != nil {
				t.Fatalf("answer %.300q is not an HTTP response (%v)\n%s", out, err, f.rie.Log())
			}
			if a.StatusCode != http.StatusOK || a.IsBase64Encoded != tt.b64 {
				t.Fatalf("answer %d (base64 %v) %v, want 200 (base64 %v)", a.StatusCode, a.IsBase64Encoded, a.Headers, tt.b64)
			}
			body := []byte(a.Body)
			if tt.b64 {
				var err error
				if body, err = base64.StdEncoding.DecodeString(a.Body); err != nil {
					t.Fatal(err)
				}
			}
			if end := backend.end(t, functionTimeout); len(body) != tt.size || end.cutOff {
				t.Errorf("body of %d bytes, want the backend's %d whole (backend cut off: %v)", len(body), tt.size, end.cutOff)
			}
			samePID(t)
		})
	}
	peak = peakRSS(t, pid)
	t.Logf("peak RSS after the answers just under the cap: %.1f MiB", float64(peak)/(1<<20))
	if peak > maxPeak {
		t.Errorf("peak RSS %d bytes, want at most %d (half the function's %d MB)", peak, maxPeak, lambdaMemoryMB)
	}
	if log := f.rie.Log(); strings.Contains(log, "Runtime.ExitError") || strings.Contains(log, "exceeded maximum allowed payload size") || strings.Contains(log, "Task timed out") {
		t.Errorf("the runtime reported a refused answer, an exit or a timeout:\n%s", tail(log, 4000))
	}
	// The log line of each refusal names the code and the attempt.
	if n := strings.Count(f.rie.Log(), `"code":"ResponseTooLarge"`); n != 2*len(tooLarge) {
		t.Errorf("%d log lines with code ResponseTooLarge, want %d", n, 2*len(tooLarge))
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// TestLambdaAnswerCapStreamMode: with InvokeMode=RESPONSE_STREAM an API
// Gateway event, which Lambda answers buffered in either mode, still gets
// the 6 MB cap (502 ResponseTooLarge), and the same process then streams a
// Function URL answer whole. (The emulator holds a stream to 6 MB too, so
// the 200 MB stream limit is tested in adapters/httpapi, TestAnswerCap.)
func TestLambdaAnswerCapStreamMode(t *testing.T) {
	t.Parallel()
	const functionTimeout = 60 * time.Second
	backend := newBigBackend(t)
	f := startFunction(t, productionGateway(t), map[string]string{
		"Hosts":                           backend.URL,
		"InvokeMode":                      "RESPONSE_STREAM",
		"AWS_LAMBDA_FUNCTION_TIMEOUT":     strconv.Itoa(int(functionTimeout / time.Second)),
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": strconv.Itoa(lambdaMemoryMB),
	})
	binary := func(size int) httpRequest {
		return httpRequest{method: "GET", rawPath: "/" + strconv.Itoa(size), rawQuery: "type=application/octet-stream"}
	}

	a, body, _ := f.invokeHTTP(t, httpEvent(t, "apigw-v2-request-no-authorizer.json", binary(5_000_000)))
	if a.StatusCode != http.StatusBadGateway || a.Headers["X-Gateway-Error"] != "ResponseTooLarge" || a.Headers["X-Attempts"] != "1" {
		t.Errorf("API Gateway event: answer %d %v %.300s; want 502 ResponseTooLarge with x-Attempts 1", a.StatusCode, a.Headers, body)
	}
	backend.end(t, functionTimeout)
	pid, err := f.rie.FunctionPID()
	if err != nil {
		t.Fatal(err)
	}

	const size = 5_000_000 // over the buffered cap once base64-encoded; a stream carries it as it is
	out, _ := f.invoke(t, httpEvent(t, "lambda-urls-request.json", binary(size)))
	prelude, streamed, ok := bytes.Cut(out, make([]byte, 8))
	var p struct {
		StatusCode int `json:"statusCode"`
	}
	if !ok || json.Unmarshal(prelude, &p) != nil || p.StatusCode != http.StatusOK || len(streamed) != size {
		t.Errorf("Function URL event: streamed answer %.200q with %d body bytes, want 200 and the backend's %d", prelude, len(streamed), size)
	}
	if end := backend.end(t, functionTimeout); end.cutOff {
		t.Errorf("the backend's streamed answer was cut off after %d bytes", end.sent)
	}
	if now, err := f.rie.FunctionPID(); err != nil || now != pid {
		t.Errorf("function process %d (%v), was %d: the runtime exited", now, err, pid)
	}
}

// escapingBackend answers GET /<kind>/<n> with a text/plain body of about
// n bytes that is small in bytes and large as a JSON string (issue 34):
// 0x01 bytes, backslashes, quotes, U+2028, ANSI-coloured lines, or ASCII
// text whose last rune is cut.
func escapingBackend(tb testing.TB) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind, size, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		n, err := strconv.Atoi(size)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write(escapingBody(kind, n))
	}))
	tb.Cleanup(s.Close)
	return s
}

// escapingBody is the body escapingBackend answers /<kind>/<n> with.
func escapingBody(kind string, n int) []byte {
	unit := map[string]string{"ctl": "\x01", "backslash": `\`, "quote": `"`, "u2028": "\u2028",
		"ansi": "\x1b[1;31mE\x1b[0m\n", "cut": "a"}[kind]
	b := bytes.Repeat([]byte(unit), n/len(unit))
	if kind == "cut" {
		b = append(b, "\u20ac"[:2]...) // a euro sign cut after two of its three bytes
	}
	return b
}

// TestLambdaAnswerEncoding: on a 128 MB function answering buffered, the
// answer cap counts the encoding Lambda is sent (issue 34). Bodies labelled
// text that cost up to six times their size as a JSON string travel
// base64-encoded and reach the client whole; text whose last rune is cut,
// which fits as a JSON string but not as the base64 it must travel as, is
// 502 ResponseTooLarge. The Runtime API never refuses an answer: the
// function process stays the same (no runtime exit, no cold start).
func TestLambdaAnswerEncoding(t *testing.T) {
	t.Parallel()
	const functionTimeout = 60 * time.Second
	backend := escapingBackend(t)
	f := startFunction(t, productionGateway(t), map[string]string{
		"Hosts":                           backend.URL,
		"AWS_LAMBDA_FUNCTION_TIMEOUT":     strconv.Itoa(int(functionTimeout / time.Second)),
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": strconv.Itoa(lambdaMemoryMB),
	})
	tests := []struct {
		name, kind string
		size       int
		tooLarge   bool
	}{
		{"1.2 MB of 0x01 (7.2 MB as a JSON string)", "ctl", 1_200_000, false},
		{"3.3 MB of backslashes", "backslash", 3_300_000, false},
		{"3.3 MB of quotes", "quote", 3_300_000, false},
		{"3.3 MB of U+2028", "u2028", 3_300_000, false},
		{"4 MB of ANSI-coloured lines", "ansi", 4_000_000, false},
		{"4.8 MB of text whose last rune is cut (6.4 MB as base64)", "cut", 4_800_000, true},
	}
	pid := 0
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _ := f.invoke(t, httpEvent(t, "lambda-urls-request.json",
				httpRequest{method: "GET", rawPath: "/" + tt.kind + "/" + strconv.Itoa(tt.size)}))
			if len(out) > lambdaBufferedPayload {
				t.Errorf("payload of %d bytes, over the %d the gateway allows itself", len(out), lambdaBufferedPayload)
			}
			var a httpAnswer
			if err := json.Unmarshal(out, &a); err != nil || a.StatusCode == 0 {
				t.Fatalf("answer %.300q is not an HTTP response (%v)\n%s", out, err, tail(f.rie.Log(), 4000))
			}
			body := []byte(a.Body)
			if a.IsBase64Encoded {
				var err error
				if body, err = base64.StdEncoding.DecodeString(a.Body); err != nil {
					t.Fatal(err)
				}
			}
			if tt.tooLarge {
				if a.StatusCode != http.StatusBadGateway || a.Headers["X-Gateway-Error"] != "ResponseTooLarge" {
					t.Errorf("answer %d %v %.300s; want 502 ResponseTooLarge", a.StatusCode, a.Headers, body)
				}
			} else if want := escapingBody(tt.kind, tt.size); a.StatusCode != http.StatusOK || !a.IsBase64Encoded || !bytes.Equal(body, want) {
				t.Errorf("answer %d (base64 %v) with %d body bytes; want 200, base64, the backend's %d bytes", a.StatusCode, a.IsBase64Encoded, len(body), len(want))
			}
			p, err := f.rie.FunctionPID()
			if err != nil {
				t.Fatalf("the function process is gone: %v\n%s", err, tail(f.rie.Log(), 4000))
			}
			if pid == 0 {
				pid = p
			} else if p != pid {
				t.Fatalf("function process %d, was %d: the runtime exited and Lambda cold-started", p, pid)
			}
		})
	}
	if log := f.rie.Log(); strings.Contains(log, "Runtime.ExitError") || strings.Contains(log, "exceeded maximum allowed payload size") {
		t.Errorf("the runtime reported a refused answer or an exit:\n%s", tail(log, 4000))
	}
}

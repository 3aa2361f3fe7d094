package lambda

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"fngateway/core"
	"fngateway/core/async"
	"fngateway/internal/settings"
)

// echo answers with what it received: method, target, host, remote address,
// cookie and a multi-value header as headers, the body as the body, and two
// cookies set.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.Header().Set("X-Method", r.Method)
	w.Header().Set("X-Target", r.URL.RequestURI())
	w.Header().Set("X-Host", r.Host)
	w.Header().Set("X-Remote", r.RemoteAddr)
	w.Header().Set("X-Cookie", r.Header.Get("Cookie"))
	w.Header().Set("X-Accept", strings.Join(r.Header.Values("Accept"), "|"))
	w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
	w.Header().Add("Vary", "A")
	w.Header().Add("Vary", "B")
	w.Header().Add("Set-Cookie", "a=1; Path=/")
	w.Header().Add("Set-Cookie", "b=2; Expires=Wed, 21 Oct 2037 07:28:00 GMT")
	w.WriteHeader(http.StatusCreated)
	w.Write(b)
})

// urlEvent is a Function URL event in the shape of aws-lambda-go's sample.
func urlEvent(domain, rawPath, rawQuery string, body []byte, contentType string) []byte {
	e := events.LambdaFunctionURLRequest{
		Version: "2.0", RawPath: rawPath, RawQueryString: rawQuery,
		Cookies: []string{"c1=v1", "c2=v2"},
		Headers: map[string]string{"accept": "text/html,application/json", "content-type": contentType, "host": "api.example.com"},
		RequestContext: events.LambdaFunctionURLRequestContext{
			DomainName: domain, APIID: "urlid",
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST", Path: rawPath, SourceIP: "203.0.113.9"},
		},
		Body: base64.StdEncoding.EncodeToString(body), IsBase64Encoded: true,
	}
	b, _ := json.Marshal(e)
	return b
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name  string
		event string
		want  kind
		err   string
	}{
		{"function URL", `{"version":"2.0","requestContext":{"domainName":"x.lambda-url.us-east-1.on.aws","http":{"method":"GET"}}}`, kindFunctionURL, ""},
		{"HTTP API", `{"version":"2.0","routeKey":"$default","requestContext":{"apiId":"a","domainName":"a.execute-api.us-east-1.amazonaws.com","http":{"method":"GET"}}}`, kindAPIGateway, ""},
		{"HTTP API custom domain", `{"version":"2.0","requestContext":{"domainName":"api.example.com","http":{"method":"GET"}}}`, kindAPIGateway, ""},
		{"SQS", `{"Records":[{"messageId":"1","eventSource":"aws:sqs","body":"x"}]}`, kindSQS, ""},
		{"SNS", `{"Records":[{"EventSource":"aws:sns"}]}`, kindUnknown, "eventSource"},
		{"REST API 1.0", `{"httpMethod":"GET","path":"/"}`, kindUnknown, "payload format 1.0"},
		{"empty object", `{}`, kindUnknown, "neither"},
		{"not JSON", `nope`, kindUnknown, "not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := classify([]byte(tt.event))
			if got != tt.want {
				t.Errorf("kind = %d, want %d", got, tt.want)
			}
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrUnsupportedEvent)) {
				t.Errorf("err = %v, want one containing %q", err, tt.err)
			}
		})
	}
}

func TestHTTPRoundTrip(t *testing.T) {
	binary := []byte{0, 1, 2, 0xff, 0xfe, '\n', 0x80}
	tests := []struct {
		name, domain, contentType string
		body                      []byte
		wantB64                   bool
	}{
		{"function URL binary", "u.lambda-url.eu-west-1.on.aws", "application/octet-stream", binary, true},
		{"function URL text", "u.lambda-url.eu-west-1.on.aws", "text/plain; charset=utf-8", []byte("héllo"), false},
		{"function URL invalid UTF-8 labelled text", "u.lambda-url.eu-west-1.on.aws", "text/plain", binary, true},
		{"HTTP API binary", "a.execute-api.eu-west-1.amazonaws.com", "image/png", binary, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &Handler{HTTP: echo}
			const path, query = "/a%2Fb/c%20d", "k=1&k=2&z=%2B&a=%ZZ"
			out, err := h.Invoke(context.Background(), urlEvent(tt.domain, path, query, tt.body, tt.contentType))
			if err != nil {
				t.Fatal(err)
			}
			var status int
			var hdr map[string]string
			var cookies []string
			var body string
			var b64 bool
			r := decodeAnswer(t, out)
			status, hdr, cookies, body, b64 = r.StatusCode, r.Headers, r.Cookies, r.Body, r.IsBase64Encoded
			if status != http.StatusCreated {
				t.Errorf("status = %d, want 201", status)
			}
			for k, want := range map[string]string{
				"X-Method": "POST", "X-Target": path + "?" + query, "X-Host": "api.example.com", "X-Remote": "203.0.113.9",
				"X-Cookie": "c1=v1; c2=v2", "X-Accept": "text/html,application/json", "Vary": "A,B",
			} {
				if hdr[k] != want {
					t.Errorf("header %s = %q, want %q", k, hdr[k], want)
				}
			}
			if _, ok := hdr["Set-Cookie"]; ok {
				t.Errorf("Set-Cookie left in headers: %q", hdr["Set-Cookie"])
			}
			if want := []string{"a=1; Path=/", "b=2; Expires=Wed, 21 Oct 2037 07:28:00 GMT"}; fmt.Sprint(cookies) != fmt.Sprint(want) {
				t.Errorf("cookies = %q, want %q", cookies, want)
			}
			if b64 != tt.wantB64 {
				t.Errorf("isBase64Encoded = %v, want %v", b64, tt.wantB64)
			}
			got := []byte(body)
			if b64 {
				if got, err = base64.StdEncoding.DecodeString(body); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(got, tt.body) {
				t.Errorf("body = %q, want %q", got, tt.body)
			}
		})
	}
}

func TestHTTPBadEvents(t *testing.T) {
	tests := []struct{ name, event, want string }{
		{"bad base64", `{"version":"2.0","rawPath":"/","body":"***","isBase64Encoded":true,"requestContext":{"http":{"method":"GET"}}}`, "not base64"},
		{"bad method", `{"version":"2.0","rawPath":"/","requestContext":{"http":{"method":"GE T"}}}`, "not an HTTP method"},
		{"relative path", `{"version":"2.0","rawPath":"a/b","requestContext":{"http":{"method":"GET"}}}`, "not a request target"},
		{"bad header name", `{"version":"2.0","rawPath":"/","headers":{"a b":"1"},"requestContext":{"http":{"method":"GET"}}}`, "header name"},
		{"header name past the token cap", `{"version":"2.0","rawPath":"/","headers":{"` + strings.Repeat("a", core.MaxTokenLen+1) + `":"1"},"requestContext":{"http":{"method":"GET"}}}`, "header name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := (&Handler{HTTP: echo}).Invoke(context.Background(), []byte(tt.event))
			if !errors.Is(err, ErrBadEvent) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want ErrBadEvent with %q", err, tt.want)
			}
		})
	}
}

// TestDeadlines: the request context carries the invocation's deadline,
// shortened to API Gateway's 30 s for its events and to Limit when set. It
// runs in a synctest bubble, where no time passes while the invocation
// runs, so the deadline is exact on any machine.
func TestDeadlines(t *testing.T) {
	var got time.Time
	probe := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got, _ = r.Context().Deadline() })
	tests := []struct {
		name   string
		domain string
		limit  time.Duration
		want   time.Duration
	}{
		{"function URL keeps the invocation deadline", "u.lambda-url.us-east-1.on.aws", 0, 900 * time.Second},
		{"API Gateway caps at 30 s", "a.execute-api.us-east-1.amazonaws.com", 0, APIGatewayLimit},
		{"Limit shortens", "u.lambda-url.us-east-1.on.aws", 5 * time.Second, 5 * time.Second},
		{"Limit under API Gateway's", "a.execute-api.us-east-1.amazonaws.com", 5 * time.Second, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				ctx, cancel := context.WithDeadline(context.Background(), start.Add(900*time.Second))
				defer cancel()
				if _, err := (&Handler{HTTP: probe, Limit: tt.limit}).Invoke(ctx, urlEvent(tt.domain, "/", "", nil, "")); err != nil {
					t.Fatal(err)
				}
				if d := got.Sub(start); d != tt.want {
					t.Errorf("deadline in %v, want %v", d, tt.want)
				}
			})
		})
	}
}

// continuer is a Continuer whose answer per message body is given.
type continuer map[string]error

func (c continuer) Process(_ context.Context, msg []byte) error { return c[string(msg)] }

func TestSQS(t *testing.T) {
	c := continuer{
		"bad":       fmt.Errorf("process continuation: %w", async.ErrBadMessage),
		"transient": errors.New("store down"),
	}
	event := `{"Records":[
		{"messageId":"m1","eventSource":"aws:sqs","body":"ok"},
		{"messageId":"m2","eventSource":"aws:sqs","body":"bad"},
		{"messageId":"m3","eventSource":"aws:sqs","body":"ok"},
		{"messageId":"m4","eventSource":"aws:sqs","body":"transient"}]}`
	out, err := (&Handler{HTTP: echo, Continuations: c}).Invoke(context.Background(), []byte(event))
	if err != nil {
		t.Fatal(err)
	}
	resp := out.(events.SQSEventResponse)
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	if got, want := strings.Join(ids, ","), "m2,m4"; got != want {
		t.Errorf("batch item failures = %s, want %s", got, want)
	}

	out, err = (&Handler{HTTP: echo}).Invoke(context.Background(), []byte(event))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(out.(events.SQSEventResponse).BatchItemFailures); n != 4 {
		t.Errorf("with async off, %d failures, want all 4", n)
	}
}

func TestStream(t *testing.T) {
	next := make(chan struct{})
	h := &Handler{InvokeMode: settings.InvokeResponseStream, HTTP: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Add("Set-Cookie", "s=1")
		w.WriteHeader(http.StatusAccepted)
		w.Write([]byte("first"))
		<-next
		w.Write([]byte("second"))
	})}
	out, err := h.Invoke(context.Background(), urlEvent("u.lambda-url.us-east-1.on.aws", "/", "", nil, ""))
	if err != nil {
		t.Fatal(err)
	}
	resp := out.(*events.LambdaFunctionURLStreamingResponse)
	if resp.StatusCode != http.StatusAccepted || resp.Headers["Content-Type"] != "text/event-stream" || fmt.Sprint(resp.Cookies) != "[s=1]" {
		t.Errorf("prelude = %d %v %v", resp.StatusCode, resp.Headers, resp.Cookies)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "first" {
		t.Fatalf("first chunk %q, %v", buf, err)
	}
	close(next)
	rest, err := io.ReadAll(resp.Body)
	if err != nil || string(rest) != "second" {
		t.Errorf("rest %q, %v", rest, err)
	}

	// A body cut after the status breaks the stream: a read error, never a
	// second status.
	h.HTTP = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.Write([]byte("part"))
		panic(http.ErrAbortHandler)
	})
	out, err = h.Invoke(context.Background(), urlEvent("u.lambda-url.us-east-1.on.aws", "/", "", nil, ""))
	if err != nil {
		t.Fatal(err)
	}
	resp = out.(*events.LambdaFunctionURLStreamingResponse)
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(b) != "part" || !errors.Is(err, errStreamCut) {
		t.Errorf("cut stream: status %d body %q err %v", resp.StatusCode, b, err)
	}
}

// FuzzInvoke: no event makes Invoke panic, and a well-formed Function URL
// event reaches the HTTP face with its path, query and body unchanged.
func FuzzInvoke(f *testing.F) {
	f.Add([]byte(`{"Records":[{"messageId":"1","eventSource":"aws:sqs","body":"{\"v\":1}"}]}`), "/", "", []byte(nil))
	f.Add(urlEvent("u.lambda-url.us-east-1.on.aws", "/x", "a=1&a=2", []byte("b"), "text/plain"), "/a%2Fb", "k=%20&k", []byte{0, 0xff})
	f.Add([]byte(`{"version":"2.0","requestContext":{"http":{"method":"GET"}},"rawPath":"%"}`), "/%zz", "?&=", []byte("x"))
	var got struct {
		target string
		body   []byte
	}
	h := &Handler{
		HTTP: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got.target = r.RequestURI
			got.body, _ = io.ReadAll(r.Body)
			w.Write(got.body)
		}),
		Continuations: continuer{},
	}
	f.Fuzz(func(t *testing.T, event []byte, path, query string, body []byte) {
		h.Invoke(context.Background(), event) // must not panic
		got.target, got.body = "", nil
		if !utf8.ValidString(path) || !utf8.ValidString(query) {
			return // a JSON event carries only text
		}
		if _, err := newRequest(context.Background(), urlEvent("u.lambda-url.x.on.aws", path, query, body, "")); err != nil {
			return // not a request target: refused, not mangled
		}
		out, err := h.Invoke(context.Background(), urlEvent("u.lambda-url.x.on.aws", path, query, body, ""))
		if err != nil {
			t.Fatal(err)
		}
		// The path reaches the handler as the event wrote it, except what
		// a path cannot hold ('?', '#', spaces), which is escaped.
		want := escapeRawPath(path)
		if want == "" {
			want = "/"
		}
		if p, _, _ := strings.Cut(got.target, "?"); strings.ContainsAny(p, "# ") {
			t.Fatalf("request target %q: its path holds a '#' or a space", got.target)
		}
		if query != "" {
			want += "?" + query
		}
		if got.target != want || !bytes.Equal(got.body, body) {
			t.Fatalf("request %q %q, want %q %q", got.target, got.body, want, body)
		}
		r := decodeAnswer(t, out)
		back, err := base64.StdEncoding.DecodeString(r.Body)
		if !r.IsBase64Encoded && len(body) > 0 || err != nil || !bytes.Equal(back, body) {
			t.Fatalf("response body %q (base64 %v), want %q", r.Body, r.IsBase64Encoded, body)
		}
	})
}

// TestCheck: the settings check runs once, with the timeout the first
// deadline tells, and its error fails every invocation.
func TestCheck(t *testing.T) {
	var got []time.Duration
	h := &Handler{HTTP: echo, Check: func(d time.Duration) error {
		got = append(got, d)
		return errors.New(`setting Timeout="9000": too long`)
	}}
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 7*time.Second-30*time.Millisecond)
		_, err := h.Invoke(ctx, urlEvent("u.lambda-url.x.on.aws", "/", "", nil, ""))
		cancel()
		if err == nil || !strings.Contains(err.Error(), "Timeout") {
			t.Errorf("err = %v, want the setting error", err)
		}
	}
	if fmt.Sprint(got) != "[7s]" {
		t.Errorf("checked with %v, want once with 7s", got)
	}
}

// TestCheckLateRead: a deadline read late (a loaded host) tells a timeout
// a second or more short; the invocation fails with the setting error, and
// the next one, read on time, checks again with the longer timeout and
// passes. Once passed, no later deadline is checked.
func TestCheckLateRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 300 * time.Second
		var got []time.Duration
		h := &Handler{HTTP: echo, Check: func(d time.Duration) error {
			got = append(got, d)
			if d < timeout {
				return errors.New(`setting Timeout="299500": want at most 298000 ms`)
			}
			return nil
		}}
		invocations := []struct {
			late    time.Duration // from the invocation's start to the read
			wantErr bool
		}{
			{1500 * time.Millisecond, true}, // tells 299 s
			{2 * time.Second, true},         // tells 298 s: not checked again
			{999 * time.Millisecond, false}, // tells 300 s: checked, passes
			{5 * time.Second, false},        // passed: not checked again
		}
		for i, inv := range invocations {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			time.Sleep(inv.late)
			_, err := h.Invoke(ctx, urlEvent("u.lambda-url.x.on.aws", "/", "", nil, ""))
			cancel()
			if (err != nil) != inv.wantErr {
				t.Errorf("invocation %d read %v late: err = %v, want error %v", i, inv.late, err, inv.wantErr)
			}
		}
		if fmt.Sprint(got) != "[4m59s 5m0s]" {
			t.Errorf("checked with %v, want 4m59s then 5m0s", got)
		}
	})
}

// TestFunctionTimeout: the timeout a deadline tells is the time left
// rounded up to whole seconds, so a read up to a second late still tells
// the timeout.
func TestFunctionTimeout(t *testing.T) {
	tests := []struct {
		left, want time.Duration
	}{
		{300 * time.Second, 300 * time.Second},
		{300*time.Second - time.Millisecond, 300 * time.Second},
		{299*time.Second + time.Nanosecond, 300 * time.Second},
		{299 * time.Second, 299 * time.Second},
		{time.Millisecond, time.Second},
	}
	for _, tt := range tests {
		if got := functionTimeout(tt.left); got != tt.want {
			t.Errorf("functionTimeout(%v) = %v, want %v", tt.left, got, tt.want)
		}
	}
}

// decodeAnswer reads a buffered answer as the runtime client posts it:
// aws-lambda-go's JSON encoding of the value, or the value itself when it
// is a reader that encodes as {} (lambda/handler.go).
func decodeAnswer(tb testing.TB, out any) events.LambdaFunctionURLResponse {
	tb.Helper()
	doc, err := json.Marshal(out)
	if err != nil {
		tb.Fatal(err)
	}
	if r, ok := out.(io.Reader); ok && string(doc) == "{}" {
		if doc, err = io.ReadAll(r); err != nil {
			tb.Fatal(err)
		}
	}
	var a events.LambdaFunctionURLResponse
	if err := json.Unmarshal(doc, &a); err != nil {
		tb.Fatalf("answer %q: %v", doc, err)
	}
	return a
}

package tests

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The edge of issue 14 end to end: whom the gateway trusts, when the
// clock starts, and request framing, on each host.

// edgeBackend answers by path: /slow after 600 ms; /hang never (it waits
// for the connection to close); /hdr with the request's
// headers (and trailers) as JSON; /conn with "Connection: X-Secret,
// close" written raw; /redirect with a Location under its own base;
// anything else with its body.
func edgeBackend(tb testing.TB) *httptest.Server {
	var self string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/slow"):
			select {
			case <-time.After(600 * time.Millisecond):
				io.WriteString(w, "slow")
			case <-r.Context().Done():
			}
		case strings.HasSuffix(r.URL.Path, "/hang"):
			<-r.Context().Done()
		case strings.HasSuffix(r.URL.Path, "/hdr"):
			io.Copy(io.Discard, r.Body)
			h := r.Header.Clone()
			for k, v := range r.Trailer {
				h["Trailer-"+k] = v
			}
			h["Request-Uri"] = []string{r.RequestURI}
			json.NewEncoder(w).Encode(h)
		case strings.HasSuffix(r.URL.Path, "/conn"):
			conn, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			brw.WriteString("HTTP/1.1 200 OK\r\nVia: 1.0 upstream\r\nConnection: X-Secret, close\r\nX-Secret: s3cr3t\r\nContent-Length: 2\r\n\r\nok")
			brw.Flush()
		case strings.HasSuffix(r.URL.Path, "/redirect"):
			w.Header().Set("Location", self+"/api/next?x=1")
			w.WriteHeader(http.StatusFound)
		default:
			b, err := io.ReadAll(r.Body)
			if err != nil {
				return
			}
			w.Write(b)
		}
	}))
	self = srv.URL
	tb.Cleanup(srv.Close)
	return srv
}

func decodeHeaders(tb testing.TB, body []byte) http.Header {
	tb.Helper()
	var h http.Header
	if err := json.Unmarshal(body, &h); err != nil {
		tb.Fatalf("backend answer %q: %v", body, err)
	}
	return h
}

// rawExchange sends req on a fresh connection and reads one answer; it
// reports whether the gateway closed the connection after it.
func rawExchange(tb testing.TB, addr, req string, timeout time.Duration) (*http.Response, []byte, time.Duration, bool) {
	tb.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	start := time.Now()
	if _, err := io.WriteString(conn, req); err != nil {
		tb.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		tb.Fatalf("reading the answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	took := time.Since(start)
	// Every caller wants the connection closed: waiting loadMargin costs
	// nothing then, and a loaded machine cannot make a close look missing.
	conn.SetDeadline(time.Now().Add(loadMargin))
	_, err = br.ReadByte()
	closed := err == io.EOF || errors.Is(err, syscall.ECONNRESET)
	return resp, body, took, closed
}

// TestEdgeLocal: the local host, as a process.
func TestEdgeLocal(t *testing.T) {
	t.Parallel()
	be := edgeBackend(t)
	gw := StartGateway(t, map[string]string{"Hosts": be.URL + "/api", "MaxRetryBodyBytes": "1024",
		"Routes": `[{"prefix":"/a","hosts":["` + be.URL + `/routed"]}]`})
	addr := strings.TrimPrefix(gw.URL, "http://")

	t.Run("client forwarding headers dropped", func(t *testing.T) {
		resp, body, _ := Do(t, "GET", gw.URL+"/hdr", map[string]string{"X-Forwarded-For": "6.6.6.6", "Forwarded": "for=6.6.6.6",
			"X-Forwarded-Port": "1", "X-Request-Start": "t=1"}, "")
		h := decodeHeaders(t, body)
		if resp.StatusCode != 200 || h.Get("X-Forwarded-For") != "127.0.0.1" || h.Get("Forwarded") != "" || h.Get("X-Forwarded-Port") != "" || h.Get("X-Request-Start") != "" {
			t.Errorf("%d; backend got X-Forwarded-For %q, Forwarded %q, X-Forwarded-Port %q, X-Request-Start %q; want only the peer",
				resp.StatusCode, h.Get("X-Forwarded-For"), h.Get("Forwarded"), h.Get("X-Forwarded-Port"), h.Get("X-Request-Start"))
		}
		if h.Get("Via") != "1.1 fngateway" {
			t.Errorf("backend got Via %q; want 1.1 fngateway", h.Get("Via"))
		}
	})
	t.Run("client-address look-alikes dropped", func(t *testing.T) {
		// Headers other proxies write for the client, and forwarding
		// headers spelt with '_' (CGI-style backends read X_Forwarded_For
		// as X-Forwarded-For): a client that is no trusted proxy sends
		// none of them on. Before, they reached the backend.
		resp, body, _ := Do(t, "GET", gw.URL+"/hdr", map[string]string{"X-Real-IP": "6.6.6.6", "True-Client-IP": "6.6.6.6",
			"X-Client-IP": "6.6.6.6", "X_Forwarded_For": "6.6.6.6", "X_Forwarded_Host": "evil.example", "X-Kept": "k"}, "")
		h := decodeHeaders(t, body)
		if resp.StatusCode != 200 || h.Get("X-Kept") != "k" {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		for _, k := range []string{"X-Real-Ip", "True-Client-Ip", "X-Client-Ip", "X_Forwarded_For", "X_Forwarded_Host"} {
			if v := h.Values(k); len(v) > 0 {
				t.Errorf("backend got %s: %q; want it dropped", k, v)
			}
		}
	})
	t.Run("Connection-named header and Via", func(t *testing.T) {
		resp, body, _ := Do(t, "GET", gw.URL+"/conn", nil, "")
		if resp.StatusCode != 200 || string(body) != "ok" || resp.Header.Get("X-Secret") != "" {
			t.Errorf("%d %q, X-Secret %q; want 200 ok without X-Secret", resp.StatusCode, body, resp.Header.Get("X-Secret"))
		}
		if got := resp.Header.Get("Via"); got != "1.0 upstream, 1.1 fngateway" {
			t.Errorf("Via %q; want the backend's hop, then the gateway", got)
		}
	})
	t.Run("Location rewritten", func(t *testing.T) {
		resp, _, _ := Do(t, "GET", gw.URL+"/redirect", nil, "")
		if got, want := resp.Header.Get("Location"), gw.URL+"/next?x=1"; got != want {
			t.Errorf("Location %q; want %q", got, want)
		}
	})
	t.Run("route prefix by segment", func(t *testing.T) {
		_, body, _ := Do(t, "GET", gw.URL+"/a/hdr", nil, "")
		if uri := decodeHeaders(t, body).Get("Request-Uri"); uri != "/routed/a/hdr" {
			t.Errorf("/a/hdr reached %q; want the /a route's host", uri)
		}
		_, body, _ = Do(t, "GET", gw.URL+"/ab/hdr", nil, "")
		if uri := decodeHeaders(t, body).Get("Request-Uri"); uri != "/api/ab/hdr" {
			t.Errorf("/ab/hdr reached %q; want the default route (/a takes /a and /a/…, not /ab)", uri)
		}
	})
	t.Run("streamed upload bounded by the TTL", func(t *testing.T) {
		resp, body, took, closed := rawExchange(t, addr, "POST /up HTTP/1.1\r\nHost: gw\r\nContent-Length: 20000000\r\nS7PTTL: 1\r\n\r\nabc", 20*time.Second)
		if resp.StatusCode != 408 || decodeError(t, resp, body).Error.Code != "RequestTimeout" || !closed {
			t.Errorf("%d %s (closed %v); want 408 RequestTimeout and the connection closed", resp.StatusCode, body, closed)
		}
		if !within(took, time.Second, 50*time.Millisecond, loadMargin) {
			t.Errorf("answered after %v; want after 1 s, the TTL (not ClientBodyTimeoutMs, 30 s)", took)
		}
	})
	t.Run("malformed chunked body", func(t *testing.T) {
		for _, chunks := range []string{"zz\r\nabc\r\n0\r\n\r\n", "fffffffffffffffffff\r\nabc\r\n0\r\n\r\n", "3\r\nabcX0\r\n\r\n"} {
			resp, body, _, closed := rawExchange(t, addr, "POST /c HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n"+chunks, 10*time.Second)
			if resp.StatusCode != 400 || decodeError(t, resp, body).Error.Code != "InvalidBody" || !closed {
				t.Errorf("%q: %d %s (closed %v); want 400 InvalidBody, connection closed", chunks, resp.StatusCode, body, closed)
			}
		}
		gw.WaitLog(t, loadMargin, func(m map[string]any) bool {
			return m["msg"] == "request" && m["path"] == "/c" && m["code"] == "InvalidBody" && m["status"] == float64(400)
		})
	})
	t.Run("both framings close the connection", func(t *testing.T) {
		resp, body, _, closed := rawExchange(t, addr, "POST /echo HTTP/1.1\r\nHost: gw\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 10*time.Second)
		if resp.StatusCode != 200 || string(body) != "hello" || !closed {
			t.Errorf("%d %q (closed %v); want 200 hello by the chunked framing, then the connection closed", resp.StatusCode, body, closed)
		}
	})
	t.Run("request trailers forwarded", func(t *testing.T) {
		for _, size := range []int{5, 2000} { // buffered, streamed (MaxRetryBodyBytes 1024)
			data := strings.Repeat("x", size)
			req := "POST /hdr HTTP/1.1\r\nHost: gw\r\nConnection: close\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum\r\n\r\n" +
				strconv.FormatInt(int64(size), 16) + "\r\n" + data + "\r\n0\r\nX-Checksum: abc123\r\n\r\n"
			resp, body, _, _ := rawExchange(t, addr, req, 10*time.Second)
			if got := decodeHeaders(t, body).Get("Trailer-X-Checksum"); resp.StatusCode != 200 || got != "abc123" {
				t.Errorf("%d-byte body: %d, backend trailer %q; want abc123", size, resp.StatusCode, got)
			}
		}
	})
}

// TestEdgeTrustedProxy: behind a trusted proxy its X-Forwarded-For hops
// and X-Request-Start are believed: the TTL starts when the proxy
// accepted the request, and the log line says both times.
func TestEdgeTrustedProxy(t *testing.T) {
	t.Parallel()
	be := edgeBackend(t)
	gw := StartGateway(t, map[string]string{"Hosts": be.URL, "TrustedProxies": "127.0.0.0/8,::1/128"})
	// The proxy accepted the request 30 s before it was sent, with a
	// 30.3 s TTL: 300 ms are left. Counted from arrival, the TTL would end
	// 30.3 s after it, past loadMargin.
	start := time.Now()
	resp, body, took := Do(t, "GET", gw.URL+"/hang", map[string]string{"S7PTTL": "30.3",
		"X-Request-Start": "t=" + strconv.FormatInt(start.Add(-30*time.Second).UnixMicro(), 10)}, "")
	if resp.StatusCode != 504 || decodeError(t, resp, body).Error.Code != "TTLExpired" {
		t.Errorf("%d %s; want 504 TTLExpired: the TTL started 30 s before the gateway saw the request", resp.StatusCode, body)
	}
	if !within(took, 300*time.Millisecond, 50*time.Millisecond, loadMargin) {
		t.Errorf("answered after %v; want after 300 ms, the TTL counted from the proxy's acceptance", took)
	}
	line := gw.WaitLog(t, loadMargin, func(m map[string]any) bool { return m["msg"] == "request" && m["path"] == "/hang" })
	if q, _ := line["queueMs"].(float64); q < 29950 || line["acceptedAt"] == nil || line["arrivedAt"] == nil {
		t.Errorf("log line %v; want acceptedAt, arrivedAt and queueMs about 30000", line)
	}
	_, body, _ = Do(t, "GET", gw.URL+"/hdr", map[string]string{"X-Forwarded-For": "6.6.6.6, 203.0.113.9"}, "")
	if got := decodeHeaders(t, body).Get("X-Forwarded-For"); got != "203.0.113.9, 127.0.0.1" {
		t.Errorf("backend got X-Forwarded-For %q; want the client the proxy saw, then the proxy", got)
	}
}

// TestEdgeBadSettings: settings that can never take effect stop the
// start-up with one line naming them.
func TestEdgeBadSettings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  []string
		want string
	}{
		{"profiles from /dev/zero", []string{"UserProfiles=file:/dev/zero"}, `setting UserProfiles="file:/dev/zero"`},
		{"prefix under /_gateway/", []string{`Routes=[{"prefix":"/_gateway/x"}]`}, "outside /_gateway/"},
		{"prefix with ..", []string{`Routes=[{"prefix":"/a/../b"}]`}, "without a .. segment"},
		{"MaxAttempts too large", []string{"MaxAttempts=100000000000"}, `setting MaxAttempts="100000000000": want a whole number from 1 to 100`},
		{"empty element in Hosts", []string{"Hosts=http://a:1,,http://b:1"}, `setting Hosts="http://a:1,,http://b:1"`},
		{"MaxBufferedBytes beyond memory", []string{"MaxBufferedBytes=64424509440000"}, `setting MaxBufferedBytes="64424509440000": want at most`},
		{"MaxRetryBodyBytes beyond memory", []string{"MaxRetryBodyBytes=64424509440000"}, `setting MaxRetryBodyBytes="64424509440000": want at most`},
		{"TrustedProxies not CIDRs", []string{"TrustedProxies=10.0.0.0/8,localhost"}, `setting TrustedProxies="10.0.0.0/8,localhost": want comma-separated CIDRs`},
		{"GOGC not a number", []string{"GOGC=4OO"}, `setting GOGC="4OO": want a whole percentage or off`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(binary)
			cmd.Env = append(baseEnv(), "Hosts=http://a:1", "ListenAddr=127.0.0.1:0")
			cmd.Env = append(cmd.Env, tt.env...)
			done := make(chan struct{})
			var out []byte
			var err error
			go func() { out, err = cmd.CombinedOutput(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Fatalf("the gateway did not stop within 30 s: %q", out)
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Fatalf("exit = %v; want 2 (output %q)", err, out)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tt.want) {
				t.Errorf("output = %q; want one line containing %q", out, tt.want)
			}
		})
	}
}

// withTimeEpoch sets an HTTP event's requestContext.timeEpoch.
func withTimeEpoch(tb testing.TB, event []byte, at time.Time) []byte {
	tb.Helper()
	var e map[string]any
	if err := json.Unmarshal(event, &e); err != nil {
		tb.Fatal(err)
	}
	e["requestContext"].(map[string]any)["timeEpoch"] = at.UnixMilli()
	b, err := json.Marshal(e)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestLambdaEdge: under the Lambda emulator the TTL starts at the event's
// requestContext.timeEpoch, the client is the event's sourceIp whatever
// X-Forwarded-For the client wrote, and a rawPath holding '?' or '#'
// reaches the backend escaped.
func TestLambdaEdge(t *testing.T) {
	t.Parallel()
	be := edgeBackend(t)
	f := startFunction(t, binary, map[string]string{"Hosts": be.URL, "AWS_LAMBDA_FUNCTION_TIMEOUT": "10"})
	for _, name := range []string{"lambda-urls-request.json", "apigw-v2-request-no-authorizer.json"} {
		t.Run(name, func(t *testing.T) {
			// The platform accepted the request 800 ms before the function
			// got it (a cold start): with a 1 s TTL, at most 200 ms are
			// left, less than the backend's 600 ms. (Counted from the
			// function's own arrival the request would succeed.) On a
			// loaded machine the emulator's hand-over may eat the rest:
			// then the TTL is over before any attempt, 412.
			ev := withTimeEpoch(t, httpEvent(t, name, httpRequest{method: "GET", rawPath: "/slow", headers: map[string]string{"s7pttl": "1"}}),
				time.Now().Add(-800*time.Millisecond))
			a, body, _ := f.invokeHTTP(t, ev)
			if a.StatusCode != 504 && a.StatusCode != 412 || !strings.Contains(string(body), `"TTLExpired"`) {
				t.Errorf("%d %s; want TTLExpired (504, or 412 when nothing was left): the TTL started at timeEpoch", a.StatusCode, body)
			}
			m := regexp.MustCompile(`"acceptedAt":"[^"]+".*"queueMs":(\d+)`).FindStringSubmatch(f.rie.Log())
			if len(m) < 2 {
				t.Errorf("no log line with acceptedAt and queueMs:\n%s", f.rie.Log())
			} else if q, _ := strconv.Atoi(m[1]); q < 800 {
				t.Errorf("log line with acceptedAt and queueMs %v; want queueMs of 800 or more:\n%s", m, f.rie.Log())
			}
			ev = httpEvent(t, name, httpRequest{method: "GET", rawPath: "/x?y#z/hdr", rawQuery: "q=1",
				headers: map[string]string{"x-forwarded-for": "6.6.6.6, 198.51.100.7", "x-request-start": "t=1"}})
			a, body, _ = f.invokeHTTP(t, ev)
			h := decodeHeaders(t, body)
			if a.StatusCode != 200 || h.Get("Request-Uri") != "/x%3Fy%23z/hdr?q=1" {
				t.Errorf("%d: backend got %q; want /x%%3Fy%%23z/hdr?q=1", a.StatusCode, h.Get("Request-Uri"))
			}
			if h.Get("X-Forwarded-For") != "198.51.100.7" || h.Get("X-Request-Start") != "" || h.Get("X-Forwarded-Proto") != "https" {
				t.Errorf("backend got X-Forwarded-For %q, X-Request-Start %q, X-Forwarded-Proto %q; want the sourceIp alone, none, https",
					h.Get("X-Forwarded-For"), h.Get("X-Request-Start"), h.Get("X-Forwarded-Proto"))
			}
			if a.Headers["Via"] != "1.1 fngateway" {
				t.Errorf("answer Via %q; want 1.1 fngateway", a.Headers["Via"])
			}
		})
	}
}

// TestAzureFunctionsEdge: the handler gets what the Functions host
// forwards with enableForwardingHttpRequest: the client's request with
// the headers App Service's front end added (X-Forwarded-For with the
// client's address and port appended, X-Forwarded-Proto, the ARR
// headers) and the host's invocation headers, from loopback. The front
// end's one hop is believed; what the client wrote is not.
func TestAzureFunctionsEdge(t *testing.T) {
	t.Parallel()
	be := edgeBackend(t)
	g := StartAzureHandler(t, map[string]string{"Hosts": be.URL, "AzureFunctionsJobHost__functionTimeout": "00:05:00"})
	frontEnd := map[string]string{
		"X-Forwarded-For":         "6.6.6.6, 203.0.113.9:51234",
		"X-Forwarded-Proto":       "https",
		"X-Forwarded-TlsVersion":  "1.3",
		"X-Arr-Ssl":               "2048|256|CN=Microsoft Azure RSA TLS Issuing CA 03|CN=*.azurewebsites.net",
		"X-Arr-Log-Id":            "3c1b6d6e-2b3a-4d8e-9a55-6f2f2b0e8c11",
		"Client-Ip":               "203.0.113.9:51234",
		"Disguised-Host":          "gw-func.azurewebsites.net",
		"Was-Default-Hostname":    "gw-func.azurewebsites.net",
		"X-Original-Url":          "/hdr",
		"X-Waws-Unencoded-Url":    "/hdr",
		"X-Site-Deployment-Id":    "gw-func",
		"X-Appservice-Proto":      "https",
		"Max-Forwards":            "10",
		"X-Forwarded-Host":        "evil.example",
		"X-Request-Start":         "t=1",
		"Forwarded":               "for=6.6.6.6",
		"X-Client-Written-Header": "kept",
	}
	resp, body, _ := Forward(t, g, "GET", "/hdr", frontEnd, "")
	h := decodeHeaders(t, body)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	for k, want := range map[string]string{
		"X-Forwarded-For":         "203.0.113.9",
		"X-Forwarded-Proto":       "https",
		"X-Forwarded-Host":        strings.TrimPrefix(g.URL, "http://"),
		"X-Request-Start":         "",
		"Forwarded":               "",
		"X-Forwarded-Tlsversion":  "",
		"Via":                     "1.1 fngateway",
		"X-Client-Written-Header": "kept",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("backend got %s = %q; want %q", k, got, want)
		}
	}
	// A client's X-Request-Start does not shorten its TTL: believed, 300 ms
	// would be left for a backend that answers at 600 ms.
	frontEnd["S7PTTL"] = "30.3"
	frontEnd["X-Request-Start"] = "t=" + strconv.FormatInt(time.Now().Add(-30*time.Second).UnixMicro(), 10)
	if resp, body, _ := Forward(t, g, "GET", "/slow", frontEnd, ""); resp.StatusCode != 200 {
		t.Errorf("%d %s; want 200: the client's X-Request-Start is not the platform's", resp.StatusCode, body)
	}
}

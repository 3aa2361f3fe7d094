package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"fngateway/core"
	"fngateway/internal/settings"
)

// headerEcho is a backend that answers with the request's headers as JSON.
func headerEcho(t *testing.T) *httptest.Server {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		json.NewEncoder(w).Encode(r.Header)
	}))
	t.Cleanup(be.Close)
	return be
}

// TestForwardedHeadersTrust: from a peer outside TrustedProxies the
// forwarding headers a client wrote are dropped and X-Forwarded-For is the
// peer; from a trusted peer they are believed, up to the client.
func TestForwardedHeadersTrust(t *testing.T) {
	be := headerEcho(t)
	client := map[string]string{
		"X-Forwarded-For":  "6.6.6.6",
		"X-Forwarded-Host": "evil.example",
		"X-Forwarded-Port": "1",
		"Forwarded":        "for=6.6.6.6;host=evil.example",
		"X-Request-Start":  "t=" + strconv.FormatInt(time.Now().UnixMicro(), 10),
	}
	tests := []struct {
		name    string
		trusted string
		want    map[string]string // "" means absent
	}{
		{"no trusted proxies", "", map[string]string{"X-Forwarded-For": "127.0.0.1", "X-Forwarded-Port": "", "Forwarded": "",
			"X-Request-Start": "", "X-Forwarded-Proto": "http", "Via": "1.1 fngateway"}},
		{"peer not trusted", "10.0.0.0/8", map[string]string{"X-Forwarded-For": "127.0.0.1", "X-Forwarded-Port": "", "Forwarded": ""}},
		{"peer trusted", "127.0.0.0/8", map[string]string{"X-Forwarded-For": "6.6.6.6, 127.0.0.1", "X-Forwarded-Port": "1",
			"Forwarded": "for=6.6.6.6;host=evil.example", "X-Forwarded-Host": "evil.example"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := startGW(t, be.URL, func(h *Handler) {
				if err := h.Settings.TrustedProxies.Decode(tt.trusted); err != nil {
					t.Fatal(err)
				}
			})
			req, _ := http.NewRequest("GET", g.srv.URL+"/h", nil)
			for k, v := range client {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got http.Header
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatal(err)
			}
			for k, want := range tt.want {
				if v := strings.Join(got[k], ","); v != want {
					t.Errorf("backend got %s = %q; want %q", k, v, want)
				}
			}
			if tt.trusted != "127.0.0.0/8" && got.Get("X-Forwarded-Host") != g.addr() {
				t.Errorf("backend got X-Forwarded-Host %q; want the request's own %q", got.Get("X-Forwarded-Host"), g.addr())
			}
		})
	}
}

// TestClockStartsAtAcceptance: a trusted proxy's X-Request-Start starts
// the TTL when the proxy accepted the request; from an untrusted peer it
// is ignored, and a time in the future counts as the gateway's arrival.
// Both times are logged. The TTL is 10.3 s and the proxy accepted the
// request 10 s before it was sent: believed, 300 ms are left and a backend
// that never answers is cut then; ignored, a backend answering at 600 ms
// has 9.7 s of room.
func TestClockStartsAtAcceptance(t *testing.T) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wait := time.After(600 * time.Millisecond)
		if r.URL.Path == "/hang" {
			wait = nil
		}
		select {
		case <-wait:
			io.WriteString(w, "late")
		case <-r.Context().Done():
		}
	}))
	defer be.Close()
	const ttl = "10.3"
	tests := []struct {
		name    string
		trusted string
		path    string
		start   time.Duration // X-Request-Start relative to sending
		status  int
		within  time.Duration // the answer comes about this long after sending
	}{
		{"trusted, waited 10 s", "127.0.0.1/32", "/hang", -10 * time.Second, 504, 300 * time.Millisecond},
		{"untrusted: ignored", "", "/slow", -10 * time.Second, 200, 600 * time.Millisecond},
		{"trusted, in the future: now", "127.0.0.1/32", "/slow", time.Hour, 200, 600 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := startGW(t, be.URL, func(h *Handler) { h.Settings.TrustedProxies.Decode(tt.trusted) })
			req, _ := http.NewRequest("GET", g.srv.URL+tt.path, nil)
			req.Header.Set("S7PTTL", ttl)
			sent := time.Now()
			req.Header.Set("X-Request-Start", "t="+strconv.FormatInt(sent.Add(tt.start).UnixMicro(), 10))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			took := time.Since(sent)
			if resp.StatusCode != tt.status {
				t.Fatalf("answer %d %s; want %d", resp.StatusCode, body, tt.status)
			}
			if tt.status == 504 && errorCode(t, body) != "TTLExpired" {
				t.Errorf("code %s; want TTLExpired", body)
			}
			// The status tells which clock was used; the time is checked
			// for not coming early, and for the 504 for coming seconds
			// before the TTL counted from arrival would end.
			if took < tt.within-50*time.Millisecond || took > tt.within+answerSlack {
				t.Errorf("answered after %v; want after %v", took, tt.within)
			}
			if tt.status == 504 {
				waitLog(t, g.log, `"acceptedAt":"`)
				waitLog(t, g.log, `"arrivedAt":"`)
				waitLog(t, g.log, `"queueMs":`)
				m := regexp.MustCompile(`"queueMs":(-?\d+)`).FindStringSubmatch(g.log.String())
				if m == nil {
					t.Fatalf("queueMs is not a whole number of ms:\n%s", g.log.String())
				}
				if ms, _ := strconv.Atoi(m[1]); ms < 10000 {
					t.Errorf("queueMs %d; want at least 10000, from the proxy's acceptance to the arrival", ms)
				}
			} else if waitLog(t, g.log, `"msg":"request"`); strings.Contains(g.log.String(), "acceptedAt") && tt.trusted == "" {
				t.Errorf("an untrusted X-Request-Start was logged as the acceptance time: %s", g.log.String())
			}
		})
	}
}

// TestStreamedUploadBoundedByTTL: a body too large to buffer that goes
// silent is answered 408 at the TTL, not after ClientBodyTimeoutMs, and
// its connection is closed.
func TestStreamedUploadBoundedByTTL(t *testing.T) {
	got := make(chan int64, 1)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		got <- n
	}))
	defer be.Close()
	g := startGW(t, be.URL, func(h *Handler) { h.Settings.MaxRetryBodyBytes = 1 << 10 }) // ClientBodyTimeoutMs: 30 s
	conn, err := net.Dial("tcp", g.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	start := time.Now()
	io.WriteString(conn, "POST /up HTTP/1.1\r\nHost: gw\r\nContent-Length: 20000000\r\nS7PTTL: 1\r\n\r\nabc")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 408 || errorCode(t, body) != "RequestTimeout" || !resp.Close {
		t.Errorf("answer %d %s (close %v); want 408 RequestTimeout, Connection: close", resp.StatusCode, body, resp.Close)
	}
	if took < 950*time.Millisecond || took > time.Second+answerSlack {
		t.Errorf("408 after %v; want after 1 s, the TTL (not ClientBodyTimeoutMs, 30 s)", took)
	}
	if _, err := br.ReadByte(); err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("after the 408 the connection gave %v; want it closed", err)
	}
	select {
	case n := <-got:
		if n >= 20000000 {
			t.Errorf("the backend got %d bytes", n)
		}
	case <-time.After(5 * time.Second):
		t.Error("the backend's request was not ended")
	}
}

// TestMalformedChunkedBody: bad chunked framing is 400 InvalidBody, as
// JSON, logged as such, whether the body is buffered or already streaming;
// a client that goes away mid-body is 499 in the log and gets nothing.
func TestMalformedChunkedBody(t *testing.T) {
	var calls atomic.Int64
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		io.WriteString(w, "whole")
	}))
	defer be.Close()
	bodies := map[string]string{
		"bad size":      "zz\r\nabc\r\n0\r\n\r\n",
		"size overflow": "fffffffffffffffffff\r\nabc\r\n0\r\n\r\n",
		"missing CRLF":  "3\r\nabcX0\r\n\r\n",
		"late bad size": "5\r\nhello\r\nzz\r\n",
	}
	for _, mode := range []struct {
		name     string
		maxRetry settings.Count
	}{{"buffered", 1 << 20}, {"streamed", 2}} {
		for name, chunks := range bodies {
			t.Run(mode.name+"/"+name, func(t *testing.T) {
				g := startGW(t, be.URL, func(h *Handler) { h.Settings.MaxRetryBodyBytes = mode.maxRetry })
				resp, body := rawRequest(t, g.addr(), "POST /c HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n"+chunks)
				if resp.StatusCode != 400 || errorCode(t, body) != "InvalidBody" || resp.Header.Get("Content-Type") != "application/json" {
					t.Fatalf("answer %d %q; want 400 InvalidBody as JSON", resp.StatusCode, body)
				}
				waitLog(t, g.log, `"status":400,"code":"InvalidBody"`)
			})
		}
	}
	// A real disconnect: 499 in the log.
	g := startGW(t, be.URL, nil)
	conn, err := net.Dial("tcp", g.addr())
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(conn, "POST /gone HTTP/1.1\r\nHost: gw\r\nContent-Length: 100\r\n\r\nonly ten b")
	conn.Close()
	waitLog(t, g.log, `"status":499,"code":"ClientClosedRequest"`)
}

// serveGW serves a gateway handler with Serve, as the local and Azure
// hosts do, on a loopback listener.
func serveGW(t testing.TB, hosts string) string {
	t.Helper()
	s := testSettings(t, hosts)
	stats := &core.Stats{}
	h := &Handler{Settings: s, Forwarder: &core.Forwarder{Transport: core.NewTransport(), Stats: stats}, Stats: stats}
	h.Init()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Serve(ctx, &http.Server{Handler: h}, ln)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String()
}

// TestBothFramingsCloses: a request with both Content-Length and
// Transfer-Encoding is forwarded by its chunked framing and its
// connection closed after the answer (RFC 9112 §6.3); a plain chunked
// request keeps its connection.
func TestBothFramingsCloses(t *testing.T) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	}))
	defer be.Close()
	addr := serveGW(t, be.URL)
	for _, tt := range []struct {
		name   string
		head   string
		closed bool
	}{
		{"both", "POST /x HTTP/1.1\r\nHost: gw\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", true},
		{"both, other order and case", "POST /x HTTP/1.1\r\nHost: gw\r\ntransfer-encoding: chunked\r\ncontent-length: 3\r\n\r\n", true},
		{"chunked only", "POST /x HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(conn)
			io.WriteString(conn, tt.head+"5\r\nhello\r\n0\r\n\r\n")
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || string(body) != "hello" || resp.Close != tt.closed {
				t.Fatalf("answer %d %q, close %v; want 200 hello, close %v", resp.StatusCode, body, resp.Close, tt.closed)
			}
			// A second request on the connection: answered only if it stayed open.
			io.WriteString(conn, "GET /y HTTP/1.1\r\nHost: gw\r\n\r\n")
			resp2, err := http.ReadResponse(br, nil)
			if tt.closed && err == nil {
				t.Errorf("a second request was answered %d on a connection that should have closed", resp2.StatusCode)
			}
			if !tt.closed && err != nil {
				t.Errorf("second request: %v; want an answer on the kept connection", err)
			}
		})
	}
}

// TestRequestTrailers: a chunked upload's trailers reach the backend,
// whether the body is buffered or streams.
func TestRequestTrailers(t *testing.T) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		io.WriteString(w, string(b)+"|"+r.Trailer.Get("X-Checksum"))
	}))
	defer be.Close()
	for _, mode := range []struct {
		name     string
		maxRetry settings.Count
	}{{"buffered", 1 << 20}, {"streamed", 2}} {
		t.Run(mode.name, func(t *testing.T) {
			g := startGW(t, be.URL, func(h *Handler) { h.Settings.MaxRetryBodyBytes = mode.maxRetry })
			resp, body := rawRequest(t, g.addr(), "POST /t HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum\r\n\r\n"+
				"5\r\nhello\r\n0\r\nX-Checksum: abc123\r\n\r\n")
			if resp.StatusCode != 200 || string(body) != "hello|abc123" {
				t.Errorf("answer %d %q; want 200 hello|abc123", resp.StatusCode, body)
			}
		})
	}
}

// TestLocationRewritten: a backend's Location or Content-Location under
// its own base URL is rewritten to the gateway's public address; any other
// is left alone.
func TestLocationRewritten(t *testing.T) {
	var beURL string
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/own":
			w.Header().Set("Location", beURL+"/api/next/a%2Fb?x=1")
			w.Header().Set("Content-Location", beURL+"/api")
		case "/api/other":
			w.Header().Set("Location", "https://elsewhere.example/api/x")
		case "/api/outside":
			w.Header().Set("Location", beURL+"/apis/x")
		case "/api/relative":
			w.Header().Set("Location", "/api/rel")
		}
		w.WriteHeader(http.StatusFound)
	}))
	defer be.Close()
	beURL = be.URL
	tests := []struct {
		path, public, loc, cloc string
	}{
		{"/own", "", "http://gw.test/next/a%2Fb?x=1", "http://gw.test/"},
		{"/own", "https://pub.example/gw", "https://pub.example/gw/next/a%2Fb?x=1", "https://pub.example/gw/"},
		{"/other", "", "https://elsewhere.example/api/x", ""},
		{"/outside", "", beURL + "/apis/x", ""},
		{"/relative", "", "/api/rel", ""},
	}
	for _, tt := range tests {
		t.Run(tt.path+" "+tt.public, func(t *testing.T) {
			g := startGW(t, be.URL+"/api", func(h *Handler) { h.Settings.PublicBaseURL = settings.BaseURL(tt.public) })
			resp, _ := rawRequest(t, g.addr(), "GET "+tt.path+" HTTP/1.1\r\nHost: gw.test\r\nConnection: close\r\n\r\n")
			if got := resp.Header.Get("Location"); got != tt.loc {
				t.Errorf("Location = %q; want %q", got, tt.loc)
			}
			if got := resp.Header.Get("Content-Location"); got != tt.cloc {
				t.Errorf("Content-Location = %q; want %q", got, tt.cloc)
			}
		})
	}
}

// TestViaAndConnectionNamed: the gateway adds itself to Via both ways,
// keeping earlier hops, and a header a backend names in
// "Connection: X-Secret, close" never reaches the client.
func TestViaAndConnectionNamed(t *testing.T) {
	seenVia := make(chan string, 1)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seenVia <- r.Header.Get("Via")
		writeRaw(t, w, "HTTP/1.1 200 OK\r\nVia: 1.0 upstream\r\nConnection: X-Secret, close\r\nX-Secret: s3cr3t\r\nX-Kept: k\r\nContent-Length: 2\r\n\r\nok", nil)
	}))
	defer be.Close()
	g := startGW(t, be.URL, nil)
	resp, body := rawRequest(t, g.addr(), "GET /v HTTP/1.1\r\nHost: gw\r\nVia: 1.1 client-proxy\r\nConnection: close\r\n\r\n")
	if got := <-seenVia; got != "1.1 client-proxy, 1.1 fngateway" {
		t.Errorf("backend got Via %q; want the client's hop then the gateway", got)
	}
	if got := resp.Header.Get("Via"); got != "1.0 upstream, 1.1 fngateway" {
		t.Errorf("client got Via %q; want the backend's hop then the gateway", got)
	}
	if resp.Header.Get("X-Secret") != "" || resp.Header.Get("X-Kept") != "k" || string(body) != "ok" {
		t.Errorf("client got X-Secret %q, X-Kept %q, body %q; want no X-Secret", resp.Header.Get("X-Secret"), resp.Header.Get("X-Kept"), body)
	}
}

// TestHugeContentLengthAllocatesNothing: with body limits as large as
// they go, a Content-Length of 60 GiB followed by three bytes allocates
// no buffer of that size (it used to kill the process): the buffer grows
// as bytes arrive, and the client that left is a 499.
func TestHugeContentLengthAllocatesNothing(t *testing.T) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }))
	defer be.Close()
	g := startGW(t, be.URL, func(h *Handler) {
		h.Settings.MaxRetryBodyBytes = math.MaxInt64
		h.Settings.MaxBufferedBytes = math.MaxInt64
	})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	conn, err := net.Dial("tcp", g.addr())
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(conn, "PUT /big HTTP/1.1\r\nHost: gw\r\nContent-Length: 64424509440\r\n\r\nabc")
	conn.Close()
	waitLog(t, g.log, `"status":499`)
	runtime.ReadMemStats(&after)
	if grew := int64(after.TotalAlloc - before.TotalAlloc); grew > 64<<20 {
		t.Errorf("the request allocated %d MiB; want a buffer sized by the bytes that came, not the Content-Length", grew>>20)
	}
	if n := g.h.bodies.InUse(); n != 0 {
		t.Errorf("%d bytes of the buffer budget still taken", n)
	}
}

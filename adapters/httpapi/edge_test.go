package httpapi

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"fngateway/core"
	"fngateway/core/async"
	"fngateway/internal/settings"
	"fngateway/internal/testutil"
)

// lockedBuffer is a log sink safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// answerSlack is how much later than its settings imply an answer may come
// in these tests: room for a loaded machine running -race. It is a
// liveness bound, never a latency figure (those are the benchmarks' in
// tests/bench), and always below the limit the test tells apart (the
// connection's 10 s deadline, ClientBodyTimeoutMs's 30 s).
const answerSlack = 5 * time.Second

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// gw serves a gateway handler on a loopback server, in front of the
// backend URL(s) hosts, with the gateway's own transport.
type gw struct {
	h   *Handler
	srv *httptest.Server
	log *lockedBuffer
}

func startGW(t *testing.T, hosts string, edit func(*Handler)) *gw {
	t.Helper()
	s := testSettings(t, hosts)
	s.RetryBackoffMs = 0
	lb := &lockedBuffer{}
	stats := &core.Stats{}
	h := &Handler{Settings: s, Forwarder: &core.Forwarder{Transport: core.NewTransport(), Stats: stats}, Stats: stats,
		Logger: slog.New(slog.NewJSONHandler(lb, nil)), Host: core.HostCaps{Name: "test", Upgrade: true}}
	if edit != nil {
		edit(h)
	}
	h.Init()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &gw{h: h, srv: srv, log: lb}
}

func (g *gw) addr() string { return strings.TrimPrefix(g.srv.URL, "http://") }

// rawRequest sends req (a whole request head, and body) on a fresh
// connection and reads the answer, so no client library touches the path.
func rawRequest(t *testing.T, addr, req string) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer to %q: %v", strings.SplitN(req, "\r\n", 2)[0], err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, body
}

func errorCode(t *testing.T, body []byte) string {
	t.Helper()
	var doc struct{ Error struct{ Code string } }
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return doc.Error.Code
}

// TestPathConfinement: escape probes, plain and encoded with either
// separator, are 400 InvalidPath and never reach the backend; any other
// path reaches it under the base path with its escaping as sent.
func TestPathConfinement(t *testing.T) {
	var seen sync.Map
	var calls atomic.Int64
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		seen.Store(r.URL.Query().Get("id"), r.RequestURI)
	}))
	defer be.Close()
	g := startGW(t, be.URL+"/api", nil)
	for _, p := range []string{"/../x", "/..%2fadmin/secret", "/..%2Fadmin/secret", "/%2e%2e/x", "/%2E%2e%2fadmin", "/..%5cadmin", "/a/..%5c..%5cadmin", "/a/%2e%2e"} {
		resp, body := rawRequest(t, g.addr(), "GET "+p+" HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n")
		if resp.StatusCode != 400 || errorCode(t, body) != "InvalidPath" || resp.Header.Get("X-Gateway-Error") != "InvalidPath" {
			t.Errorf("GET %s = %d %s; want 400 InvalidPath", p, resp.StatusCode, body)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("escape probes reached the backend %d times", n)
	}
	kept := map[string]string{
		"/a%2Fb":                       "/api/a%2Fb",
		"/a%3Bb":                       "/api/a%3Bb",
		"/x%40y%2Bz%7Ew%2Cv%3Du":       "/api/x%40y%2Bz%7Ew%2Cv%3Du",
		"/plain/a;b,c=d@e+f~g!*'()$&:": "/api/plain/a;b,c=d@e+f~g!*'()$&:",
		"/%E2%82%AC%20x":               "/api/%E2%82%AC%20x",
	}
	i := 0
	for in, want := range kept {
		i++
		id := fmt.Sprint(i)
		resp, body := rawRequest(t, g.addr(), "GET "+in+"?id="+id+" HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n")
		if resp.StatusCode != 200 {
			t.Errorf("GET %s = %d %s; want 200", in, resp.StatusCode, body)
			continue
		}
		got, _ := seen.Load(id)
		if got != want+"?id="+id {
			t.Errorf("GET %s reached the backend as %v; want %s?id=%s", in, got, want, id)
		}
	}
}

// TestChunkedCutAborted: a chunked answer the backend breaks off reaches
// the client as a broken transfer (no terminating chunk), is counted and
// logged.
func TestChunkedCutAborted(t *testing.T) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// No terminating chunk: the connection closes after the first.
		writeRaw(t, w, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n", nil)
	}))
	defer be.Close()
	g := startGW(t, be.URL, nil)
	resp, err := http.Get(g.srv.URL + "/cut")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil {
		t.Fatalf("a cut chunked answer reached the client whole: %q", body)
	}
	if got := g.h.Stats.StreamBackendCut.Load(); got != 1 {
		t.Errorf("stream_backend_cut = %d; want 1", got)
	}
	waitLog(t, g.log, `"code":"BackendCut"`)
}

func waitLog(t *testing.T, lb *lockedBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(lb.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %s:\n%s", want, lb.String())
		}
		time.Sleep(5 * time.Millisecond) // polling a log with a deadline
	}
}

// TestPassThroughAsSent: no Accept-Encoding or User-Agent is added to a
// request that had none, and a gzip answer reaches the client byte for
// byte.
func TestPassThroughAsSent(t *testing.T) {
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	zw.Write(bytes.Repeat([]byte("compressible "), 200))
	zw.Close()
	type seenHdr struct {
		ae, ua []string
	}
	seen := make(chan seenHdr, 1)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- seenHdr{r.Header["Accept-Encoding"], r.Header["User-Agent"]}
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(zipped.Bytes())
	}))
	defer be.Close()
	g := startGW(t, be.URL, nil)
	resp, body := rawRequest(t, g.addr(), "GET /z HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n")
	got := <-seen
	if got.ae != nil || got.ua != nil {
		t.Errorf("backend saw Accept-Encoding %q, User-Agent %q; want neither (the client sent none)", got.ae, got.ua)
	}
	if resp.Header.Get("Content-Encoding") != "gzip" || !bytes.Equal(body, zipped.Bytes()) {
		t.Errorf("answer: Content-Encoding %q, %d bytes; want the backend's %d gzip bytes as sent",
			resp.Header.Get("Content-Encoding"), len(body), zipped.Len())
	}
}

// TestEarlyHintsRelayed: a 103 reaches the client before the backend has
// even decided its final answer.
func TestEarlyHintsRelayed(t *testing.T) {
	release := make(chan struct{})
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload; as=style")
		w.WriteHeader(http.StatusEarlyHints)
		select {
		case <-release:
		case <-time.After(10 * time.Second):
		}
		w.Header().Del("Link")
		io.WriteString(w, "final")
	}))
	defer be.Close()
	g := startGW(t, be.URL, nil)
	var hints atomic.Int64
	var link atomic.Value
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		if code == http.StatusEarlyHints {
			hints.Add(1)
			link.Store(h.Get("Link"))
			close(release) // the final answer comes only after the hint arrived
		}
		return nil
	}}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", g.srv.URL+"/hints", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if hints.Load() != 1 || link.Load() != "</style.css>; rel=preload; as=style" {
		t.Errorf("client got %d 103s (Link %v); want one with the backend's Link", hints.Load(), link.Load())
	}
	if resp.StatusCode != 200 || string(body) != "final" || resp.Header.Get("Link") != "" {
		t.Errorf("final answer %d %q Link %q; want 200 final without the hint's headers", resp.StatusCode, body, resp.Header.Get("Link"))
	}
}

// echoUpgrade is a backend that switches to an echo protocol.
func echoUpgrade(t *testing.T, calls *atomic.Int64) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Header.Get("Upgrade") != "echo" || !strings.EqualFold(r.Header.Get("Connection"), "upgrade") {
			http.Error(w, "want Upgrade: echo", 400)
			return
		}
		writeRaw(t, w, switchEcho, func(conn net.Conn, brw *bufio.ReadWriter) {
			io.Copy(conn, brw) // echo until the peer closes
		})
	}))
}

// TestUpgradeTunnelled: where the host can hold a connection, an upgrade
// request gets the backend's 101 and a working tunnel; the route's idle
// limit closes a silent tunnel.
func TestUpgradeTunnelled(t *testing.T) {
	// Room for the 101 and two echoes before the tunnel is silent.
	const idle = 2 * time.Second
	var calls atomic.Int64
	be := echoUpgrade(t, &calls)
	defer be.Close()
	g := startGW(t, be.URL, func(h *Handler) {
		h.Settings.Routes = append(h.Settings.Routes, core.Route{Prefix: "/idle", IdleTimeout: idle})
	})
	for _, path := range []string{"/ws", "/idle"} {
		conn, err := net.Dial("tcp", g.addr())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 101 || resp.Header.Get("Upgrade") != "echo" || resp.Header.Get("X-Attempts") != "1" {
			t.Fatalf("%s: answer %d %v; want 101 with Upgrade: echo and x-Attempts 1", path, resp.StatusCode, resp.Header)
		}
		for _, msg := range []string{"ping\n", "pong pong\n"} {
			io.WriteString(conn, msg)
			got, err := br.ReadString('\n')
			if err != nil || got != msg {
				t.Fatalf("%s: tunnel echoed %q, %v; want %q", path, got, err, msg)
			}
		}
		if path == "/idle" {
			start := time.Now()
			_, err := br.ReadByte()
			if took := time.Since(start); err == nil || took > idle+answerSlack {
				t.Errorf("silent tunnel: read gave %v after %v; want it closed after about %v", err, took, idle)
			}
		}
	}
}

// TestUnaskedSwitchRefused: a 101 the client did not ask for is not
// relayed as a dead connection: 502.
func TestUnaskedSwitchRefused(t *testing.T) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeRaw(t, w, switchEcho, func(_ net.Conn, brw *bufio.ReadWriter) {
			io.Copy(io.Discard, brw)
		})
	}))
	defer be.Close()
	g := startGW(t, be.URL, nil)
	resp, body := rawRequest(t, g.addr(), "GET /plain HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n")
	if resp.StatusCode != 502 || errorCode(t, body) != "BackendUnavailable" || !strings.Contains(string(body), "echo") {
		t.Errorf("unasked 101: %d %s; want 502 BackendUnavailable naming the protocol", resp.StatusCode, body)
	}
}

// TestUpgradeRefused: a host that cannot hold a connection refuses an
// upgrade request with 501 UpgradeUnsupported, without reaching a backend.
func TestUpgradeRefused(t *testing.T) {
	var calls atomic.Int64
	be := echoUpgrade(t, &calls)
	defer be.Close()
	g := startGW(t, be.URL, func(h *Handler) { h.Host = core.HostCaps{Name: "lambda"} })
	resp, body := rawRequest(t, g.addr(), "GET /ws HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	if resp.StatusCode != 501 || errorCode(t, body) != "UpgradeUnsupported" || !strings.Contains(string(body), "lambda") {
		t.Errorf("upgrade on a host without upgrades = %d %s; want 501 UpgradeUnsupported naming the host", resp.StatusCode, body)
	}
	if calls.Load() != 0 {
		t.Error("a refused upgrade reached the backend")
	}
}

// TestSlowUpload408: a buffered body that stalls past ClientBodyTimeoutMs,
// or is still arriving at the TTL, is answered 408 RequestTimeout with
// Connection: close, and never reaches the backend.
func TestSlowUpload408(t *testing.T) {
	var calls atomic.Int64
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) }))
	defer be.Close()
	tests := []struct {
		name  string
		stall time.Duration // ClientBodyTimeoutMs
		ttl   string
		every time.Duration // a byte this often; 0: stall after the first
		want  time.Duration
		msg   string
	}{
		{"stalled", 300 * time.Millisecond, "", 0, 300 * time.Millisecond, "ClientBodyTimeoutMs"},
		// The stall limit is far above the trickle's gap, so however
		// loaded the machine, the TTL ends it first.
		{"trickling past the TTL", 10 * time.Second, "1", 100 * time.Millisecond, time.Second, "TTL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := startGW(t, be.URL, func(h *Handler) { h.Settings.ClientBodyTimeoutMs = settings.Millis(tt.stall) })
			conn, err := net.Dial("tcp", g.addr())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(20 * time.Second))
			head := "POST /up HTTP/1.1\r\nHost: gw\r\nContent-Length: 1000\r\n"
			if tt.ttl != "" {
				head += "S7PTTL: " + tt.ttl + "\r\n"
			}
			start := time.Now()
			io.WriteString(conn, head+"\r\nx")
			stop := make(chan struct{})
			defer close(stop)
			if tt.every > 0 {
				go testutil.Trickle(conn, tt.every, 100, stop)
			}
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			took := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			if _, err := br.ReadByte(); err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("after the 408 the connection gave %v; want it closed (EOF)", err)
			}
			if resp.StatusCode != 408 || errorCode(t, body) != "RequestTimeout" || !resp.Close {
				t.Errorf("answer %d %s (close %v); want 408 RequestTimeout and Connection: close", resp.StatusCode, body, resp.Close)
			}
			if !strings.Contains(string(body), tt.msg) {
				t.Errorf("message %s; want it to name %s", body, tt.msg)
			}
			// The message names which limit ended it; the time is only
			// checked for not coming early.
			if took < tt.want-50*time.Millisecond || took > tt.want+answerSlack {
				t.Errorf("408 after %v; want after %v", took, tt.want)
			}
			if got := g.h.Stats.EndRequestTimeout.Load(); got != 1 {
				t.Errorf("end_request_timeout = %d; want 1", got)
			}
		})
	}
	if calls.Load() != 0 {
		t.Error("a body that never arrived reached the backend")
	}
}

// TestBodyLimits: MaxRetryBodyBytes at the int64 maximum keeps bodies (it
// used to overflow and drop them); a body that does not fit the
// MaxBufferedBytes budget streams whole to a single attempt; one that fits
// is retried; the budget is given back.
func TestBodyLimits(t *testing.T) {
	var first atomic.Bool
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/flaky" && first.CompareAndSwap(false, true) {
			w.WriteHeader(503)
			return
		}
		fmt.Fprintf(w, "%d:%x", len(b), sha256.Sum256(b))
	}))
	defer be.Close()
	body := strings.Repeat("0123456789", 100) // 1000 bytes
	want := fmt.Sprintf("%d:%x", len(body), sha256.Sum256([]byte(body)))
	tests := []struct {
		name      string
		maxRetry  int64
		maxBuffer int64
		chunked   bool
		path      string
		status    int
	}{
		{"max retry at int64 max", math.MaxInt64, 1 << 20, false, "/", 200},
		{"max retry at int64 max, chunked", math.MaxInt64, 1 << 20, true, "/", 200},
		{"over the budget streams", 1 << 20, 100, false, "/", 200},
		{"over the budget streams, chunked", 1 << 20, 100, true, "/", 200},
		{"over the retry limit, chunked", 999, 1 << 20, true, "/", 200},
		{"at the retry limit, chunked", 1000, 1 << 20, true, "/", 200},
		{"fits: retried", 1 << 20, 1 << 20, false, "/flaky", 200},
		{"does not fit: one attempt", 1 << 20, 100, false, "/flaky", 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first.Store(false)
			g := startGW(t, be.URL+","+be.URL, func(h *Handler) {
				h.Settings.MaxRetryBodyBytes = settings.Count(tt.maxRetry)
				h.Settings.MaxBufferedBytes = settings.Count(tt.maxBuffer)
			})
			var rb io.Reader = strings.NewReader(body)
			if tt.chunked {
				rb = io.MultiReader(rb) // hides the length: sent chunked
			}
			req, _ := http.NewRequest("PUT", g.srv.URL+tt.path, rb)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status || tt.status == 200 && string(got) != want {
				t.Errorf("answer %d %q; want %d with the whole body (%s)", resp.StatusCode, got, tt.status, want)
			}
			if n := g.h.bodies.InUse(); n != 0 {
				t.Errorf("%d bytes of the buffer budget still taken after the request", n)
			}
		})
	}
}

// failingStore is a Store whose reads fail with a message naming a path.
type failingStore struct{ async.Store }

func (failingStore) Get(context.Context, string) ([]byte, string, error) {
	return nil, "", errors.New("open /srv/secret/store/objects/gateway/x.json: permission denied")
}

// TestStatus503HidesStore: a store failure behind a status URI is a
// generic 503 for the client; the detail goes to the log.
func TestStatus503HidesStore(t *testing.T) {
	g := startGW(t, "http://127.0.0.1:1", func(h *Handler) { h.Async = &async.Async{Store: failingStore{}} })
	resp, err := http.Get(g.srv.URL + "/_gateway/async/0123456789abcdef0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || errorCode(t, body) != "AsyncUnavailable" || strings.Contains(string(body), "/srv/secret") {
		t.Errorf("answer %d %s; want 503 AsyncUnavailable without the store's path", resp.StatusCode, body)
	}
	waitLog(t, g.log, "/srv/secret/store")
}

// TestNilStats: a handler without Stats serves requests.
func TestNilStats(t *testing.T) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer be.Close()
	g := startGW(t, be.URL, func(h *Handler) { h.Stats, h.Forwarder.Stats = nil, nil })
	for _, p := range []string{"/x", "/_gateway/stats", "/../x"} {
		resp, err := http.Get(g.srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Errorf("GET %s = %d with nil Stats", p, resp.StatusCode)
		}
	}
}

// TestStreamedUploadStalled: a body too large to buffer streams to the
// backend; when it stalls past ClientBodyTimeoutMs the client gets 408
// RequestTimeout and the connection is closed.
func TestStreamedUploadStalled(t *testing.T) {
	got := make(chan int64, 1)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		got <- n
	}))
	defer be.Close()
	g := startGW(t, be.URL, func(h *Handler) {
		h.Settings.ClientBodyTimeoutMs = settings.Millis(300 * time.Millisecond)
		h.Settings.MaxRetryBodyBytes = 10
	})
	conn, err := net.Dial("tcp", g.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	io.WriteString(conn, "POST /up HTTP/1.1\r\nHost: gw\r\nContent-Length: 1000\r\n\r\n"+strings.Repeat("y", 100))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 408 || errorCode(t, body) != "RequestTimeout" || !resp.Close {
		t.Errorf("answer %d %s (close %v); want 408 RequestTimeout and Connection: close", resp.StatusCode, body, resp.Close)
	}
	if took < 250*time.Millisecond || took > 300*time.Millisecond+answerSlack {
		t.Errorf("408 after %v; want after 300 ms, ClientBodyTimeoutMs", took)
	}
	if _, err := br.ReadByte(); err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("after the 408 the connection gave %v; want it closed (EOF)", err)
	}
	select {
	case n := <-got:
		if n >= 1000 {
			t.Errorf("the backend got %d bytes of a body that never arrived whole", n)
		}
	case <-time.After(5 * time.Second):
		t.Error("the backend's request was not ended")
	}
}

// TestBodyDeadlineEndsWithUpload: once a body has arrived, a backend
// slower than ClientBodyTimeoutMs is no upload stall.
func TestBodyDeadlineEndsWithUpload(t *testing.T) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		select {
		case <-time.After(600 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		w.Write(b)
	}))
	defer be.Close()
	g := startGW(t, be.URL, func(h *Handler) { h.Settings.ClientBodyTimeoutMs = settings.Millis(200 * time.Millisecond) })
	for _, chunked := range []bool{false, true} {
		var rb io.Reader = strings.NewReader("hello")
		if chunked {
			rb = io.MultiReader(rb)
		}
		resp, err := http.Post(g.srv.URL+"/slow", "text/plain", rb)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "hello" {
			t.Errorf("chunked %v: %d %q; want 200 hello after the slow backend", chunked, resp.StatusCode, body)
		}
	}
}

// switchEcho is a backend's 101 to the "echo" protocol.
const switchEcho = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n"

// writeRaw takes w's connection over, writes head to it as it is, then runs
// then (if set) on the connection before closing it.
func writeRaw(t *testing.T, w http.ResponseWriter, head string, then func(net.Conn, *bufio.ReadWriter)) {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Error(err)
		return
	}
	defer conn.Close()
	brw.WriteString(head)
	brw.Flush()
	if then != nil {
		then(conn, brw)
	}
}

// heldLog is a log handler whose Handle waits until release is closed (or
// a failure bound passes, so a broken gateway fails instead of hanging).
type heldLog struct {
	slog.Handler
	release chan struct{}
	expired atomic.Bool
}

func (h *heldLog) Handle(ctx context.Context, r slog.Record) error {
	select {
	case <-h.release:
	case <-time.After(30 * time.Second):
		h.expired.Store(true)
	}
	return h.Handler.Handle(ctx, r)
}

// TestAnswerBeforeLogLine: an answer framed by its Content-Length reaches
// the client whole while the request's log line is still being written.
func TestAnswerBeforeLogLine(t *testing.T) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "5")
		io.WriteString(w, "hello")
	}))
	defer be.Close()
	held := &heldLog{Handler: slog.NewJSONHandler(io.Discard, nil), release: make(chan struct{})}
	g := startGW(t, be.URL, func(h *Handler) { h.Logger = slog.New(held) })
	defer close(held.release)
	resp, err := http.Get(g.srv.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(body) != "hello" || held.expired.Load() {
		t.Fatalf("answer %q, %v; log line held until the answer went: %v", body, err, held.expired.Load())
	}
}

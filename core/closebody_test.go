package core

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"fngateway/internal/testutil"
)

// lagConn is a backend connection whose first Close takes an hour of the
// bubble's fake time to take effect: it stands for net/http's transport
// goroutine, which closes an abandoned connection after Body.Close has
// returned, not having finished when Lambda freezes the process. Any
// later Close fails at once, as a *net.TCPConn's does while another Close
// is under way. closed is set once the connection is really closed.
type lagConn struct {
	net.Conn
	calls  atomic.Int32
	closed atomic.Bool
}

func (c *lagConn) Close() error {
	if c.calls.Add(1) > 1 {
		return net.ErrClosed
	}
	time.Sleep(time.Hour)
	err := c.Conn.Close()
	c.closed.Store(true)
	return err
}

// pipeBackend is a backend on in-memory connections: every dial is a new
// net.Pipe served by a goroutine of the bubble. Path /big answers a 1 MiB
// body with status (the path's query) and writes it until the connection
// closes; /empty answers 204, a HEAD the head of "ok", and any other path
// "ok", keeping the connection alive.
type pipeBackend struct {
	mu    sync.Mutex
	conns []*lagConn
}

func (b *pipeBackend) dial(context.Context, string, string) (net.Conn, error) {
	srv, cli := net.Pipe()
	c := &lagConn{Conn: cli}
	b.mu.Lock()
	b.conns = append(b.conns, c)
	b.mu.Unlock()
	go b.serve(srv)
	return c, nil
}

func (b *pipeBackend) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		r, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, r.Body)
		switch {
		case r.Method == http.MethodHead:
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n")
			continue
		case r.URL.Path == "/empty":
			io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
			continue
		case r.URL.Path != "/big":
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			continue
		}
		io.WriteString(c, "HTTP/1.1 "+r.URL.RawQuery+" X\r\nContent-Length: 1048576\r\n\r\n")
		chunk := make([]byte, 32<<10)
		for {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	}
}

func (b *pipeBackend) dialed() []*lagConn {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.conns)
}

// forwardPipe forwards method path to a pipeBackend through tr.
func forwardPipe(t *testing.T, tr http.RoundTripper, method, path string, attempts int) *Result {
	t.Helper()
	now := time.Now()
	p, q, _ := strings.Cut(path, "?")
	res, err := (&Forwarder{Transport: tr}).Forward(t.Context(), &Request{Method: method, Path: p, RawQuery: q, Header: http.Header{},
		Route: &Route{Hosts: testutil.Hosts(t, "backend"), MaxAttempts: attempts},
		// Time beyond a lagging Close (an hour), which the gateway waits for.
		Budget: Budget{Arrival: now, TTL: now.Add(3 * time.Hour), Timeout: 3 * time.Hour}})
	if err != nil {
		t.Fatalf("Forward %s: %v", path, err)
	}
	return res
}

// pipeTest runs f in a synctest bubble with a pipeBackend and a
// NewTransport that dials it. Afterwards it closes the idle connections
// and lets every lagging Close end, so that no goroutine outlives the
// bubble.
func pipeTest(t *testing.T, f func(t *testing.T, b *pipeBackend, tr *http.Transport)) {
	synctest.Test(t, func(t *testing.T) {
		b := &pipeBackend{}
		tr := NewTransport()
		tr.DialContext = recordingDial(b.dial)
		defer func() { // also after a t.Fatal in f
			tr.CloseIdleConnections()
			time.Sleep(4 * time.Hour)
			synctest.Wait()
		}()
		f(t, b, tr)
	})
}

// TestHeadConnCloseWaits: a Close that comes while another is under way
// returns only once the connection is closed.
func TestHeadConnCloseWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, cli := net.Pipe()
		lc := &lagConn{Conn: cli}
		hc := newHeadConn(lc)
		go hc.Close() // the transport's close, lagging
		synctest.Wait()
		hc.Close()
		if !lc.closed.Load() {
			t.Error("Close returned while the connection was still open")
		}
		time.Sleep(2 * time.Hour) // the lagging Close ends either way
	})
}

// TestEarlyCloseClosesConnection: an answer the gateway stops reading
// before its end (the answer cap, a cut stream, an answer it retries)
// has its backend connection closed by the time Body.Close returns, not
// later from the transport's goroutine: a Lambda process frozen in
// between would leave the backend's work running (docs/deadlines.md#deadlines-and-retries). A body
// read to its end leaves its connection open for the next request.
func TestEarlyCloseClosesConnection(t *testing.T) {
	t.Run("delivered body closed early", func(t *testing.T) {
		pipeTest(t, func(t *testing.T, b *pipeBackend, tr *http.Transport) {
			res := forwardPipe(t, tr, "GET", "/big?200", 1)
			if _, err := io.ReadFull(res.Response.Body, make([]byte, 64<<10)); err != nil {
				t.Fatal(err)
			}
			res.Response.Body.Close()
			if c := b.dialed(); len(c) != 1 || !c[0].closed.Load() {
				t.Errorf("the backend connection is open when Body.Close returns; want it closed")
			}
		})
	})
	t.Run("retried answer left unread", func(t *testing.T) {
		pipeTest(t, func(t *testing.T, b *pipeBackend, tr *http.Transport) {
			res := forwardPipe(t, tr, "GET", "/big?503", 2)
			res.Response.Body.Close()
			c := b.dialed()
			if len(c) != 2 {
				t.Fatalf("%d connections; want 2, one per attempt", len(c))
			}
			if !c[0].closed.Load() {
				t.Errorf("the first attempt's connection, its 503 left unread, is open when the second attempt is answered; want it closed")
			}
		})
	})
	// The transport reuses these connections: none is the gateway's to
	// close. An answer without a body goes back to the pool with its
	// head, even when its (empty) body is closed unread.
	for _, tt := range []struct {
		name, method, path string
		read               bool
	}{
		{"body read to its end", "GET", "/small", true},
		{"no body, closed unread", "GET", "/empty", false},
		{"HEAD, closed unread", "HEAD", "/small", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pipeTest(t, func(t *testing.T, b *pipeBackend, tr *http.Transport) {
				for range 2 {
					res := forwardPipe(t, tr, tt.method, tt.path, 1)
					if tt.read {
						if body, err := io.ReadAll(res.Response.Body); err != nil || string(body) != "ok" {
							t.Fatalf("body %q, %v; want ok", body, err)
						}
					}
					res.Response.Body.Close()
				}
				if c := b.dialed(); len(c) != 1 {
					t.Errorf("%d connections; want one, reused", len(c))
				} else if n := c[0].calls.Load(); n != 0 {
					t.Errorf("the connection was closed %d times; want it open, for the next request", n)
				}
			})
		})
	}
}

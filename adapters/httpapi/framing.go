package httpapi

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"sync/atomic"
)

// net/http reads a request that carries both Content-Length and
// Transfer-Encoding by its Transfer-Encoding and deletes the
// Content-Length before the handler sees it. RFC 9112 §6.3 asks a server
// that accepts such a request to close the connection after answering it,
// since the two framings are how requests are smuggled. framingConn
// watches the bytes a client sends for a header block holding both, so
// the handler can close the connection (closeIfBothFramings).

// framingKey is the context key of a connection's *framingConn.
type framingKey struct{}

// framingListener wraps every accepted connection in a framingConn.
type framingListener struct{ net.Listener }

func (l framingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &framingConn{Conn: c}, nil
}

// framingConn is a client connection that notices a header block with
// both Content-Length and Transfer-Encoding. It looks only at the first
// bytes of each line; a body that happens to hold such a block only makes
// the connection close early, which is always safe.
type framingConn struct {
	net.Conn
	both atomic.Bool // a header block with both framings was read

	// Read by the server's one reading goroutine at a time.
	start  [len("transfer-encoding:")]byte // the start of the current line
	n      int                             // bytes of start filled; len+1 once the line is longer
	cl, te bool                            // the current block's framing lines
}

func (c *framingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.scan(p[:n])
	}
	return n, err
}

func (c *framingConn) scan(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		line := b
		if i >= 0 {
			line = b[:i]
		}
		if c.n < len(c.start) {
			c.n += copy(c.start[c.n:], line)
		}
		if i < 0 {
			return
		}
		b = b[i+1:]
		head := c.start[:c.n]
		switch {
		case len(head) == 0 || len(head) == 1 && head[0] == '\r':
			if c.cl && c.te {
				c.both.Store(true)
			}
			c.cl, c.te = false, false
		case hasFold(head, "content-length:"):
			c.cl = true
		case hasFold(head, "transfer-encoding:"):
			c.te = true
		}
		c.n = 0
	}
}

func hasFold(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && bytes.EqualFold(b[:len(prefix)], []byte(prefix))
}

// withFraming makes srv serve ln's connections as framingConns, each in
// its requests' context.
func withFraming(srv *http.Server, ln net.Listener) net.Listener {
	prev := srv.ConnContext
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if prev != nil {
			ctx = prev(ctx, c)
		}
		if fc, ok := c.(*framingConn); ok {
			ctx = context.WithValue(ctx, framingKey{}, fc)
		}
		return ctx
	}
	return framingListener{ln}
}

// closeIfBothFramings marks the answer Connection: close when r's
// connection carried a request with both Content-Length and
// Transfer-Encoding.
func closeIfBothFramings(w http.ResponseWriter, r *http.Request) {
	if r.TransferEncoding == nil {
		return // only a request framed by Transfer-Encoding can have had both
	}
	if fc, ok := r.Context().Value(framingKey{}).(*framingConn); ok && fc.both.Load() {
		w.Header().Set("Connection", "close")
	}
}

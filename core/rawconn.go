package core

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
)

// viaPseudonym names the gateway in the Via header it adds both ways
// (RFC 9110 §7.6.3).
const viaPseudonym = "fngateway"

// viaSelf is the gateway's own Via entry.
const viaSelf = "1.1 " + viaPseudonym

// viaValue is the Via value of a message no earlier hop wrote one on,
// shared by every response (net/http only reads header values); a full
// slice, so an append copies it.
var viaValue = []string{viaSelf}

// addVia returns the Via header value that keeps the earlier hops prior
// and adds the gateway.
func addVia(prior []string) string {
	if len(prior) == 0 {
		return viaSelf
	}
	return strings.Join(prior, ", ") + ", " + viaSelf
}

// AddViaHeader adds the gateway to the Via header of h, keeping what
// earlier hops wrote.
func AddViaHeader(h http.Header) {
	if prior := h["Via"]; len(prior) > 0 {
		h["Via"] = []string{addVia(prior)}
		return
	}
	h["Via"] = viaValue
}

// connTrace is the connection an attempt got, and the trace that tells
// it (and passes 1xx answers on).
type connTrace struct {
	trace httptrace.ClientTrace
	conn  *headConn
	got   atomic.Bool // a connection was had: the attempt is past its connect phase
}

func (ct *connTrace) gotConn(i httptrace.GotConnInfo) {
	ct.got.Store(true)
	ct.conn, _ = i.Conn.(*headConn)
}

// trace returns ctx with the attempt's one client trace: it records
// whether the attempt got a connection (its phase, for the log) and, when
// rt records response heads, which one, and it passes 1xx answers to
// req.Informational.
func (ar *attemptResult) trace(ctx context.Context, rt http.RoundTripper, req *Request) context.Context {
	ct := &ar.ct
	ct.trace.GotConn = ct.gotConn // one closure: gotConn keeps a *headConn only where rt records heads
	ct.trace.Got1xxResponse = req.Informational
	ar.conn = ct
	return httptrace.WithClientTrace(ctx, &ct.trace)
}

// phase is how far the attempt got before it ended without an answer.
func (ar *attemptResult) phase() Phase {
	if ar.conn != nil && ar.conn.got.Load() {
		return PhaseHeaders
	}
	return PhaseConnect
}

// stripRawConnection deletes from resp the headers its Connection header
// named as the backend sent it. net/http's transport drops a Connection
// header that contains "close" before anyone reads it, and with it the
// names it listed ("Connection: X-Secret, close"); the connection recorded
// them as they arrived.
func (ar *attemptResult) stripRawConnection(resp *http.Response) {
	if ar.conn == nil || ar.conn.conn == nil || resp.ProtoMajor != 1 {
		return
	}
	c := ar.conn.conn
	if named := c.connectionValues(); len(named) > 0 {
		removeConnectionNamed(resp.Header, named)
	}
}

// headConn is a backend connection that records the Connection header
// values of the response heads it reads, as they were on the wire. It
// watches only between a request it wrote and the end of the final
// response head after it, so bodies pass unscanned.
type headConn struct {
	net.Conn

	mu      sync.Mutex
	armed   bool     // a request was written; its response head is awaited
	line    []byte   // the start of the line being read (at most maxHeadLine)
	long    bool     // ... and the line was longer
	inHead  bool     // a status line was read
	status1 bool     // ... and it was a 1xx
	cur     []string // Connection values of the head being read
	last    []string // Connection values of the latest final head

	closing  atomic.Bool
	closed   chan struct{} // closed once Conn is
	closeErr error
}

func newHeadConn(c net.Conn) *headConn { return &headConn{Conn: c, closed: make(chan struct{})} }

// Close closes the connection once, and returns only when it is closed,
// whoever started it. net.Conn's own Close returns at once, with an error,
// while another goroutine's Close is under way: the gateway's close of an
// abandoned answer's connection (closeBody) must not return before the
// transport's, which it may race, has closed it.
func (c *headConn) Close() error {
	if c.closing.CompareAndSwap(false, true) {
		c.closeErr = c.Conn.Close()
		close(c.closed)
	}
	<-c.closed
	return c.closeErr
}

// maxHeadLine bounds what is kept of one head line.
const maxHeadLine = 4 << 10

func (c *headConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.armed = true
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *headConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		if c.armed {
			c.scan(p[:n])
		}
		c.mu.Unlock()
	}
	return n, err
}

// scan follows the response head in b, line by line.
func (c *headConn) scan(b []byte) {
	for len(b) > 0 && c.armed {
		i := bytes.IndexByte(b, '\n')
		chunk := b
		if i >= 0 {
			chunk = b[:i]
		}
		if room := maxHeadLine - len(c.line); room > 0 {
			c.line = append(c.line, chunk[:min(len(chunk), room)]...)
		}
		if len(chunk) > maxHeadLine-len(c.line) {
			c.long = true
		}
		if i < 0 {
			return
		}
		b = b[i+1:]
		c.endLine(bytes.TrimSuffix(c.line, []byte("\r")))
		c.line, c.long = c.line[:0], false
	}
}

// endLine reads one line of a response head; only a Connection value is
// copied out of it.
func (c *headConn) endLine(l []byte) {
	switch {
	case !c.inHead:
		if bytes.HasPrefix(l, []byte("HTTP/1.")) {
			c.inHead, c.cur = true, nil
			c.status1 = len(l) > len("HTTP/1.1 1") && l[len("HTTP/1.1 ")] == '1'
		}
	case len(l) == 0:
		c.inHead = false
		if !c.status1 {
			c.last, c.armed = c.cur, false
		}
	default:
		if name, v, ok := bytes.Cut(l, []byte(":")); ok && bytes.EqualFold(name, []byte("Connection")) {
			c.cur = append(c.cur, string(bytes.TrimSpace(v)))
		}
	}
}

// connectionValues returns the Connection values of the latest final
// response head read.
func (c *headConn) connectionValues() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// dialFunc is net.Dialer's DialContext.
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// recordingDial wraps every connection dial makes in a headConn.
func recordingDial(dial dialFunc) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return newHeadConn(c), nil
	}
}

// recordingTLSDial dials TLS as t would, and wraps an HTTP/1.1
// connection in a headConn; an HTTP/2 one (no Connection header exists
// there) is handed back as the *tls.Conn the transport needs to speak h2.
func recordingTLSDial(t *http.Transport) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		raw, err := t.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if hc, ok := raw.(*headConn); ok {
			raw = hc.Conn
		}
		var cfg *tls.Config
		if t.TLSClientConfig != nil {
			cfg = t.TLSClientConfig.Clone()
		} else {
			cfg = &tls.Config{}
		}
		if cfg.ServerName == "" {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				host = addr
			}
			cfg.ServerName = host
		}
		if len(cfg.NextProtos) == 0 {
			cfg.NextProtos = []string{"h2", "http/1.1"}
			if !t.ForceAttemptHTTP2 {
				cfg.NextProtos = []string{"http/1.1"}
			}
		}
		tc := tls.Client(raw, cfg)
		hctx := ctx
		if t.TLSHandshakeTimeout > 0 {
			var cancel context.CancelFunc
			hctx, cancel = context.WithTimeout(ctx, t.TLSHandshakeTimeout)
			defer cancel()
		}
		if err := tc.HandshakeContext(hctx); err != nil {
			raw.Close()
			return nil, err
		}
		if tc.ConnectionState().NegotiatedProtocol == "h2" {
			return tc, nil
		}
		return newHeadConn(tc), nil
	}
}

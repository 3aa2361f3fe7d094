package httpapi

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"fngateway/core"
)

// bodyReader reads a request body under the upload deadlines: at most
// ClientBodyTimeoutMs of silence between two reads, and the TTL as a
// whole, whether the body is buffered or streams to the backend. It sets the connection's read deadline before
// each read (http.ResponseController); on a host whose connections have no
// read deadline (the platform buffered the body already) it reads plainly.
// A nil *bodyReader is a request without body.
type bodyReader struct {
	src   io.Reader
	rc    *http.ResponseController
	idle  time.Duration
	end   time.Time // the TTL
	h     *Handler
	taken int64 // bytes of the MaxBufferedBytes budget held

	mu       sync.Mutex
	set      bool  // a read deadline is set on the connection
	noDL     bool  // the connection has no read deadline
	finished bool  // the handler returned: never touch the connection again
	timeout  bool  // a read ran past a deadline
	ttlHit   bool  // ... and that deadline was the TTL
	streamed bool  // the body streams to the backend
	eof      bool  // the body was read to its end
	bad      error // the body's framing is malformed (bad chunked encoding)
}

// errBodyFinished is returned by reads of a body whose request is over.
var errBodyFinished = errors.New("request body read after its request ended")

func (b *bodyReader) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.finished {
		b.mu.Unlock()
		return 0, errBodyFinished
	}
	ttl := false
	if !b.noDL {
		var dl time.Time
		if b.idle > 0 {
			dl = time.Now().Add(b.idle)
		}
		if !b.end.IsZero() && (dl.IsZero() || b.end.Before(dl)) {
			dl, ttl = b.end, true
		}
		if !dl.IsZero() {
			if err := b.rc.SetReadDeadline(dl); err != nil {
				b.noDL = true
			} else {
				b.set = true
			}
		}
	}
	b.mu.Unlock()
	n, err := b.src.Read(p)
	if err != nil {
		b.mu.Lock()
		switch {
		case err == io.EOF:
			b.eof = true
		case errors.Is(err, os.ErrDeadlineExceeded):
			b.timeout, b.ttlHit = true, ttl
		case malformed(err) && !b.finished:
			b.bad = err
		}
		b.clearLocked()
		b.mu.Unlock()
	}
	return n, err
}

// malformed reports whether a request body read failed on the body's
// framing (net/http's chunked reader: a bad size, an overflow, a missing
// CRLF) rather than on the connection: a client that went away shows as
// an unexpected EOF or a network error, and a read after the request
// ended as errBodyFinished.
func malformed(err error) bool {
	var ne net.Error
	return !errors.Is(err, io.ErrUnexpectedEOF) && !errors.As(err, &ne) && !errors.Is(err, net.ErrClosed) &&
		!errors.Is(err, errBodyFinished) && !errors.Is(err, http.ErrBodyReadAfterClose)
}

// clearLocked lifts the read deadline once the body is read, except after
// a timeout: then the deadline stays past, so that the server, which tries
// to drain an unread body after the handler, gives up at once and closes
// the connection instead of waiting on a trickling client.
func (b *bodyReader) clearLocked() {
	if b.set && !b.finished && !b.timeout && b.bad == nil {
		b.rc.SetReadDeadline(time.Time{})
		b.set = false
	}
}

// timedOut reports whether a read ran past a deadline.
func (b *bodyReader) timedOut() bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.timeout
}

func (b *bodyReader) timeoutMessage() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ttlHit {
		return "the request body did not arrive before the TTL ran out"
	}
	return "the request body stalled: no byte for " + strconv.FormatInt(b.idle.Milliseconds(), 10) + " ms (ClientBodyTimeoutMs)"
}

// done ends the body's life: its read deadline is cleared, later reads
// fail, and its share of the buffer budget is given back. A streamed body
// not read to its end gets a read deadline in the past instead, so that a
// read still pending in the transport ends now and the server closes the
// connection rather than wait on the client.
func (b *bodyReader) done() {
	if b == nil {
		return
	}
	b.mu.Lock()
	if b.streamed && !b.eof && !b.noDL {
		if b.rc.SetReadDeadline(time.Unix(1, 0)) == nil {
			b.set = true
		}
		b.finished = true // keeps the deadline: clearLocked leaves it
	}
	b.clearLocked()
	b.finished = true
	taken := b.taken
	b.taken = 0
	b.mu.Unlock()
	b.h.bodies.Release(taken)
}

// readBody buffers the request body for retries when it fits both
// MaxRetryBodyBytes and the process-wide MaxBufferedBytes budget (a known
// Content-Length is allocated once, at its size); a body that does not fit
// streams to a single attempt. A buffered body that misses the TTL, or any
// body silent for ClientBodyTimeoutMs, ends the request with 408.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request, req *core.Request, budget core.Budget) (*bodyReader, *core.Error) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil, nil
	}
	limit := int64(h.Settings.MaxRetryBodyBytes)
	b := &bodyReader{src: r.Body, rc: http.NewResponseController(w), idle: h.Settings.ClientBodyTimeoutMs.D(), h: h}
	b.end, _ = budget.End()
	stream := func(read []byte) (*bodyReader, *core.Error) {
		b.mu.Lock()
		b.streamed = true
		b.mu.Unlock()
		req.Trailer = r.Trailer // filled by net/http as the body ends
		if len(read) > 0 {
			req.BodyStream = io.MultiReader(bytes.NewReader(read), b)
		} else {
			req.BodyStream = b
		}
		return b, nil
	}
	if cl := r.ContentLength; cl > 0 {
		if cl > limit || !h.bodies.Acquire(cl) {
			return stream(nil)
		}
		b.taken = cl
		// The buffer grows as bytes arrive, up to cl: a client's
		// Content-Length alone never sizes an allocation.
		buf := make([]byte, 0, min(cl, 32<<10))
		for int64(len(buf)) < cl {
			if len(buf) == cap(buf) {
				nb := make([]byte, len(buf), min(2*int64(cap(buf)), cl))
				copy(nb, buf)
				buf = nb
			}
			n, err := b.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
			if err == io.EOF && int64(len(buf)) < cl {
				err = io.ErrUnexpectedEOF
			}
			if err != nil && err != io.EOF {
				return b, b.readError(err)
			}
		}
		b.clear() // read whole: no deadline may outlive the upload
		req.Body = buf
		keepTrailer(req, r)
		return b, nil
	}
	// Unknown length (chunked): grow under both limits as bytes arrive.
	var buf []byte
	for {
		if len(buf) == cap(buf) {
			if int64(cap(buf)) >= limit {
				// Full at the limit: buffered only if nothing follows.
				var one [1]byte
				n, err := io.ReadFull(b, one[:])
				if err == io.EOF {
					break
				}
				if err != nil {
					return b, b.readError(err)
				}
				return stream(append(buf, one[:n]...))
			}
			grow := min(max(int64(cap(buf)), 32<<10), limit-int64(cap(buf)))
			if !h.bodies.Acquire(grow) {
				return stream(buf)
			}
			b.mu.Lock()
			b.taken += grow
			b.mu.Unlock()
			nb := make([]byte, len(buf), int64(cap(buf))+grow)
			copy(nb, buf)
			buf = nb
		}
		n, err := b.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return b, b.readError(err)
		}
	}
	b.clear()
	req.Body = buf
	keepTrailer(req, r)
	return b, nil
}

// keepTrailer passes the trailers of a buffered chunked body on: they
// arrived with its end.
func keepTrailer(req *core.Request, r *http.Request) {
	if len(r.Trailer) > 0 {
		req.Trailer = r.Trailer
	}
}

// clear lifts the read deadline.
func (b *bodyReader) clear() {
	b.mu.Lock()
	b.clearLocked()
	b.mu.Unlock()
}

// readError classifies a failed read of a buffered body.
func (b *bodyReader) readError(err error) *core.Error {
	if b.timedOut() {
		return &core.Error{Reason: core.ReasonRequestTimeout, Message: b.timeoutMessage(), Err: err}
	}
	if malformed(err) {
		return &core.Error{Reason: core.ReasonInvalidBody, Message: "the request body is malformed: " + err.Error(), Err: err}
	}
	return &core.Error{Reason: core.ReasonClientGone, Message: "reading the request body: " + err.Error(), Err: err}
}

// streamError says what a failed forward of a streamed body was the
// client's doing: a body that stalled past ClientBodyTimeoutMs or had not
// arrived whole when the TTL ran out (408), or whose framing is malformed
// (400). It returns nil when the body is not to blame.
func (b *bodyReader) streamError(ge *core.Error) *core.Error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	timeout, bad, cut := b.timeout, b.bad, b.streamed && !b.eof && ge.Reason == core.ReasonTTLExpired
	b.mu.Unlock()
	switch {
	case timeout:
		return &core.Error{Reason: core.ReasonRequestTimeout, Message: b.timeoutMessage(), Attempts: ge.Attempts}
	case bad != nil:
		return &core.Error{Reason: core.ReasonInvalidBody, Message: "the request body is malformed: " + bad.Error(), Attempts: ge.Attempts, Err: bad}
	case cut:
		return &core.Error{Reason: core.ReasonRequestTimeout, Message: "the request body did not arrive before the TTL ran out", Attempts: ge.Attempts}
	}
	return nil
}

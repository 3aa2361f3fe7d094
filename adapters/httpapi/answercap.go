package httpapi

import (
	"errors"
	"net/http"
	"strconv"
	"sync"

	"fngateway/core"
)

// responseLimit is the limit r's answer must fit: the one its host set
// on the request (core.WithResponseLimit), else the host's own.
func (h *Handler) responseLimit(r *http.Request) core.ResponseLimit {
	if l, ok := core.ResponseLimitOf(r.Context()); ok {
		return l
	}
	return h.Host.Response
}

// errTooLarge is what answerCap's Write returns once the answer would pass
// the limit; the relay stops reading the backend there.
var errTooLarge = errors.New("the answer passes the host's response limit")

// answerCap is the bounded writer between a backend's answer and a host
// with a response limit. It counts what the answer costs as the host will
// send it (core.PayloadMeter; the body's bytes when the limit states no
// Form). For a host that sends answers whole it holds
// the body, never more than the limit allows, so that an answer that will
// not fit can still be answered 502; for a streaming host it passes each
// write on, and refuses the one that would pass the limit.
type answerCap struct {
	http.ResponseWriter
	limit core.ResponseLimit
	meter core.PayloadMeter
	bytes bodyBytes // the meter when the limit states no Form
	held  heldBody  // the body, for a Whole host
	over  bool
}

func newAnswerCap(w http.ResponseWriter, l core.ResponseLimit) *answerCap {
	c := &answerCap{ResponseWriter: w, limit: l}
	c.meter = &c.bytes
	if l.Form != nil {
		c.meter = l.Form.Meter(w.Header())
	}
	return c
}

// bodyBytes counts an answer's body alone, as it is: the cost of an answer
// under a limit without a Form (core.ResponseLimit).
type bodyBytes int64

func (b *bodyBytes) Write(p []byte) (int, error) { *b += bodyBytes(len(p)); return len(p), nil }
func (b *bodyBytes) Least(more int64) int64      { return int64(*b) + more }
func (b *bodyBytes) Cost() int64                 { return int64(*b) }

// fits reports whether an answer with a body of contentLength bytes (-1:
// unknown) can fit, as far as can be told before its body is read.
func (c *answerCap) fits(contentLength int64) bool {
	return contentLength < 0 || c.meter.Least(contentLength) <= c.limit.MaxBytes
}

// WriteHeader passes the status on at once for a streaming host; for a
// Whole host the status waits for the body (release).
func (c *answerCap) WriteHeader(code int) {
	if !c.limit.Whole {
		c.ResponseWriter.WriteHeader(code)
	}
}

// Write counts p and holds or passes it on; it returns errTooLarge, and
// takes nothing of p, once the answer would cost more than the limit.
func (c *answerCap) Write(p []byte) (int, error) {
	if c.over {
		return 0, errTooLarge
	}
	c.meter.Write(p)
	if c.meter.Least(0) > c.limit.MaxBytes {
		c.over = true
		return 0, errTooLarge
	}
	if c.limit.Whole {
		c.held.write(p)
		return len(p), nil
	}
	return c.ResponseWriter.Write(p)
}

// end counts the answer whose body is complete as the host will send it
// (core.PayloadMeter's Cost, in the encoding the host chooses by the same
// rule): for a Whole host, an answer whose final encoding passes the
// limit is over, though its least cost fit while it arrived (a text body
// whose last rune is cut goes base64).
func (c *answerCap) end() {
	if c.limit.Whole && c.meter.Cost() > c.limit.MaxBytes {
		c.over = true
	}
}

// Flush passes a flush on for a streaming host; a Whole host sends
// nothing before the end anyway.
func (c *answerCap) Flush() {
	if !c.limit.Whole {
		http.NewResponseController(c.ResponseWriter).Flush()
	}
}

// Unwrap lets http.ResponseController reach the host's writer.
func (c *answerCap) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// release sends what a Whole host's answer held: the status, then the
// body, and gives the held chunks back. A host writer that can grow its
// own buffer to the body's size at once (Grow, as bytes.Buffer's) is told
// it first, so that it does not double its way there.
func (c *answerCap) release(code int) {
	if !c.limit.Whole {
		return
	}
	c.ResponseWriter.WriteHeader(code)
	if g, ok := c.ResponseWriter.(interface{ Grow(n int) }); ok {
		g.Grow(c.held.n)
	}
	for _, b := range c.held.chunks {
		c.ResponseWriter.Write(b)
	}
	c.held.free()
}

// drop gives the held chunks back without sending them.
func (c *answerCap) drop() { c.held.free() }

// heldChunk is the size of the chunks a held body is kept in.
const heldChunk = 64 << 10

// heldChunks are the chunks of held bodies, shared by every response: a
// body held to the cap and refused, or sent, leaves no garbage behind.
var heldChunks = sync.Pool{New: func() any { return new([heldChunk]byte) }}

// heldBody is a body held in pooled fixed-size chunks: it grows without
// copying what it holds.
type heldBody struct {
	chunks [][]byte
	n      int
}

func (b *heldBody) write(p []byte) {
	b.n += len(p)
	for len(p) > 0 {
		if k := len(b.chunks); k == 0 || len(b.chunks[k-1]) == heldChunk {
			b.chunks = append(b.chunks, heldChunks.Get().(*[heldChunk]byte)[:0])
		}
		last := &b.chunks[len(b.chunks)-1]
		m := min(len(p), heldChunk-len(*last))
		*last = append(*last, p[:m]...)
		p = p[m:]
	}
}

func (b *heldBody) free() {
	for _, c := range b.chunks {
		heldChunks.Put((*[heldChunk]byte)(c[:heldChunk]))
	}
	*b = heldBody{}
}

// tooLarge is the error for an answer that will not fit the host's limit.
func (h *Handler) tooLarge(c *answerCap, res *core.Result, contentLength int64) *core.Error {
	what := "the backend's answer"
	if contentLength >= 0 {
		what += " (Content-Length " + strconv.FormatInt(contentLength, 10) + ")"
	}
	return &core.Error{
		Reason: core.ReasonResponseTooLarge,
		Message: what + " is larger than this host (" + h.hostName() + ") can send: at most " +
			strconv.FormatInt(c.limit.MaxBytes, 10) + " bytes" + formNote(c.limit.Form),
		Attempts: res.Attempts,
	}
}

func formNote(f core.PayloadForm) string {
	if f != nil {
		return f.Note()
	}
	return ""
}

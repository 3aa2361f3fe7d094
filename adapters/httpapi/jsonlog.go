package httpapi

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"fngateway/core"
)

// NewJSONLogHandler returns a slog.Handler whose output is, byte for byte,
// that of slog.NewJSONHandler(w, nil). Flat records of strings, integers
// and booleans — the per-request line is one — are written by a short
// path into a pooled buffer with one Write; anything else (groups, WithAttrs,
// other kinds) goes to a slog.JSONHandler on the same writer and lock.
func NewJSONLogHandler(w io.Writer) slog.Handler {
	lw := &lockedWriter{w: w}
	return &jsonLogHandler{w: lw, full: slog.NewJSONHandler(lw, nil)}
}

// lockedWriter serialises the Writes of both paths.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

type jsonLogHandler struct {
	w    *lockedWriter
	full slog.Handler
	ids  TraceIDs // nil: no trace ids
}

// TraceIDs returns the trace and span ids of the span in ctx, if there is
// one (ok false otherwise).
type TraceIDs func(ctx context.Context) (trace [16]byte, span [8]byte, ok bool)

// WithTraceIDs returns h, a handler from NewJSONLogHandler, such that every
// line logged with a context that carries a span also carries its
// "trace_id" and "span_id" (lowercase hex), so that a log store correlates
// the line with the trace. For any other handler it returns h and false.
func WithTraceIDs(h slog.Handler, ids TraceIDs) (slog.Handler, bool) {
	jh, ok := h.(*jsonLogHandler)
	if !ok {
		return h, false
	}
	c := *jh
	c.ids = ids
	return &c, true
}

// appendIDs appends the request id (core.RequestIDFrom) and the trace ids
// of ctx, if any.
func (h *jsonLogHandler) appendIDs(ctx context.Context, b []byte) []byte {
	if ctx == nil {
		return b
	}
	if id := core.RequestIDFrom(ctx); id != "" {
		b = append(b, `,"requestId":`...)
		b = appendJSONString(b, id)
	}
	if h.ids == nil {
		return b
	}
	t, s, ok := h.ids(ctx)
	if !ok {
		return b
	}
	b = append(b, `,"trace_id":"`...)
	b = hex.AppendEncode(b, t[:])
	b = append(b, `","span_id":"`...)
	b = hex.AppendEncode(b, s[:])
	return append(b, '"')
}

// idAttrs returns the trace ids of ctx as attributes, for the full path.
func (h *jsonLogHandler) idAttrs(ctx context.Context) []slog.Attr {
	if ctx == nil {
		return nil
	}
	var as []slog.Attr
	if id := core.RequestIDFrom(ctx); id != "" {
		as = append(as, slog.String("requestId", id))
	}
	if h.ids == nil {
		return as
	}
	t, s, ok := h.ids(ctx)
	if !ok {
		return as
	}
	return append(as, slog.String("trace_id", hex.EncodeToString(t[:])), slog.String("span_id", hex.EncodeToString(s[:])))
}

func (h *jsonLogHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *jsonLogHandler) WithAttrs(as []slog.Attr) slog.Handler { return h.full.WithAttrs(as) }

func (h *jsonLogHandler) WithGroup(name string) slog.Handler { return h.full.WithGroup(name) }

// logBufs holds the line buffers of the short path.
var logBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

func (h *jsonLogHandler) Handle(ctx context.Context, r slog.Record) error {
	bp := logBufs.Get().(*[]byte)
	b, ok := appendHead((*bp)[:0], r.Time, r.Level, r.Message)
	if ok {
		r.Attrs(func(a slog.Attr) bool {
			b, ok = appendAttr(b, a)
			return ok
		})
	}
	if !ok {
		logBufs.Put(bp)
		if ids := h.idAttrs(ctx); ids != nil {
			r = r.Clone()
			r.AddAttrs(ids...)
		}
		return h.full.Handle(ctx, r)
	}
	return h.write(bp, h.appendIDs(ctx, b))
}

// handleAttrs is Handle for a record of t, l, msg and as, without building
// one: the per-request line's path.
func (h *jsonLogHandler) handleAttrs(ctx context.Context, t time.Time, l slog.Level, msg string, as []slog.Attr) error {
	bp := logBufs.Get().(*[]byte)
	b, ok := appendHead((*bp)[:0], t, l, msg)
	for i := 0; ok && i < len(as); i++ {
		b, ok = appendAttr(b, as[i])
	}
	if !ok {
		logBufs.Put(bp)
		r := slog.NewRecord(t, l, msg, 0)
		r.AddAttrs(as...)
		r.AddAttrs(h.idAttrs(ctx)...)
		return h.full.Handle(ctx, r)
	}
	return h.write(bp, h.appendIDs(ctx, b))
}

// write ends the line in b, writes it and returns b's buffer to the pool.
func (h *jsonLogHandler) write(bp *[]byte, b []byte) error {
	b = append(b, "}\n"...)
	_, err := h.w.Write(b)
	if cap(b) <= 64<<10 { // keep no giant buffer
		*bp = b
		logBufs.Put(bp)
	}
	return err
}

// appendHead appends the line's opening, time, level and message; false
// when the time is one the short path leaves to slog (zero, or a year
// outside 0–9999).
func appendHead(b []byte, t time.Time, l slog.Level, msg string) ([]byte, bool) {
	if y := t.Year(); t.IsZero() || y < 0 || y >= 10000 {
		return b, false
	}
	b = append(b, `{"time":"`...)
	b = t.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":`...)
	b = appendJSONString(b, l.String())
	b = append(b, `,"msg":`...)
	return appendJSONString(b, msg), true
}

// appendAttr appends ,"key":value; false for a kind the short path leaves
// to slog. An empty attribute is dropped, as slog drops it.
func appendAttr(b []byte, a slog.Attr) ([]byte, bool) {
	v := a.Value
	switch v.Kind() {
	case slog.KindString, slog.KindInt64, slog.KindUint64, slog.KindBool:
	case slog.KindLogValuer:
		u, ok := v.Any().(upstreamJSON)
		if !ok {
			return b, false
		}
		b = append(b, ',')
		b = appendJSONString(b, a.Key)
		b = append(b, ':')
		return appendAttempts(b, *u.tl), true
	case slog.KindAny:
		// Compact JSON made by json.Marshal (core.AttemptsJSON): slog
		// writes a json.RawMessage as it is, compacted, HTML unescaped.
		raw, ok := v.Any().(json.RawMessage)
		if !ok || len(raw) == 0 {
			return b, false
		}
		b = append(b, ',')
		b = appendJSONString(b, a.Key)
		b = append(b, ':')
		return appendCompact(b, raw)
	default:
		return b, a.Equal(slog.Attr{})
	}
	b = append(b, ',')
	b = appendJSONString(b, a.Key)
	b = append(b, ':')
	switch v.Kind() {
	case slog.KindString:
		b = appendJSONString(b, v.String())
	case slog.KindInt64:
		b = strconv.AppendInt(b, v.Int64(), 10)
	case slog.KindUint64:
		b = strconv.AppendUint(b, v.Uint64(), 10)
	case slog.KindBool:
		b = strconv.AppendBool(b, v.Bool())
	}
	return b, true
}

// appendJSONString appends s quoted and escaped exactly as slog's JSON
// handler does: control characters, '"' and '\\' escaped, invalid UTF-8 as
// \ufffd, U+2028 and U+2029 escaped, HTML characters kept.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			b = append(b, '\\')
			switch c {
			case '\\', '"':
				b = append(b, c)
			case '\n':
				b = append(b, 'n')
			case '\r':
				b = append(b, 'r')
			case '\t':
				b = append(b, 't')
			default:
				b = append(b, 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, `\u202`...)
			b = append(b, hex[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendCompact appends raw, valid JSON, compacted as slog's JSON handler
// writes a json.RawMessage.
func appendCompact(b []byte, raw json.RawMessage) ([]byte, bool) {
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, raw); err != nil {
		return b, false
	}
	return buf.Bytes(), true
}

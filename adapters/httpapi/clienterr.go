package httpapi

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"fngateway/core"
)

// What a client is told of an error, and what a client can make the
// gateway log (docs/security.md#bounded-telemetry-and-logs and
// docs/security.md#errors-say-nothing-of-the-inside).

// internalMessages are the messages of the reasons whose cause is inside
// the gateway — a store, a queue, a credential, a record — and not the
// client's request: the client gets this fixed text, and the detail (a
// store URL, a record path, an account, a tenant) goes to the log.
var internalMessages = map[core.Reason]string{
	core.ReasonAsyncUnavailable:  "the async hand-off could not be made durable; try again later",
	core.ReasonBackendAuthFailed: "the route's backend credential could not be obtained; nothing was sent",
	core.ReasonCorruptRecord:     "the record of this async request cannot be read; it will not complete",
	core.ReasonNone:              "internal error",
}

// MaxPublicMessage bounds the message of an error the client caused, which
// may quote what it sent.
const MaxPublicMessage = 512

// PublicMessage is the one rule of what an error's message may say to a
// client: for a reason caused inside the gateway (internalMessages, and any
// reason core does not name) a fixed text; for one the client caused (a bad
// header, path or body, a deadline, a backend's failure, …) the gateway's own
// message, which names the client's input, capped to MaxPublicMessage. A
// wrapped error's text (Error.Err) never reaches a client.
func PublicMessage(r core.Reason, msg string) string {
	if m, ok := internalMessages[r]; ok {
		return m
	}
	if r.Code() == "Internal" {
		return internalMessages[core.ReasonNone]
	}
	if msg == "" {
		return r.Code()
	}
	return LogValue(msg, MaxPublicMessage)
}

// internal reports whether r is caused inside the gateway.
func internal(r core.Reason) bool {
	_, ok := internalMessages[r]
	return ok || r.Code() == "Internal"
}

// reasonOfCode returns the Reason whose Code is code, or ReasonNone.
func reasonOfCode(code string) (core.Reason, bool) {
	for r := core.ReasonNone + 1; r.Code() != "Internal"; r++ {
		if r.Code() == code {
			return r, true
		}
	}
	return core.ReasonNone, false
}

// publicError returns e as a client may see it (PublicMessage), logging
// the detail of an internal one through the bounded client log.
func (h *Handler) publicError(ctx context.Context, e *core.Error) *core.Error {
	if internal(e.Reason) {
		detail := e.Message
		if e.Err != nil {
			detail += ": " + e.Err.Error()
		}
		h.clientLog.Log(ctx, h.Logger, slog.LevelWarn, "internal error answered",
			slog.String("code", e.Reason.Code()), slog.String("err", detail))
	}
	return &core.Error{Reason: e.Reason, Message: PublicMessage(e.Reason, e.Message), Attempts: e.Attempts}
}

// MaxLogValue bounds each string value of a log line a client can cause.
const MaxLogValue = 256

// LogValue returns s cut to at most n bytes, at a rune boundary, marked
// with "…" when cut.
func LogValue(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// The default rate of ClientLog: a burst of DefaultClientLogBurst lines,
// then DefaultClientLogRate a second.
const (
	DefaultClientLogRate  = 10
	DefaultClientLogBurst = 20
)

// ClientLog writes the log lines a client can cause (its bad input, the
// internal errors its requests meet) bounded in size and rate: each string
// value is cut to MaxLogValue bytes, and lines beyond a token bucket
// (DefaultClientLogBurst at once, DefaultClientLogRate a second) are
// dropped and counted; the next line written says how many were dropped
// before it ("suppressed"). The zero value is ready; safe for concurrent
// use. A nil *ClientLog bounds nothing and counts nothing.
type ClientLog struct {
	mu         sync.Mutex
	tokens     float64
	last       time.Time
	suppressed int64 // dropped since the last line written
	dropped    atomic.Int64
}

// allow takes a token at now, reporting false (and counting the drop)
// when there is none, and the drops since the last line allowed.
func (c *ClientLog) allow(now time.Time) (bool, int64) {
	if c == nil {
		return true, 0 // a Handler not Init'ed: unbounded
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last.IsZero() {
		c.tokens = DefaultClientLogBurst
	} else {
		c.tokens = min(DefaultClientLogBurst, c.tokens+now.Sub(c.last).Seconds()*DefaultClientLogRate)
	}
	c.last = now
	if c.tokens < 1 {
		c.suppressed++
		c.dropped.Add(1)
		return false, 0
	}
	c.tokens--
	n := c.suppressed
	c.suppressed = 0
	return true, n
}

// Log writes one line to l at level, its string values capped to
// MaxLogValue, unless the rate is spent: then the line is dropped and
// counted.
func (c *ClientLog) Log(ctx context.Context, l *slog.Logger, level slog.Level, msg string, attrs ...slog.Attr) {
	if l == nil || !l.Enabled(ctx, level) {
		return
	}
	ok, suppressed := c.allow(time.Now())
	if !ok {
		return
	}
	for i, a := range attrs {
		if a.Value.Kind() == slog.KindString {
			attrs[i].Value = slog.StringValue(LogValue(a.Value.String(), MaxLogValue))
		}
	}
	if suppressed > 0 {
		attrs = append(attrs, slog.Int64("suppressed", suppressed))
	}
	l.LogAttrs(ctx, level, msg, attrs...)
}

// Dropped returns the number of lines dropped so far.
func (c *ClientLog) Dropped() int64 {
	if c == nil {
		return 0
	}
	return c.dropped.Load()
}

// ClientLog returns the handler's client log, for the host's own
// client-reachable endpoints (the Azure continuation path) to share its
// bounds and its count in /_gateway/stats.
func (h *Handler) ClientLog() *ClientLog { return h.clientLog }

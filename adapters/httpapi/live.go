package httpapi

import (
	"net/http"
	"sync/atomic"

	"fngateway/core"
	"fngateway/internal/settings"
)

// Live serves with the Handler in force and swaps in a new one when the
// settings are reloaded (internal/settings). Each request is served
// wholly by the Handler it started with, so it keeps the settings it
// started with; the next request gets the new ones. Nothing is dropped:
// the swap is one atomic store between requests.
type Live struct {
	p atomic.Pointer[Handler]
}

// NewLive serves with h, which must have been Init'ed.
func NewLive(h *Handler) *Live {
	l := &Live{}
	l.p.Store(h)
	return l
}

// Handler returns the Handler in force.
func (l *Live) Handler() *Handler { return l.p.Load() }

// ServeHTTP serves r with the Handler in force when it arrived.
func (l *Live) ServeHTTP(w http.ResponseWriter, r *http.Request) { l.p.Load().ServeHTTP(w, r) }

// ClientLog is the shared bound on the lines clients can cause.
func (l *Live) ClientLog() *ClientLog { return l.p.Load().ClientLog() }

// Swap serves the next requests with s and fwd. What is not a setting
// carries over: the body budget (MaxBufferedBytes, a COLD setting), the
// bound on client log lines, the async engine, the logger, the stats.
func (l *Live) Swap(s *settings.Settings, fwd *core.Forwarder) {
	old := l.p.Load()
	h := *old
	h.Settings, h.Forwarder = s, fwd
	h.router = s.Router()
	l.p.Store(&h)
}

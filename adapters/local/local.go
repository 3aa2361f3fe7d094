// Package local is the local host: a plain HTTP server in front of the
// gateway handler, for development, the demo and containers. Continuations
// run in-process from the queue of the configured store.
package local

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"

	"fngateway/adapters/httpapi"
	"fngateway/core"
)

// Caps returns what the local host can do: work after answering (the
// process runs on), connection upgrades, and answers of any size.
func Caps() core.HostCaps {
	return core.HostCaps{Name: "local", WorkAfterAnswer: true, Upgrade: true, Response: core.ResponseLimit{}}
}

// Server serves a gateway handler on a TCP address. Its zero value is not
// usable: set Handler, and Addr or Listener.
type Server struct {
	// Addr is the listen address, such as 127.0.0.1:8080 (":0" picks a port).
	Addr string
	// Listener, if set, is served instead of listening on Addr: a caller
	// that listens before it builds anything else fails early, leaving
	// nothing behind. Run closes it.
	Listener net.Listener
	// Handler serves every request.
	Handler http.Handler
	// Limit, if positive, is the execution limit each request runs under
	// (FunctionTimeoutSecs): the request's context gets that deadline.
	Limit time.Duration
	// Logger receives start-up and shutdown lines. Nil discards.
	Logger *slog.Logger
	// Ready, if set, is called with the bound address once listening.
	Ready func(addr net.Addr)
	// IdleTimeout closes a keep-alive connection that has waited this long
	// for its next request. Zero means DefaultIdleTimeout.
	IdleTimeout time.Duration
}

// DefaultIdleTimeout is the idle keep-alive limit of a Server whose
// IdleTimeout is zero: long enough for clients that pool connections,
// short enough that idle sockets do not pile up to the descriptor limit.
const DefaultIdleTimeout = 120 * time.Second

// Run listens and serves until ctx is done, then shuts down gracefully,
// giving in-flight requests up to httpapi.ShutdownGrace.
func (s *Server) Run(ctx context.Context) error {
	log := s.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ln := s.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", s.Addr); err != nil {
			return err
		}
	}
	h := s.Handler
	if s.Limit > 0 {
		inner, limit := h, s.Limit
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), limit)
			defer cancel()
			inner.ServeHTTP(w, r.WithContext(ctx))
		})
	}
	idle := s.IdleTimeout
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       idle,
		// The server reports handler panics and connection errors here:
		// at Error level, so they show at the default level.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelError),
	}
	if s.Ready != nil {
		s.Ready(ln.Addr())
	}
	log.Info("listening", slog.String("addr", ln.Addr().String()))
	return httpapi.Serve(ctx, srv, ln)
}

package httpapi

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// ShutdownGrace is how long Serve gives in-flight requests once its context
// is done.
const ShutdownGrace = 10 * time.Second

// Serve serves srv on ln until ctx is done, then shuts srv down gracefully,
// giving in-flight requests up to ShutdownGrace. It returns srv.Serve's
// error if serving stops by itself, and nil after a shutdown. Hosts that
// hold a listening server (local, Azure Functions) share it.
func Serve(ctx context.Context, srv *http.Server, ln net.Listener) error {
	ln = withFraming(srv, ln)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

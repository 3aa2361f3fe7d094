package httpapi

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"fngateway/core"
)

// tunnel relays a 101 Switching Protocols answer and then joins the
// client's connection to the backend's, as httputil.ReverseProxy's
// handleUpgradeResponse does. The TTL has bounded the handshake; the
// tunnel lives while either side talks within the route's idle limit
// (idleTimeoutMs; none by default) and the execution limit (the request
// context's deadline).
func (h *Handler) tunnel(w http.ResponseWriter, r *http.Request, res *core.Result, route *core.Route, lg *requestLog) {
	resp := res.Response
	lg.attempts = len(res.Attempts)
	back, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		h.fail(r.Context(), w, &core.Error{Reason: core.ReasonBackendUnavailable, Message: "the backend switched protocols without handing over its connection", Attempts: res.Attempts}, lg)
		return
	}
	defer back.Close()
	asked, got := upgradeType(r.Header), resp.Header.Get("Upgrade")
	if asked == "" || !strings.EqualFold(asked, got) {
		// As httputil.ReverseProxy: a switch the client did not ask for
		// would hand it a connection it cannot speak.
		h.fail(r.Context(), w, &core.Error{Reason: core.ReasonBackendUnavailable,
			Message: "the backend switched protocols to " + strconv.Quote(trim(got)) + " when " + strconv.Quote(trim(asked)) + " was asked", Attempts: res.Attempts}, lg)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		h.fail(r.Context(), w, &core.Error{Reason: core.ReasonUpgradeUnsupported, Message: "this connection cannot be upgraded: " + err.Error(), Attempts: res.Attempts}, lg)
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Time{}) // the server's deadlines are for HTTP, not the tunnel

	hdr := resp.Header.Clone()
	core.RemoveHopHeaders(hdr)
	hdr["Connection"] = []string{"Upgrade"}
	hdr["Upgrade"] = resp.Header["Upgrade"]
	hdr["X-Attempts"] = []string{strconv.Itoa(len(res.Attempts))}
	resp.Header, resp.Body = hdr, nil
	if err := resp.Write(brw); err != nil {
		return
	}
	if err := brw.Flush(); err != nil {
		return
	}
	lg.status = http.StatusSwitchingProtocols

	var once sync.Once
	closeBoth := func() { once.Do(func() { conn.Close(); back.Close() }) }
	var idle *time.Timer
	var idled atomic.Bool
	if d := route.IdleTimeout; d > 0 {
		idle = time.AfterFunc(d, func() {
			idled.Store(true)
			closeBoth()
		})
		defer idle.Stop()
	}
	stop := context.AfterFunc(r.Context(), closeBoth) // the execution limit
	defer stop()

	errc := make(chan error, 2)
	// Bytes the server read ahead from the client go first.
	go func() { errc <- pipe(back, brw.Reader, idle, route.IdleTimeout) }()
	go func() { errc <- pipe(conn, back, idle, route.IdleTimeout) }()
	<-errc
	closeBoth()
	<-errc
	if idled.Load() {
		lg.fired = "idle"
	}
}

// pipe copies src to dst until either fails, resetting the idle timer
// (if any) after every read.
func pipe(dst io.Writer, src io.Reader, idle *time.Timer, d time.Duration) error {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if idle != nil {
				idle.Reset(d)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err != nil {
			return err
		}
	}
}

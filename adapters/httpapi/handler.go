// Package httpapi is the HTTP face of the gateway, shared by every host:
// it reads the per-request headers of docs/settings.md#per-request-headers, runs core's attempt loop,
// and writes the answers of docs/deadlines.md#status-codes. Hosts (adapters/local, Lambda, Azure
// Functions) hand it plain net/http requests whose context carries the
// host's execution limit as its deadline.
package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"time"

	"fngateway/core"
	"fngateway/core/async"
	"fngateway/internal/settings"
)

// Handler serves gateway requests. Set its fields, then call Init once;
// it is safe for concurrent use afterwards.
type Handler struct {
	// Settings are the validated settings. Required.
	Settings *settings.Settings
	// Forwarder runs attempts. Required.
	Forwarder *core.Forwarder
	// Stats counts requests; nil counts nothing.
	Stats *core.Stats
	// Logger receives one line per request. Nil discards.
	Logger *slog.Logger
	// Async, if set, runs async hand-offs and serves status URIs.
	Async *async.Async
	// Blobs, if set, serves /_gateway/blobs/ (signed result URLs of the
	// embedded store).
	Blobs http.Handler
	// Host states what the host running the gateway can do; the zero value is the most restrictive.
	Host core.HostCaps
	// SettingsView, if set, serves /_gateway/settings (internal/settings).
	SettingsView http.Handler
	// ExtraStats, if set, adds its counters to /_gateway/stats.
	ExtraStats func() map[string]int64

	router    *core.Router
	bodies    *core.ByteBudget // MaxBufferedBytes
	clientLog *ClientLog       // the lines a client can cause, bounded
}

// Init prepares h for serving. A zero Settings.MaxBufferedBytes means the
// contract's default budget (settings.DefaultSettings); a zero
// ClientBodyTimeoutMs, no limit on the silence between body reads (the TTL
// still bounds a buffered body).
func (h *Handler) Init() {
	h.router = h.Settings.Router()
	budget := h.Settings.MaxBufferedBytes
	if budget == 0 {
		budget = settings.DefaultSettings().MaxBufferedBytes
	}
	h.bodies = core.NewByteBudget(int64(budget))
	h.clientLog = &ClientLog{}
	if h.Logger == nil {
		h.Logger = slog.New(slog.DiscardHandler)
	}
}

// ServeHTTP answers one request: the gateway's own endpoints under
// /_gateway/, and everything else by forwarding.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rest, ok := strings.CutPrefix(r.URL.Path, "/_gateway/"); ok {
		id, _ := requestID(r, h.Settings.TrustedProxies.Trusts(core.ParseHop(r.RemoteAddr)))
		r = r.WithContext(core.WithRequestID(r.Context(), id))
		w.Header().Set("X-Request-Id", id)
		ow := &ownWriter{ResponseWriter: w}
		defer h.logOwn(r, ow, time.Now())
		h.serveOwn(ow, r, rest)
		return
	}
	h.proxy(w, r)
}

func (h *Handler) serveOwn(w http.ResponseWriter, r *http.Request, rest string) {
	w.Header().Set("X-Attempts", "0") // no backend was tried
	switch {
	case rest == "health":
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	case rest == "stats":
		writeJSON(w, http.StatusOK, h.statsDoc())
	case rest == "settings" && h.SettingsView != nil:
		h.SettingsView.ServeHTTP(w, r)
	case strings.HasPrefix(rest, "blobs/") && h.Blobs != nil:
		h.Blobs.ServeHTTP(w, r)
	case strings.HasPrefix(rest, "async/") && h.Async != nil:
		h.serveStatus(w, r, strings.TrimPrefix(rest, "async/"))
	default:
		writeError(w, http.StatusNotFound, "NotFound", "no such gateway endpoint: "+r.URL.Path, 0)
	}
}

// requestLog collects what the per-request log line says.
type requestLog struct {
	route    string
	status   int
	code     string
	reason   core.Reason // how it ended without a backend answer; ReasonNone if it did not
	attempts int
	fired    string
	async    string
	declined string         // why a request that asked for async is served in line (x-Async-Declined)
	err      string         // why a stream was cut, for the log
	accepted time.Time      // when the platform or a trusted proxy accepted it; zero if unsaid
	timeline []core.Attempt // the attempts, for the line's upstream and EMF metrics
	// Which host served, and how long until the headers (stamp).
	arrival             time.Time
	backend, backendURL string
	latencyMs           int64
	asyncReason         string // why a 202 came when it did (x-Async-Reason)
	id                  string // the request id (X-Request-Id)
	// up is where timeline is held on the heap (the Result's or the
	// Error's Attempts), for the line's upstream without a copy (upstreamAttrs).
	up *[]core.Attempt
	// vals backs the values of X-Request-Id, x-Backend-Host and
	// x-Gateway-Latency-Ms: one allocation for the three, each a full
	// slice, so no append spills into the next. stamped: the stamp's two
	// are in use, and a second stamp makes its own.
	vals    []string
	stamped bool
}

// idValue returns the X-Request-Id header value, from lg's backing.
func (lg *requestLog) idValue() []string {
	if len(lg.vals) == 0 {
		return []string{lg.id}
	}
	return lg.vals[0:1:1]
}

func (h *Handler) proxy(w http.ResponseWriter, r *http.Request) {
	arrival := time.Now()
	h.Stats.CountRequest()
	hdr, trusted := h.Settings.TrustedProxies.Believe(r.Header, r.RemoteAddr)
	r.Header = hdr
	id, spare := requestID(r, trusted)
	ctx := core.WithRequestID(r.Context(), id)
	vals := []string{id, "", ""} // requestLog.vals
	w.Header()["X-Request-Id"] = vals[0:1:1]
	closeIfBothFramings(w, r)
	route := h.router.Match(r.URL.Path)
	lg := requestLog{route: route.Prefix, fired: "none", accepted: acceptedAt(r, trusted), arrival: arrival, id: id, vals: vals}
	defer func() { h.log(ctx, r, arrival, &lg) }()

	req, body, gerr := h.prepare(w, r, route, core.ClockStart(lg.accepted, arrival), spare)
	defer body.done()
	if req != nil {
		req.RequestID = id
	}
	if gerr != nil {
		h.Stats.CountEnd(gerr.Reason)
		h.fail(ctx, w, gerr, &lg)
		return
	}
	eligible, declined := h.asyncEligible(r, route, req)
	if eligible {
		h.proxyAsync(w, r.WithContext(ctx), req, &lg) // its notifications and continuation carry the request id
		return
	}
	lg.declined = declined
	// 1xx answers (103 Early Hints) reach the client at once, as
	// httputil.ReverseProxy relays them. Forward runs on this goroutine, so
	// nothing else writes to w meanwhile.
	req.Informational = func(code int, mh textproto.MIMEHeader) error {
		if code == http.StatusContinue {
			return nil // the server answers Expect: 100-continue itself
		}
		hdr := w.Header()
		for k, v := range mh {
			hdr[k] = v
		}
		w.WriteHeader(code)
		clear(hdr) // WriteHeader does not clear them for a 1xx
		return nil
	}
	res, err := h.Forwarder.Forward(ctx, req)
	if err != nil {
		var ge *core.Error
		if !errors.As(err, &ge) {
			ge = &core.Error{Reason: core.ReasonNone, Err: err}
		}
		if be := body.streamError(ge); be != nil {
			// A streamed upload stalled, was cut by the TTL or was malformed.
			ge = be
			h.Stats.CountEnd(ge.Reason)
		}
		h.fail(ctx, w, ge, &lg)
		return
	}
	if res.Response.StatusCode == http.StatusSwitchingProtocols {
		h.tunnel(w, r, res, route, &lg)
		return
	}
	if h.relay(w, r, res, route, &lg) {
		// The whole answer is in the server's buffer, framed by its
		// Content-Length. Give the body budget back, then send the answer
		// now, in the one write net/http would make after the handler: the
		// client does not wait for the log line and the clean-up after it.
		body.done()
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
}

// prepare reads the per-request headers and body into a core.Request. The
// returned body must be released with done once the request is over.
// spare, if not empty, is a fresh key for the Idempotency-Key the request
// gets when the client sent none (requestID makes it with the request id).
func (h *Handler) prepare(w http.ResponseWriter, r *http.Request, route *core.Route, arrival time.Time, spare string) (*core.Request, *bodyReader, *core.Error) {
	s := h.Settings
	path := r.URL.EscapedPath()
	if _, err := core.ConfinePath(path); err != nil {
		return nil, nil, &core.Error{Reason: core.ReasonInvalidPath, Message: "path " + strconv.Quote(trim(path)) + ": " + err.Error()}
	}
	if e := route.Admit(r.Method, r.Header, r.URL.RawQuery); e != nil {
		return nil, nil, e // before the body is read, and before async
	}
	upgrade := upgradeType(r.Header)
	if upgrade != "" && !h.Host.Upgrade {
		return nil, nil, &core.Error{Reason: core.ReasonUpgradeUnsupported,
			Message: "Upgrade: " + strconv.Quote(trim(upgrade)) + ": this host (" + h.hostName() + ") cannot hold an upgraded connection"}
	}
	ttl := arrival.Add(route.TTL)
	if v, ok := header(r, "S7pttl"); ok {
		t, err := core.ParseTTL(v, arrival)
		if err != nil {
			return nil, nil, &core.Error{Reason: core.ReasonInvalidTTL, Message: "header S7PTTL " + strconv.Quote(trim(v)) + ": " + err.Error()}
		}
		ttl = t
	}
	// The caller's own deadline only shortens the TTL (core/nested.go).
	if t, from, err := core.CallerDeadline(r.Header, arrival); err != nil {
		return nil, nil, &core.Error{Reason: core.ReasonInvalidTimeout, Message: "header " + from + ": " + err.Error()}
	} else if !t.IsZero() && t.Before(ttl) {
		ttl = t
	}
	timeout := route.Timeout
	if v, ok := header(r, "S7ptimeout"); ok {
		d, err := core.ParseTimeout(v)
		if err != nil {
			return nil, nil, &core.Error{Reason: core.ReasonInvalidTimeout, Message: "header S7PTimeout " + strconv.Quote(trim(v)) + ": " + err.Error()}
		}
		timeout = d
	}
	b := core.Budget{Arrival: arrival, TTL: ttl, Timeout: timeout,
		// A deadline the client shortened below the route's own says
		// nothing of a host's health (docs/security.md#host-health-and-client-chosen-budgets).
		ClientTimeout: timeout != route.Timeout && (route.Timeout <= 0 || timeout < route.Timeout),
		ClientTTL:     ttl.Before(arrival.Add(route.TTL))}
	if dl, ok := r.Context().Deadline(); ok {
		b = b.WithLimit(dl, s.FunctionLimitMarginMs.D())
	}
	if !arrival.Before(ttl) {
		return nil, nil, &core.Error{Reason: core.ReasonTTLExpired, Message: "the request's TTL was over on arrival"}
	}
	req := &core.Request{
		Method:     r.Method,
		Path:       path,
		RawQuery:   r.URL.RawQuery,
		Header:     r.Header,
		Host:       r.Host,
		RemoteAddr: r.RemoteAddr,
		Proto:      "http",
		Route:      route,
		Budget:     b,
		Upgrade:    upgrade,
	}
	if r.TLS != nil {
		req.Proto = "https"
	}
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		req.IdempotencyKey, req.ClientKey = key, true
	} else if spare != "" {
		req.IdempotencyKey = spare
	} else {
		req.IdempotencyKey = newKey()
	}
	body, err := h.readBody(w, r, req, b)
	if err != nil {
		return nil, body, err
	}
	return req, body, nil
}

// upgradeType returns the protocol a request asks to switch to: its
// Upgrade header when its Connection header names upgrade, else "".
func upgradeType(h http.Header) string {
	up := h.Get("Upgrade")
	if up == "" {
		return ""
	}
	for tok := range core.ConnectionNames(h["Connection"]) {
		if strings.EqualFold(tok, "upgrade") {
			return up
		}
	}
	return ""
}

func (h *Handler) hostName() string {
	if h.Host.Name == "" {
		return "unnamed"
	}
	return h.Host.Name
}

// header returns the values of the canonical header key joined by commas,
// and whether the request carried it at all (present but empty counts).
func header(r *http.Request, key string) (string, bool) {
	v, ok := r.Header[key]
	return strings.Join(v, ","), ok
}

func trim(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// newKey returns a fresh Idempotency-Key: 128 random bits from crypto/rand
// in hex. The bits are read 4 KiB at a time into pooled buffers, each
// 16-byte slice used once: one read per 256 keys, not one per key.
func newKey() string {
	var dst [32]byte
	return string(appendKeys(dst[:0], 1))
}

// newKeyPair returns two fresh keys as newKey makes them, in one
// allocation (a request id and an Idempotency-Key).
func newKeyPair() (string, string) {
	var dst [64]byte
	s := string(appendKeys(dst[:0], 2))
	return s[:32], s[32:]
}

// appendKeys appends n keys' hex digits to dst.
func appendKeys(dst []byte, n int) []byte {
	kb := keyBufs.Get().(*keyBuf)
	for range n {
		if kb.off+16 > len(kb.b) {
			rand.Read(kb.b[:])
			kb.off = 0
		}
		dst = hex.AppendEncode(dst, kb.b[kb.off:kb.off+16])
		kb.off += 16
	}
	keyBufs.Put(kb)
	return dst
}

// keyBuf is random bits read ahead for newKey; b[off:] are still unused.
type keyBuf struct {
	b   [4096]byte
	off int
}

var keyBufs = sync.Pool{New: func() any { return &keyBuf{off: 4096} }}

// relay streams a backend answer to the client. It reports whether the
// whole answer is now in the server's buffer, framed by its
// Content-Length, so that the caller may flush it.
func (h *Handler) relay(w http.ResponseWriter, r *http.Request, res *core.Result, route *core.Route, lg *requestLog) (framed bool) {
	resp := res.Response
	defer resp.Body.Close()
	lg.status, lg.attempts, lg.timeline, lg.up = resp.StatusCode, len(res.Attempts), res.Attempts, &res.Attempts
	hdr := w.Header()
	closing := hdr["Connection"] // set by closeIfBothFramings
	for k, v := range resp.Header {
		hdr[k] = v
	}
	core.RemoveHopHeaders(hdr)
	if closing != nil {
		hdr["Connection"] = closing
	}
	core.AddViaHeader(hdr)
	hdr["X-Request-Id"] = lg.idValue() // the gateway's, whatever the backend said
	h.rewriteLocations(hdr, r, route)
	hdr["X-Attempts"] = attemptsValue(len(res.Attempts))
	lg.stamp(hdr, nil, res)
	setDeclined(hdr, lg.declined)
	if len(resp.Trailer) > 0 {
		for k := range resp.Trailer {
			hdr.Add("Trailer", k)
		}
	}
	flush := route.Stream || resp.ContentLength == -1 ||
		strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	dst := w
	var capped *answerCap
	if l := h.responseLimit(r); l.MaxBytes > 0 {
		// The host cannot send more than l: count the answer as it will
		// be sent, and stop reading the backend as soon as it cannot fit
		// (closing its body cancels the attempt's upstream).
		capped = newAnswerCap(w, l)
		defer capped.drop()
		if announced := resp.ContentLength; r.Method != http.MethodHead && resp.StatusCode != http.StatusNotModified &&
			resp.StatusCode != http.StatusNoContent && !capped.fits(announced) {
			h.refuseTooLarge(r.Context(), w, capped, res, resp, closing, lg)
			return false
		}
		dst = capped
	}
	dst.WriteHeader(resp.StatusCode)
	err := copyBody(dst, resp.Body, flush)
	if capped != nil && err == nil {
		capped.end()
	}
	if capped != nil && capped.over {
		if capped.limit.Whole {
			h.refuseTooLarge(r.Context(), w, capped, res, resp, closing, lg)
			return false
		}
		// A stream whose status is sent: cut it, as the platform would,
		// but with the gateway's own log line.
		lg.code = core.ReasonResponseTooLarge.Code()
		lg.err = h.tooLarge(capped, res, resp.ContentLength).Message
		resp.Body.Close()
		panic(http.ErrAbortHandler)
	}
	if err != nil {
		if n := len(res.Attempts); n > 0 && r.Context().Err() == nil {
			cause := core.StreamCut(resp.Body)
			if cause == nil {
				cause = err
			}
			res.Attempts[n-1].CutInBody(cause) // the line's upstream says the body broke off, and why
		}
		switch cut := core.StreamCut(resp.Body); {
		case cut != nil:
			lg.fired = "idle"
			if errors.Is(cut, core.ErrFunctionLimit) {
				lg.fired = "function-limit"
			}
			lg.code = "StreamCut"
		case r.Context().Err() != nil:
			return false // the client left; its side is closed anyway
		default:
			// The backend broke off mid-body (a cut chunked answer, a short
			// Content-Length): a silently truncated answer is data loss.
			h.Stats.CountBackendCut()
			lg.code = "BackendCut"
			lg.err = err.Error()
		}
		// Abort: the client sees the transfer break (no final chunk), never
		// a second status. The deferred log line is written as this unwinds.
		resp.Body.Close()
		panic(http.ErrAbortHandler)
	}
	if capped != nil && capped.limit.Whole {
		// A whole answer carries no trailers (there is no chunked framing
		// to put them in): its headers were counted without them.
		capped.release(resp.StatusCode)
		return false
	}
	for k, v := range resp.Trailer {
		hdr[http.TrailerPrefix+k] = v
	}
	return !flush && resp.ContentLength >= 0 && len(resp.Trailer) == 0
}

// refuseTooLarge answers 502 ResponseTooLarge for an answer that will not
// fit the host's limit: nothing of it was sent, its body is closed (the
// attempt's upstream is cancelled) and its headers are dropped.
func (h *Handler) refuseTooLarge(ctx context.Context, w http.ResponseWriter, c *answerCap, res *core.Result, resp *http.Response, closing []string, lg *requestLog) {
	resp.Body.Close()
	hdr := w.Header()
	clear(hdr)
	if closing != nil {
		hdr["Connection"] = closing
	}
	hdr["X-Request-Id"] = lg.idValue()
	h.Stats.CountEnd(core.ReasonResponseTooLarge)
	h.fail(ctx, w, h.tooLarge(c, res, resp.ContentLength), lg)
}

// attemptsValues are the x-Attempts header values of small counts, shared
// by every response (net/http only reads header values); each is a full
// slice, so an append copies it.
var attemptsValues = func() (v [16][]string) {
	for i := range v {
		v[i] = []string{strconv.Itoa(i)}
	}
	return v
}()

func attemptsValue(n int) []string {
	if n >= 0 && n < len(attemptsValues) {
		return attemptsValues[n]
	}
	return []string{strconv.Itoa(n)}
}

// copyBufs are the buffers of copyBody, shared by every response.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyBody copies src to w, flushing after each chunk when flush is set.
// It returns the first read error that is not io.EOF.
func copyBody(w http.ResponseWriter, src io.Reader, flush bool) error {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	var rc *http.ResponseController
	if flush {
		rc = http.NewResponseController(w)
	}
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return nil // the client left; nothing more to do
			}
			if flush {
				rc.Flush()
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// fail writes a gateway-made error, saying only what PublicMessage allows.
func (h *Handler) fail(ctx context.Context, w http.ResponseWriter, e *core.Error, lg *requestLog) {
	lg.attempts, lg.timeline, lg.up = len(e.Attempts), e.Attempts, &e.Attempts
	lg.code, lg.reason = e.Reason.Code(), e.Reason
	lg.fired = firedOf(e)
	if e.Reason == core.ReasonClientGone {
		lg.status = 499
		return
	}
	lg.status = e.HTTPStatus()
	hdr := w.Header()
	if e.Reason == core.ReasonRequestTimeout || e.Reason == core.ReasonInvalidBody {
		// The rest of the body is unread: the connection cannot be reused.
		hdr.Set("Connection", "close")
	}
	var na *core.NotAllowedError
	if e.Reason == core.ReasonMethodNotAllowed && errors.As(e, &na) {
		hdr.Set("Allow", strings.Join(na.Allow, ", "))
	}
	hdr.Set("Content-Type", "application/json")
	hdr.Set("X-Gateway-Error", e.Reason.Code())
	hdr.Set("X-Attempts", strconv.Itoa(len(e.Attempts)))
	lg.stamp(hdr, e.Attempts, nil)
	setDeclined(hdr, lg.declined)
	w.WriteHeader(lg.status)
	w.Write(h.publicError(ctx, e).JSON())
}

func firedOf(e *core.Error) string {
	switch e.Reason {
	case core.ReasonTTLExpired:
		return "ttl"
	case core.ReasonAttemptTimeout:
		return "timeout"
	case core.ReasonFunctionLimit:
		return "function-limit"
	}
	return "none"
}

func writeError(w http.ResponseWriter, status int, code, msg string, attempts int) {
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	hdr.Set("X-Gateway-Error", code)
	hdr.Set("X-Attempts", strconv.Itoa(attempts))
	w.WriteHeader(status)
	w.Write(core.ErrorJSON(code, msg, nil))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (h *Handler) log(ctx context.Context, r *http.Request, arrival time.Time, lg *requestLog) {
	now := time.Now() // one clock read for the duration and the line's time
	h.Stats.CountStatus(lg.status)
	if o := h.Forwarder.Observer; o != nil {
		o.EndRequest(ctx, core.RequestEnd{Route: lg.route, Status: lg.status, Code: lg.code, Attempts: lg.attempts,
			Deadline: lg.fired, Async: lg.async, Duration: now.Sub(arrival)})
	}
	level, msg := lg.logLevel()
	tl := countTimeline(lg.timeline)
	base := [...]slog.Attr{
		slog.String("method", LogValue(r.Method, MaxLogValue)), // the client's: bounded
		slog.String("path", LogValue(r.URL.Path, MaxLogValue)),
		slog.String("route", lg.route),
		slog.Int("status", lg.status),
		slog.String("code", lg.code),
		slog.Int("attempts", lg.attempts),
		slog.String("deadline", lg.fired),
		slog.String("async", lg.async),
		slog.Int64("durationMs", now.Sub(arrival).Milliseconds()),
		slog.Int64("hedges", tl.hedges),
		slog.Int64("ejections", tl.ejections),
		slog.String("backend", lg.backend), // stamp
		slog.String("backendUrl", lg.backendURL),
		slog.Int64("gatewayLatencyMs", lg.latencyMs),
		slog.String("err", lg.err),
	}
	// Room for every attribute the line can have, so that none is
	// appended to a new array (the line stays on the stack).
	var attrs [len(base) + 9]slog.Attr
	n := copy(attrs[:], base[:])
	if lg.err == "" {
		n-- // err only when a stream was cut
	}
	line := attrs[:n]
	if lg.declined != "" {
		line = append(line, slog.String("asyncDeclined", lg.declined))
	}
	if lg.asyncReason != "" {
		line = append(line, slog.String("asyncReason", lg.asyncReason))
	}
	line = upstreamAttrs(line, lg)
	if !lg.accepted.IsZero() {
		// Both times, when the platform or a trusted proxy said when it
		// accepted the request.
		line = append(line,
			slog.String("acceptedAt", lg.accepted.UTC().Format(time.RFC3339Nano)),
			slog.String("arrivedAt", arrival.UTC().Format(time.RFC3339Nano)),
			slog.Int64("queueMs", arrival.Sub(core.ClockStart(lg.accepted, arrival)).Milliseconds()))
	}
	// Straight to the handler, as Logger.LogAttrs would go, without the
	// caller's program counter it looks up for AddSource.
	hd := h.Logger.Handler()
	if !hd.Enabled(ctx, level) {
		return
	}
	if h.Settings.EmfNamespace != "" {
		h.logEMF(ctx, hd, now, level, msg, line, lg, tl)
		return
	}
	if jh, ok := hd.(*jsonLogHandler); ok {
		jh.handleAttrs(ctx, now, level, msg, line)
		return
	}
	rec := slog.NewRecord(now, level, msg, 0)
	rec.AddAttrs(line...)
	hd.Handle(ctx, rec)
}

// BufferedBytes returns the bytes of request bodies buffered now, out of
// MaxBufferedBytes (a gauge for telemetry). Safe for concurrent use.
func (h *Handler) BufferedBytes() int64 { return h.bodies.InUse() }

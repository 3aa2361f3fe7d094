// Package httpapi is the HTTP face of the gateway, shared by every host:
// it reads the per-request headers of CONTRACT §3, runs core's attempt loop,
// and writes CONTRACT §5's answers. Hosts (adapters/local, Lambda, Azure
// Functions) hand it plain net/http requests whose context carries the
// host's execution limit as its deadline.
package httpapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"fngateway/core"
)

// Handler serves gateway requests. Set its fields, then call Init once;
// it is safe for concurrent use afterwards.
type Handler struct {
	// Settings are the validated settings. Required.
	Settings *core.Settings
	// Forwarder runs attempts. Required.
	Forwarder *core.Forwarder
	// Stats counts requests; nil counts nothing.
	Stats *core.Stats
	// Logger receives one line per request. Nil discards.
	Logger *slog.Logger
	// Async, if set, runs async hand-offs and serves status URIs.
	Async *core.Async
	// Blobs, if set, serves /_gateway/blobs/ (signed result URLs of the
	// embedded store).
	Blobs http.Handler
	// Host states what the host running the gateway can do; the zero value is the most restrictive.
	Host core.HostCaps

	router *core.Router
}

// Init prepares h for serving.
func (h *Handler) Init() {
	h.router = core.NewRouter(h.Settings)
	if h.Logger == nil {
		h.Logger = slog.New(slog.DiscardHandler)
	}
}

// ServeHTTP answers one request: the gateway's own endpoints under
// /_gateway/, and everything else by forwarding.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rest, ok := strings.CutPrefix(r.URL.Path, "/_gateway/"); ok {
		h.serveOwn(w, r, rest)
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
		writeJSON(w, http.StatusOK, h.Stats.Snapshot())
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
	attempts int
	fired    string
	async    string
}

func (h *Handler) proxy(w http.ResponseWriter, r *http.Request) {
	arrival := time.Now()
	ctx := r.Context()
	h.Stats.Requests.Add(1)
	route := h.router.Match(r.URL.Path)
	lg := requestLog{route: route.Prefix, fired: "none"}
	defer func() { h.log(ctx, r, arrival, &lg) }()

	req, gerr := h.prepare(r, route, arrival)
	if gerr != nil {
		h.Stats.CountEnd(gerr.Reason)
		h.fail(w, gerr, &lg)
		return
	}
	if h.asyncEligible(r, route, req) {
		h.proxyAsync(w, r, req, &lg)
		return
	}
	res, err := h.Forwarder.Forward(ctx, req)
	if err != nil {
		var ge *core.Error
		if !errors.As(err, &ge) {
			ge = &core.Error{Reason: core.ReasonNone, Err: err}
		}
		h.fail(w, ge, &lg)
		return
	}
	h.relay(w, res, route, &lg)
}

// prepare reads the per-request headers and body into a core.Request.
func (h *Handler) prepare(r *http.Request, route *core.Route, arrival time.Time) (*core.Request, *core.Error) {
	s := h.Settings
	ttl := arrival.Add(route.TTL)
	if v, ok := header(r, "S7pttl"); ok {
		t, err := core.ParseTTL(v, arrival)
		if err != nil {
			return nil, &core.Error{Reason: core.ReasonInvalidTTL, Message: "header S7PTTL " + strconv.Quote(trim(v)) + ": " + err.Error()}
		}
		ttl = t
	}
	timeout := route.Timeout
	if v, ok := header(r, "S7ptimeout"); ok {
		d, err := core.ParseTimeout(v)
		if err != nil {
			return nil, &core.Error{Reason: core.ReasonInvalidTimeout, Message: "header S7PTimeout " + strconv.Quote(trim(v)) + ": " + err.Error()}
		}
		timeout = d
	}
	b := core.Budget{Arrival: arrival, TTL: ttl, Timeout: timeout}
	if dl, ok := r.Context().Deadline(); ok {
		b.Limit = dl.Add(-s.FunctionLimitMarginMs.D())
	}
	if !arrival.Before(ttl) {
		return nil, &core.Error{Reason: core.ReasonTTLExpired, Message: "the request's TTL was over on arrival"}
	}
	req := &core.Request{
		Method:     r.Method,
		Path:       r.URL.Path,
		RawQuery:   r.URL.RawQuery,
		Header:     r.Header,
		Host:       r.Host,
		RemoteAddr: r.RemoteAddr,
		Proto:      "http",
		Route:      route,
		Budget:     b,
	}
	if r.TLS != nil {
		req.Proto = "https"
	}
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		req.IdempotencyKey, req.ClientKey = key, true
	} else {
		req.IdempotencyKey = newKey()
	}
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		limit := int64(s.MaxRetryBodyBytes)
		buf, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
		if err != nil {
			return nil, &core.Error{Reason: core.ReasonClientGone, Message: "reading the request body: " + err.Error()}
		}
		if int64(len(buf)) > limit {
			req.BodyStream = io.MultiReader(bytes.NewReader(buf), r.Body)
		} else {
			req.Body = buf
		}
	}
	return req, nil
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

// newKey returns a fresh Idempotency-Key: 128 random bits in hex.
func newKey() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// relay streams a backend answer to the client.
func (h *Handler) relay(w http.ResponseWriter, res *core.Result, route *core.Route, lg *requestLog) {
	resp := res.Response
	defer resp.Body.Close()
	lg.status, lg.attempts = resp.StatusCode, len(res.Attempts)
	hdr := w.Header()
	for k, v := range resp.Header {
		hdr[k] = v
	}
	core.RemoveHopHeaders(hdr)
	hdr.Set("X-Attempts", strconv.Itoa(len(res.Attempts)))
	if len(resp.Trailer) > 0 {
		for k := range resp.Trailer {
			hdr.Add("Trailer", k)
		}
	}
	w.WriteHeader(resp.StatusCode)
	flush := route.Stream || resp.ContentLength == -1 ||
		strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	err := copyBody(w, resp.Body, flush)
	if err != nil {
		if cut := core.StreamCut(resp.Body); cut != nil {
			lg.fired = "idle"
			if errors.Is(cut, core.ErrFunctionLimit) {
				lg.fired = "function-limit"
			}
			lg.code = "StreamCut"
			// Abort: the client sees the transfer break, never a second
			// status. The deferred log line is written as this unwinds.
			resp.Body.Close()
			panic(http.ErrAbortHandler)
		}
		return
	}
	for k, v := range resp.Trailer {
		hdr[http.TrailerPrefix+k] = v
	}
}

// copyBody copies src to w, flushing after each chunk when flush is set.
// It returns the first read error that is not io.EOF.
func copyBody(w http.ResponseWriter, src io.Reader, flush bool) error {
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
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

// fail writes a gateway-made error.
func (h *Handler) fail(w http.ResponseWriter, e *core.Error, lg *requestLog) {
	lg.attempts = len(e.Attempts)
	lg.code = e.Reason.Code()
	lg.fired = firedOf(e)
	if e.Reason == core.ReasonClientGone {
		lg.status = 499
		return
	}
	lg.status = e.HTTPStatus()
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	hdr.Set("X-Gateway-Error", e.Reason.Code())
	hdr.Set("X-Attempts", strconv.Itoa(len(e.Attempts)))
	w.WriteHeader(lg.status)
	w.Write(e.JSON())
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
	level, msg := slog.LevelInfo, "request"
	if lg.code == "StreamCut" {
		level, msg = slog.LevelWarn, "request stream cut"
	}
	h.Logger.LogAttrs(ctx, level, msg,
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.String("route", lg.route),
		slog.Int("status", lg.status),
		slog.String("code", lg.code),
		slog.Int("attempts", lg.attempts),
		slog.String("deadline", lg.fired),
		slog.String("async", lg.async),
		slog.Int64("durationMs", time.Since(arrival).Milliseconds()),
	)
}

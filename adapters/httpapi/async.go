package httpapi

import (
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"fngateway/core"
	"fngateway/core/async"
)

// profileOf returns the profile the request selects with X-UserProfile,
// or nil.
func (h *Handler) profileOf(r *http.Request) *core.Profile {
	id := r.Header.Get("X-UserProfile")
	if id == "" {
		return nil
	}
	p, ok := h.Settings.UserProfiles[id]
	if !ok {
		return nil
	}
	return &p
}

// The reasons a request that asked for async (S7PAsyncMode: true) is
// served in line, in x-Async-Declined and the log line's asyncDeclined
// (docs/async-api.md#when-a-request-goes-async), in the order they are checked.
const (
	declinedAsyncDisabled   = "async-disabled"    // AsyncModeEnabled is off (or no async store)
	declinedProfileMissing  = "profile-missing"   // no X-UserProfile header
	declinedProfileUnknown  = "profile-unknown"   // X-UserProfile names no profile of UserProfiles
	declinedProfileAsyncOff = "profile-async-off" // the profile's async-config.enabled is not true
	declinedRouteAsyncOff   = "route-async-off"   // the route says "async": false
	declinedStreamedBody    = "streamed-body"     // the body is too large to keep (MaxRetryBodyBytes, MaxBufferedBytes)
	declinedUpgrade         = "upgrade"           // a connection upgrade (WebSocket) cannot wait on a queue
)

// asyncEligible says whether all three levels agree that req may go async
// (docs/async-api.md#when-a-request-goes-async): the gateway, the profile and the request itself. When the
// request asked for async and may not, declined says why.
func (h *Handler) asyncEligible(r *http.Request, route *core.Route, req *core.Request) (ok bool, declined string) {
	// S7PAsyncMode by its canonical key: Get need not canonicalise it (an
	// allocation on every request).
	if !strings.EqualFold(strings.TrimSpace(r.Header.Get("S7pasyncmode")), "true") {
		return false, ""
	}
	switch p := h.profileOf(r); {
	case h.Async == nil || !bool(h.Settings.AsyncModeEnabled):
		return false, declinedAsyncDisabled
	case r.Header.Get("X-UserProfile") == "":
		return false, declinedProfileMissing
	case p == nil:
		return false, declinedProfileUnknown
	case !p.Async.Enabled:
		return false, declinedProfileAsyncOff
	case route.Async != nil && !*route.Async:
		return false, declinedRouteAsyncOff
	case req.BodyStream != nil:
		return false, declinedStreamedBody
	case req.Upgrade != "":
		return false, declinedUpgrade
	}
	return true, ""
}

// setDeclined sets x-Async-Declined on an in-line answer to a request
// that asked for async, replacing any a backend sent.
func setDeclined(hdr http.Header, declined string) {
	if declined != "" {
		hdr["X-Async-Declined"] = []string{declined}
	}
}

// proxyAsync forwards an async-eligible request through core's trigger
// race (async.Async.Run) and translates its outcome: the backend's answer in
// line, 202 Accepted once handed off, or the gateway's error.
func (h *Handler) proxyAsync(w http.ResponseWriter, r *http.Request, req *core.Request, lg *requestLog) {
	res, acc, err := h.Async.Run(r.Context(), req, h.profileOf(r))
	switch {
	case err != nil:
		var ge *core.Error
		if !errors.As(err, &ge) {
			ge = &core.Error{Reason: core.ReasonNone, Err: err}
		}
		h.fail(r.Context(), w, ge, lg)
	case acc != nil:
		lg.async = acc.ID
		h.accepted(w, r, acc, lg)
	default:
		h.relay(w, r, res, req.Route, lg)
	}
}

// accepted writes the 202 of docs/async-api.md.
func (h *Handler) accepted(w http.ResponseWriter, r *http.Request, acc *async.Accepted, lg *requestLog) {
	status := h.absolute(r, acc.StatusURI)
	operation := h.absolute(r, async.OperationPath(acc.ID))
	data := h.absolute(r, acc.DataURI)
	headers := h.absolute(r, acc.HeaderURI)
	hdr := w.Header()
	hdr.Set("Location", status)
	hdr.Set("Operation-Location", operation)
	hdr.Set("Retry-After", strconv.Itoa(retryAfterSecs(acc.RetryAfter)))
	hdr.Set("X-Data-Blob-Uri", data)
	hdr.Set("X-Header-Blob-Uri", headers)
	hdr.Set("X-Attempts", "0")
	if acc.Reason != "" {
		hdr.Set("X-Async-Reason", acc.Reason) // why now (async.ReasonTrigger, …)
	}
	lg.stamp(hdr, nil, nil)
	lg.asyncReason = acc.Reason
	lg.status = http.StatusAccepted
	writeJSON(w, http.StatusAccepted, map[string]string{
		"id": acc.ID, "status": "Accepted", "statusUri": status, "operationUri": operation, "dataBlobUri": data, "headerBlobUri": headers,
	})
}

func retryAfterSecs(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// serveStatus answers a status URI (docs/async-api.md#the-status-uri): 202 with the state,
// Retry-After and Location (itself) while pending (generic
// long-running-operation pollers keep polling on 202); once done, the
// result itself (serveResult); 404 for an unknown id, 410 Expired once the
// request's expiry and read grace have passed, 500 CorruptRecord for a
// record that cannot be decoded. DELETE cancels (serveCancel); the
// operation URI below it is served by serveOperation, the gateway result
// URLs by serveResultURL.
func (h *Handler) serveStatus(w http.ResponseWriter, r *http.Request, id string) {
	if rid, part, ok := async.CutResultPart(id); ok {
		h.serveResultURL(w, r, rid, part)
		return
	}
	if opID, ok := strings.CutSuffix(id, async.OperationSuffix); ok {
		h.serveOperation(w, r, opID)
		return
	}
	if r.Method == http.MethodDelete {
		h.serveCancel(w, r, id)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD, DELETE")
		writeError(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "status URIs answer GET, HEAD and DELETE", 0)
		return
	}
	st, err := h.Async.Status(r.Context(), id)
	if h.statusFailed(w, r, id, err) {
		return
	}
	if st.State.Done() {
		h.serveResult(w, r, st)
		return
	}
	w.Header().Set("Location", h.absolute(r, async.StatusPath(st.ID)))
	w.Header()["X-Attempts"] = attemptsValue(len(st.Attempts))
	w.Header().Set("Retry-After", strconv.Itoa(retryAfterSecs(st.RetryAfter)))
	attempts := st.Attempts
	if attempts == nil {
		attempts = []core.Attempt{}
	}
	writeJSON(w, http.StatusAccepted, statusDoc{
		ID: st.ID, Status: string(st.State), Arrival: st.Arrival.UTC().Format(time.RFC3339Nano),
		Expiry: st.Expiry.UTC().Format(time.RFC3339Nano), Attempts: attempts, Checkpoints: st.Checkpoints,
	})
}

// statusFailed answers err from core's Status or Cancel, if any, and
// reports whether it did.
func (h *Handler) statusFailed(w http.ResponseWriter, r *http.Request, id string, err error) bool {
	var ge *core.Error
	switch {
	case err == nil:
		return false
	case errors.Is(err, async.ErrNotFound):
		writeError(w, http.StatusNotFound, "NotFound", "no async request with id "+strconv.Quote(trim(id)), 0)
	case errors.As(err, &ge) && (ge.Reason == core.ReasonExpired || ge.Reason == core.ReasonCorruptRecord):
		writeError(w, ge.HTTPStatus(), ge.Reason.Code(), h.publicError(r.Context(), ge).Message, 0)
	default:
		// The detail (a store path, an account name) is for the operator.
		h.clientLog.Log(r.Context(), h.Logger, slog.LevelWarn, "reading an async request", slog.String("id", id), slog.String("err", err.Error()))
		writeError(w, http.StatusServiceUnavailable, core.ReasonAsyncUnavailable.Code(), "the async store is unavailable; try again later", 0)
	}
	return true
}

// statusDoc is the body of a pending status URI.
type statusDoc struct {
	ID          string         `json:"id"`
	Status      string         `json:"status"`
	Arrival     string         `json:"arrival"`
	Expiry      string         `json:"expiresAt"`
	Attempts    []core.Attempt `json:"attempts"`
	Checkpoints int            `json:"checkpoints"`
}

// absolute resolves a gateway-relative URL against PublicBaseURL when it
// is set, and otherwise against the request's own Host and scheme. A
// client's X-Forwarded-Host is never used: it would let any client put a
// host of its choosing into the URLs it is given. X-Forwarded-Proto may
// only switch between http and https on the request's own Host, which
// changes nothing a client could not change by asking the other scheme, and
// lets a TLS-terminating front end give its clients https URLs.
func (h *Handler) absolute(r *http.Request, u string) string {
	if !strings.HasPrefix(u, "/") {
		return u
	}
	if base := h.Settings.PublicBaseURL; base != "" {
		return string(base) + u
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p := r.Header.Get("X-Forwarded-Proto"); p == "https" || p == "http" {
		scheme = p
	}
	return (&url.URL{Scheme: scheme, Host: r.Host}).String() + u
}

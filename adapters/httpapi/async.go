package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"fngateway/core"
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

// asyncEligible says whether all three levels agree that req may go async
// (CONTRACT §6): the gateway, the profile and the request itself.
func (h *Handler) asyncEligible(r *http.Request, route *core.Route, req *core.Request) bool {
	if h.Async == nil || !bool(h.Settings.AsyncModeEnabled) || req.BodyStream != nil {
		return false
	}
	if route.Async != nil && !*route.Async {
		return false
	}
	if !strings.EqualFold(strings.TrimSpace(r.Header.Get("S7PAsyncMode")), "true") {
		return false
	}
	p := h.profileOf(r)
	return p != nil && p.Async.Enabled
}

type forwardResult struct {
	res *core.Result
	err error
}

// proxyAsync forwards an async-eligible request: it answers in line if the
// backend answers within AsyncTriggerTimeout, and otherwise makes the
// continuation durable and answers 202. On a host that may work after
// answering, the in-flight attempt goes on in this process and finishes the
// continuation, holding its claim; if the process dies, the claim lapses and
// a queue-triggered invocation resends the request with the same
// Idempotency-Key. On a host that may not (h.Host.WorkAfterAnswer false),
// the attempt is cancelled before the 202 and the queued continuation does
// all the work.
func (h *Handler) proxyAsync(w http.ResponseWriter, r *http.Request, req *core.Request, lg *requestLog) {
	s := h.Settings
	ctx := r.Context()
	arrival := req.Budget.Arrival
	// Once async, the request lives by the async budget.
	req.Budget.TTL = arrival.Add(s.AsyncTTLSecs.D())
	req.Budget.Timeout = s.AsyncTimeout.D()
	trigger := arrival.Add(s.AsyncTriggerTimeout.D())
	if !req.Budget.Limit.IsZero() && req.Budget.Limit.Before(trigger) {
		trigger = req.Budget.Limit
	}
	// The attempt must outlive this handler: detach it from the client,
	// but cancel it if the client leaves before the hand-off.
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan forwardResult, 1)
	go func() {
		res, err := h.Forwarder.Forward(fctx, req)
		done <- forwardResult{res, err}
	}()
	timer := time.NewTimer(time.Until(trigger))
	defer timer.Stop()
	select {
	case fr := <-done:
		defer cancel()
		if fr.err != nil {
			var ge *core.Error
			if !errors.As(fr.err, &ge) {
				ge = &core.Error{Err: fr.err}
			}
			h.fail(w, ge, lg)
			return
		}
		h.relay(w, fr.res, req.Route, lg)
		return
	case <-ctx.Done():
		cancel()
		<-done
		lg.status, lg.code = 499, core.ReasonClientGone.Code()
		return
	case <-timer.C:
	}
	// The hand-off must end while the invocation can still answer: at most
	// 10 s, and no later than half the margin before the execution limit.
	handoff := time.Now().Add(10 * time.Second)
	if dl, ok := ctx.Deadline(); ok {
		handoff = earliest(handoff, dl.Add(-s.FunctionLimitMarginMs.D()/2))
	}
	sctx, scancel := context.WithDeadline(context.WithoutCancel(ctx), handoff)
	// A host that cannot work after answering (Lambda freezes the process)
	// leaves the whole request to the queued continuation.
	inflight := h.Host.WorkAfterAnswer
	acc, claim, err := h.Async.Submit(sctx, req, h.profileOf(r), inflight)
	scancel()
	if err != nil {
		cancel()
		<-done
		var ge *core.Error
		if !errors.As(err, &ge) || ge.Reason != core.ReasonAsyncUnavailable {
			ge = &core.Error{Reason: core.ReasonAsyncUnavailable, Message: "the async hand-off could not be made durable", Err: err}
		}
		h.fail(w, ge, lg)
		return
	}
	lg.async = acc.ID
	if !inflight {
		// Stop the attempt before answering: nothing may run on after it.
		cancel()
		if fr := <-done; fr.res != nil {
			fr.res.Response.Body.Close()
		}
		h.accepted(w, r, acc, lg)
		return
	}
	h.accepted(w, r, acc, lg)
	if claim == nil {
		// An earlier submission with the same Idempotency-Key owns this
		// request: this attempt is not needed.
		cancel()
		go func() {
			if fr := <-done; fr.res != nil {
				fr.res.Response.Body.Close()
			}
		}()
		return
	}
	go func() {
		defer cancel()
		var fr forwardResult
		select {
		case fr = <-done:
		case <-claim.Lost():
			// A queue worker took the request over; stop this attempt.
			cancel()
			fr = <-done
		}
		if err := h.Async.Finish(context.WithoutCancel(ctx), claim, fr.res, fr.err); err != nil {
			h.Logger.WarnContext(ctx, "finishing an async request in-process", "id", claim.ID(), "err", err.Error())
		}
	}()
}

// accepted writes the 202 of CONTRACT §6.
func (h *Handler) accepted(w http.ResponseWriter, r *http.Request, acc *core.Accepted, lg *requestLog) {
	status := absolute(r, acc.StatusURI)
	data := absolute(r, acc.DataURI)
	headers := absolute(r, acc.HeaderURI)
	hdr := w.Header()
	hdr.Set("Location", status)
	hdr.Set("Retry-After", strconv.Itoa(retryAfterSecs(acc.RetryAfter)))
	hdr.Set("X-Data-Blob-Uri", data)
	hdr.Set("X-Header-Blob-Uri", headers)
	hdr.Set("X-Attempts", "0")
	lg.status = http.StatusAccepted
	writeJSON(w, http.StatusAccepted, map[string]string{
		"id": acc.ID, "status": "Accepted", "statusUri": status, "dataBlobUri": data, "headerBlobUri": headers,
	})
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func retryAfterSecs(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// serveStatus answers a status URI: 200 with the state while pending,
// 303 to a freshly signed data URL when done, 404 for an unknown id.
func (h *Handler) serveStatus(w http.ResponseWriter, r *http.Request, id string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeError(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "status URIs answer GET", 0)
		return
	}
	st, err := h.Async.Status(r.Context(), id)
	switch {
	case errors.Is(err, core.ErrNotFound):
		writeError(w, http.StatusNotFound, "NotFound", "no async request with id "+strconv.Quote(trim(id)), 0)
		return
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, core.ReasonAsyncUnavailable.Code(), "reading the async request: "+err.Error(), 0)
		return
	}
	if st.State.Done() {
		w.Header().Set("Location", absolute(r, st.DataURI))
		w.WriteHeader(http.StatusSeeOther)
		return
	}
	w.Header().Set("Retry-After", strconv.Itoa(retryAfterSecs(st.RetryAfter)))
	attempts := st.Attempts
	if attempts == nil {
		attempts = []core.Attempt{}
	}
	writeJSON(w, http.StatusOK, statusDoc{
		ID: st.ID, Status: string(st.State), Arrival: st.Arrival.UTC().Format(time.RFC3339Nano),
		Expiry: st.Expiry.UTC().Format(time.RFC3339Nano), Attempts: attempts, Checkpoints: st.Checkpoints,
	})
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

// absolute resolves a gateway-relative URL against the request's own
// scheme and host.
func absolute(r *http.Request, u string) string {
	if !strings.HasPrefix(u, "/") {
		return u
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

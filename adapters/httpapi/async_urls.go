package httpapi

import (
	"errors"
	"net/http"
	"strconv"

	"fngateway/core/async"
)

// serveResultURL answers a gateway result URL, /_gateway/async/<id>/data
// or …/headers with its signature (docs/async-api.md#result-urls-and-their-lifetime): 307 Temporary Redirect to
// the blob, signed by the store at that moment for a few minutes, so the
// URL a 202 handed out lasts until the request expires whatever credential
// the store signs with. A missing, altered or foreign signature is 403
// InvalidSignature; an unknown id 404; a request without a result yet 404
// with Retry-After; past the expiry and read grace 410 Expired, nothing
// signed.
func (h *Handler) serveResultURL(w http.ResponseWriter, r *http.Request, id, part string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "result URLs are read-only: use GET or HEAD", 0)
		return
	}
	red, err := h.Async.ResultURL(r.Context(), id, part, r.URL.RawQuery)
	switch {
	case errors.Is(err, async.ErrInvalidSignature):
		writeError(w, http.StatusForbidden, "InvalidSignature", "the signature of this result URL is not valid for it", 0)
		return
	case errors.Is(err, async.ErrResultPending):
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSecs(0)))
		writeError(w, http.StatusNotFound, "NotFound", "async request "+id+" has no result yet; its status URI answers 202 until it has", 0)
		return
	case h.statusFailed(w, r, id, err):
		return
	}
	hdr := w.Header()
	hdr.Set("Location", h.absolute(r, red.URL))
	// The target is signed for minutes: no cache may keep the redirect.
	hdr.Set("Cache-Control", "no-store")
	hdr["X-Attempts"] = attemptsValue(red.Attempts)
	w.WriteHeader(http.StatusTemporaryRedirect)
}

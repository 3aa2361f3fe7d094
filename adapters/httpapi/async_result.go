package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"fngateway/core"
	"fngateway/core/async"
	"fngateway/internal/settings"
)

// inlineLimit is AsyncInlineResultBytes, or its default when unset.
func (h *Handler) inlineLimit() int64 {
	if n := h.Settings.AsyncInlineResultBytes; n > 0 {
		return int64(n)
	}
	return int64(settings.DefaultSettings().AsyncInlineResultBytes)
}

// serveResult answers the status URI of a finished request with the result
// itself, replayed from the stored result: the backend's status, headers
// and body whatever the status, or the gateway's error (its status, JSON
// error, x-Gateway-Error). A 2xx result larger than AsyncInlineResultBytes
// is answered 303 See Other to a freshly signed data URL instead.
func (h *Handler) serveResult(w http.ResponseWriter, r *http.Request, st *async.StatusView) {
	res, err := h.Async.OpenResult(r.Context(), st)
	if h.statusFailed(w, r, st.ID, err) {
		return
	}
	defer res.Body.Close()
	hdr := w.Header()
	var body io.Reader = res.Body
	if res.Status >= 200 && res.Status < 300 {
		limit := h.inlineLimit()
		head, err := io.ReadAll(io.LimitReader(res.Body, limit+1))
		if err != nil {
			h.statusFailed(w, r, st.ID, err)
			return
		}
		if int64(len(head)) > limit {
			hdr.Set("Location", h.absolute(r, st.DataURI))
			hdr["X-Attempts"] = attemptsValue(len(st.Attempts))
			w.WriteHeader(http.StatusSeeOther)
			return
		}
		body = bytes.NewReader(head)
		hdr.Set("Content-Length", strconv.Itoa(len(head)))
	}
	if st.ResultCode != "" {
		// The gateway's error, stored by a continuation: it says no more
		// than PublicMessage allows, whatever was stored.
		doc, err := io.ReadAll(io.LimitReader(res.Body, maxErrorDoc))
		if err != nil {
			h.statusFailed(w, r, st.ID, err)
			return
		}
		doc = h.publicErrorDoc(r, st.ResultCode, doc)
		body = bytes.NewReader(doc)
		hdr.Set("Content-Length", strconv.Itoa(len(doc)))
	}
	for k, v := range res.Header {
		if k == "Content-Length" {
			continue // the stored body says how long it is
		}
		hdr[k] = v
	}
	core.RemoveHopHeaders(hdr)
	if hdr.Get("X-Attempts") == "" {
		hdr["X-Attempts"] = attemptsValue(len(st.Attempts))
	}
	w.WriteHeader(res.Status)
	if r.Method == http.MethodHead {
		return
	}
	if err := copyBody(w, body, false); err != nil {
		// The store broke off mid-body: the client sees the transfer
		// break, never a truncated answer taken for whole.
		h.clientLog.Log(r.Context(), h.Logger, slog.LevelWarn, "replaying an async result", slog.String("id", st.ID), slog.String("err", err.Error()))
		panic(http.ErrAbortHandler)
	}
}

// operationDoc is the operation URI's document: the status monitor of the
// Azure REST API guidelines for long-running operations.
type operationDoc struct {
	ID               string          `json:"id"`
	Status           string          `json:"status"`
	Created          string          `json:"createdDateTime"`
	Updated          string          `json:"lastUpdatedDateTime"`
	Error            *operationError `json:"error,omitempty"`
	ResourceLocation string          `json:"resourceLocation,omitempty"`
}

type operationError struct {
	Code       string `json:"code"`
	Message    string `json:"message"`
	InnerError struct {
		Status int `json:"status"`
	} `json:"innererror"`
}

// operationOf builds the operation document of st.
func (h *Handler) operationOf(r *http.Request, st *async.StatusView) operationDoc {
	updated := st.Changed
	if st.State.Done() && !st.CompletedAt.IsZero() {
		updated = st.CompletedAt
	}
	d := operationDoc{ID: st.ID, Status: st.OperationStatus(),
		Created: st.Arrival.UTC().Format(time.RFC3339Nano), Updated: updated.UTC().Format(time.RFC3339Nano)}
	if code, msg, ok := st.OperationError(); ok {
		d.Error = &operationError{Code: code, Message: msg}
		d.Error.InnerError.Status = st.ResultStatus
	}
	if d.Status == async.OperationSucceeded {
		d.ResourceLocation = h.absolute(r, async.StatusPath(st.ID))
	}
	return d
}

// writeOperation writes st's operation document with status code, and
// Retry-After while it is not terminal.
func (h *Handler) writeOperation(w http.ResponseWriter, r *http.Request, code int, st *async.StatusView) {
	w.Header()["X-Attempts"] = attemptsValue(len(st.Attempts))
	if !st.State.Done() {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSecs(st.RetryAfter)))
	}
	writeJSON(w, code, h.operationOf(r, st))
}

// serveOperation answers an operation URI (docs/async-api.md#the-operation-uri-status-monitor): always 200 with
// the operation document while the request can be read, and the status
// URI's errors otherwise (404, 410 Expired, 500 CorruptRecord).
func (h *Handler) serveOperation(w http.ResponseWriter, r *http.Request, id string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "operation URIs answer GET and HEAD", 0)
		return
	}
	st, err := h.Async.Status(r.Context(), id)
	if h.statusFailed(w, r, id, err) {
		return
	}
	h.writeOperation(w, r, http.StatusOK, st)
}

// serveCancel answers DELETE on a status URI (docs/async-api.md#cancellation): 202 with the
// operation document while the cancel takes effect, or 200 with it when
// the request had finished already (nothing changes then).
func (h *Handler) serveCancel(w http.ResponseWriter, r *http.Request, id string) {
	st, finished, err := h.Async.Cancel(r.Context(), id, r.Header)
	if h.statusFailed(w, r, id, err) {
		return
	}
	if finished {
		h.writeOperation(w, r, http.StatusOK, st)
		return
	}
	w.Header().Set("Location", h.absolute(r, async.StatusPath(st.ID)))
	w.Header().Set("Operation-Location", h.absolute(r, async.OperationPath(st.ID)))
	h.writeOperation(w, r, http.StatusAccepted, st)
}

// maxErrorDoc bounds a stored error document read back.
const maxErrorDoc = 64 << 10

// publicErrorDoc returns doc, a stored error document of code, with its
// message as PublicMessage allows.
func (h *Handler) publicErrorDoc(r *http.Request, code string, doc []byte) []byte {
	var d struct {
		Error struct {
			Code     string         `json:"code"`
			Message  string         `json:"message"`
			Attempts []core.Attempt `json:"attempts"`
		} `json:"error"`
	}
	if json.Unmarshal(doc, &d) != nil || d.Error.Code != code {
		d.Error.Code, d.Error.Message, d.Error.Attempts = code, "", nil
	}
	reason, _ := reasonOfCode(code)
	e := &core.Error{Reason: reason, Message: d.Error.Message, Attempts: d.Error.Attempts}
	return core.ErrorJSON(code, h.publicError(r.Context(), e).Message, d.Error.Attempts)
}

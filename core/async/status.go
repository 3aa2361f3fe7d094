package async

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"fngateway/core"
)

// OperationSuffix ends the path of an operation URI (the status
// monitor of docs/async-api.md#the-operation-uri-status-monitor): StatusPrefix + id + OperationSuffix.
const OperationSuffix = "/operation"

// StatusPath returns the path of request id's status URI.
func StatusPath(id string) string { return StatusPrefix + id }

// OperationPath returns the path of request id's operation URI.
func OperationPath(id string) string { return StatusPrefix + id + OperationSuffix }

// The statuses of an operation URI's document, as the Azure REST API
// guidelines name them for long-running operations.
const (
	OperationNotStarted = "NotStarted"
	OperationRunning    = "Running"
	OperationSucceeded  = "Succeeded"
	OperationFailed     = "Failed"
	OperationCanceled   = "Canceled"
)

// operationStatus maps a request's state and, once done, its result's
// status to the operation document's status: Succeeded only for a 2xx
// result, Canceled for the cancellation, Failed for any other ending.
func operationStatus(state State, resultStatus int) string {
	switch state {
	case StateQueued:
		return OperationNotStarted
	case StateRunning, StateCancelling:
		return OperationRunning
	case StateCanceled:
		return OperationCanceled
	}
	if resultStatus >= 200 && resultStatus < 300 {
		return OperationSucceeded
	}
	return OperationFailed
}

// OperationStatus returns v's status as the operation document states it:
// NotStarted, Running, Succeeded, Failed or Canceled.
func (v *StatusView) OperationStatus() string { return operationStatus(v.State, v.ResultStatus) }

// OperationError returns the error code and message of a request that
// ended Failed or Canceled: the gateway's code for a gateway-made ending,
// BackendStatus for a backend's answer that was not 2xx. ok is false for
// any other status.
func (v *StatusView) OperationError() (code, message string, ok bool) {
	switch v.OperationStatus() {
	case OperationFailed, OperationCanceled:
	default:
		return "", "", false
	}
	if v.State == StateCanceled {
		return core.ReasonCanceled.Code(), "the request was cancelled by its client (DELETE on its status URI)", true
	}
	if v.ResultCode != "" {
		return v.ResultCode, fmt.Sprintf("the gateway ended the request: %s (status %d); the status URI answers its error document",
			v.ResultCode, v.ResultStatus), true
	}
	return "BackendStatus", fmt.Sprintf("the backend answered status %d; the status URI answers it", v.ResultStatus), true
}

// storedResult is the committed result of a finished request, as the
// status URI replays it.
type storedResult struct {
	// Status and Header are the result's, from its header blob (the
	// backend's answer, or the gateway's error with its x-Gateway-Error
	// and x-Attempts).
	Status int
	Header http.Header
	// Body is the data blob; the caller closes it.
	Body io.ReadCloser
}

// OpenResult opens the result of v, a finished request's view from
// Status. It fails for a view that is not done, and with an error wrapping
// ErrNotFound when the result blobs are gone (swept).
func (a *Async) OpenResult(ctx context.Context, v *StatusView) (*storedResult, error) {
	if !v.State.Done() || v.container == "" {
		return nil, fmt.Errorf("async result %s: not finished", v.ID)
	}
	rc, err := a.Store.OpenBlob(ctx, asyncHeaderKey(v.container, v.ID))
	if err != nil {
		return nil, fmt.Errorf("async result %s: open header blob: %w", v.ID, err)
	}
	var h resultHeader
	err = json.NewDecoder(io.LimitReader(rc, maxHeaderBlobBytes)).Decode(&h)
	rc.Close()
	if err != nil {
		return nil, fmt.Errorf("async result %s: decode header blob: %w", v.ID, err)
	}
	if h.Status < 100 || h.Status > 999 {
		return nil, fmt.Errorf("async result %s: header blob status %d", v.ID, h.Status)
	}
	body, err := a.Store.OpenBlob(ctx, asyncDataKey(v.container, v.ID))
	if err != nil {
		return nil, fmt.Errorf("async result %s: open data blob: %w", v.ID, err)
	}
	if h.Headers == nil {
		h.Headers = http.Header{}
	}
	if h.Headers.Get("X-Attempts") == "" {
		h.Headers.Set("X-Attempts", strconv.Itoa(len(h.Attempts)))
	}
	return &storedResult{Status: h.Status, Header: h.Headers, Body: body}, nil
}

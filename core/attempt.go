package core

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"
)

// Outcome says how one attempt ended.
type Outcome string

// The outcomes recorded in an attempt timeline (docs/deadlines.md#status-codes).
const (
	OutcomeStatus        Outcome = "status"         // the backend answered
	OutcomeTimeout       Outcome = "timeout"        // a deadline cut it
	OutcomeConnectError  Outcome = "connect-error"  // no answer at connection level
	OutcomeFunctionLimit Outcome = "function-limit" // the execution limit cut it
)

// Attempt is one entry of a request's attempt timeline.
type Attempt struct {
	Host       string  `json:"host"`
	Status     int     `json:"status,omitempty"`
	Outcome    Outcome `json:"outcome"`
	DurationMs int64   `json:"durationMs"`
	// Failure says why an attempt that brought no answer failed, and
	// Phase how far it got (also an answer whose body broke off:
	// CutInBody); both empty for an answer received whole.
	Failure Failure `json:"cause,omitempty"`
	Phase   Phase   `json:"phase,omitempty"`
	// Cause is the deadline that ended a timed-out attempt.
	Cause Cause `json:"-"`
	// Hedge marks an attempt started beside a still-running one when its
	// per-try Timeout fired (hedge_on_per_try_timeout; Stats.Hedges).
	Hedge bool `json:"-"`
	// Ejected marks the attempt whose failure ejected its host from the
	// route (Ejector; Stats.Ejections): the per-request log line counts it.
	Ejected bool `json:"-"`
	// Label names the host as x-Backend-Host does (Route.HostLabel).
	Label string `json:"-"`
}

// Reason says why a request ended without a response to pass through.
type Reason uint8

// The reasons, each one row of the table of docs/deadlines.md#status-codes.
const (
	ReasonNone               Reason = iota
	ReasonInvalidTTL                // 400 InvalidTTL
	ReasonInvalidTimeout            // 400 InvalidTimeout
	ReasonTTLExpired                // 412 before any attempt, 504 after
	ReasonAttemptTimeout            // 504
	ReasonFunctionLimit             // 504
	ReasonBackendUnavailable        // 502
	ReasonAsyncUnavailable          // 503
	ReasonClientGone                // the client left; nothing is sent
	ReasonInvalidPath               // 400: the path has a .. segment
	ReasonRequestTimeout            // 408: the client's body did not arrive in time
	ReasonUpgradeUnsupported        // 501: the host cannot hold an upgraded connection
	// ReasonIdempotencyKeyReused: an Idempotency-Key already used for a
	// different async request (method, path, query or body): 422.
	ReasonIdempotencyKeyReused
	// ReasonExpired: an async request past its expiry and read grace: 410.
	ReasonExpired
	// ReasonCorruptRecord: an async request whose record cannot be
	// decoded; it never completes: 500.
	ReasonCorruptRecord
	// ReasonInvalidBody: the request body is malformed (bad chunked
	// framing): 400.
	ReasonInvalidBody
	// ReasonCanceled: an async request its client cancelled (DELETE on
	// its status URI): 409.
	ReasonCanceled
	// ReasonBackendAuthFailed: the route's backend credential (auth)
	// could not be had; nothing was sent: 502.
	ReasonBackendAuthFailed
	// ReasonMethodNotAllowed: a method the route does not allow
	// (Route.Admit): 405.
	ReasonMethodNotAllowed
	// ReasonHeaderNotAllowed and ReasonQueryNotAllowed: a client header or
	// query parameter a route with auth does not pass (Route.Admit): 400.
	ReasonHeaderNotAllowed
	ReasonQueryNotAllowed
	// ReasonResponseTooLarge: the backend's answer costs more than the
	// host can send (HostCaps.Response); the gateway stopped reading it
	// and cancelled its upstream: 502.
	ReasonResponseTooLarge
)

// Code returns the contract's error code for r.
func (r Reason) Code() string {
	switch r {
	case ReasonInvalidTTL:
		return "InvalidTTL"
	case ReasonInvalidTimeout:
		return "InvalidTimeout"
	case ReasonTTLExpired:
		return "TTLExpired"
	case ReasonAttemptTimeout:
		return "AttemptTimeout"
	case ReasonFunctionLimit:
		return "FunctionLimit"
	case ReasonBackendUnavailable:
		return "BackendUnavailable"
	case ReasonAsyncUnavailable:
		return "AsyncUnavailable"
	case ReasonClientGone:
		return "ClientClosedRequest"
	case ReasonInvalidPath:
		return "InvalidPath"
	case ReasonRequestTimeout:
		return "RequestTimeout"
	case ReasonUpgradeUnsupported:
		return "UpgradeUnsupported"
	case ReasonIdempotencyKeyReused:
		return "IdempotencyKeyReused"
	case ReasonExpired:
		return "Expired"
	case ReasonCorruptRecord:
		return "CorruptRecord"
	case ReasonInvalidBody:
		return "InvalidBody"
	case ReasonCanceled:
		return "Canceled"
	case ReasonBackendAuthFailed:
		return "BackendAuthFailed"
	case ReasonMethodNotAllowed:
		return "MethodNotAllowed"
	case ReasonHeaderNotAllowed:
		return "HeaderNotAllowed"
	case ReasonQueryNotAllowed:
		return "QueryNotAllowed"
	case ReasonResponseTooLarge:
		return "ResponseTooLarge"
	}
	return "Internal"
}

// Status returns the contract's HTTP status for r; attempted says whether
// any attempt reached a backend (it turns an expired TTL from 412 to 504).
// This is the table of docs/deadlines.md#status-codes, kept in core because async results record it.
func (r Reason) Status(attempted bool) int {
	switch r {
	case ReasonInvalidTTL, ReasonInvalidTimeout, ReasonInvalidPath, ReasonInvalidBody, ReasonHeaderNotAllowed, ReasonQueryNotAllowed:
		return http.StatusBadRequest
	case ReasonMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case ReasonRequestTimeout:
		return http.StatusRequestTimeout
	case ReasonUpgradeUnsupported:
		return http.StatusNotImplemented
	case ReasonTTLExpired:
		if !attempted {
			return http.StatusPreconditionFailed
		}
		return http.StatusGatewayTimeout
	case ReasonAttemptTimeout, ReasonFunctionLimit:
		return http.StatusGatewayTimeout
	case ReasonBackendUnavailable, ReasonBackendAuthFailed, ReasonResponseTooLarge:
		return http.StatusBadGateway
	case ReasonAsyncUnavailable:
		return http.StatusServiceUnavailable
	case ReasonClientGone:
		return 499
	case ReasonIdempotencyKeyReused:
		return http.StatusUnprocessableEntity
	case ReasonExpired:
		return http.StatusGone
	case ReasonCanceled:
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

// Error is a request that ended without a backend response to pass
// through. Callers branch on Reason; Attempts is the timeline so far.
type Error struct {
	Reason   Reason
	Message  string
	Attempts []Attempt
	// Err is the underlying cause, if any.
	Err error
}

func (e *Error) Error() string {
	if e.Message != "" {
		return e.Reason.Code() + ": " + e.Message
	}
	return e.Reason.Code()
}

func (e *Error) Unwrap() error { return e.Err }

// HTTPStatus returns the status the client gets for e.
func (e *Error) HTTPStatus() int { return e.Reason.Status(len(e.Attempts) > 0) }

// ReasonOf returns the Reason of err, or ReasonNone.
func ReasonOf(err error) Reason {
	var ge *Error
	if errors.As(err, &ge) {
		return ge.Reason
	}
	return ReasonNone
}

// durationMs rounds d to whole milliseconds for the timeline.
func durationMs(d time.Duration) int64 { return d.Milliseconds() }

// errorBody is the wire form of a gateway-made error (docs/deadlines.md#status-codes).
type errorBody struct {
	Error struct {
		Code     string    `json:"code"`
		Message  string    `json:"message"`
		Attempts []Attempt `json:"attempts"`
	} `json:"error"`
}

// ErrorJSON returns the contract's error document,
// {"error":{"code","message","attempts":[…]}}, for any gateway-made error:
// those of the attempt loop (see Error.JSON) and those of the gateway's own
// endpoints. A nil attempts is written as [].
func ErrorJSON(code, message string, attempts []Attempt) []byte {
	var b errorBody
	b.Error.Code = code
	b.Error.Message = message
	b.Error.Attempts = attempts
	if b.Error.Attempts == nil {
		b.Error.Attempts = []Attempt{}
	}
	out, _ := json.Marshal(&b)
	return out
}

// JSON returns e as the contract's error document.
func (e *Error) JSON() []byte {
	msg := e.Message
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	return ErrorJSON(e.Reason.Code(), msg, e.Attempts)
}

// AttemptsJSON returns the timeline as the error document writes it, a
// JSON array: the per-request log line's "upstream" (docs/observability.md).
func AttemptsJSON(attempts []Attempt) json.RawMessage {
	if len(attempts) == 0 {
		return json.RawMessage("[]")
	}
	b, _ := json.Marshal(attempts)
	return b
}

// InFlight returns the attempt a gateway timeout cut while it waited: the
// last one the timeline ended by a deadline, and whether there is one (a
// TTL that ran out during a backoff wait cut none).
func InFlight(attempts []Attempt) (Attempt, bool) {
	if n := len(attempts); n > 0 {
		if a := attempts[n-1]; a.Outcome == OutcomeTimeout || a.Outcome == OutcomeFunctionLimit {
			return a, true
		}
	}
	return Attempt{}, false
}

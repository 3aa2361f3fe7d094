package core

import (
	"errors"
	"sync/atomic"
)

// Stats counts requests and the deadlines that ended them, keeping each
// timeout source apart as Envoy keeps upstream_rq_timeout apart from
// upstream_rq_per_try_timeout. The zero value is ready; a nil *Stats counts
// nothing. All methods are safe for concurrent use.
type Stats struct {
	Requests atomic.Int64
	Attempts atomic.Int64
	Retries  atomic.Int64

	// Per-attempt deadlines that cut an attempt, by source.
	AttemptTimeoutTTL           atomic.Int64 // the request TTL fired during an attempt
	AttemptTimeoutPerTry        atomic.Int64 // the attempt's own Timeout fired
	AttemptTimeoutFunctionLimit atomic.Int64 // the execution limit fired

	// How requests ended without a backend answer.
	EndTTLExpired         atomic.Int64
	EndAttemptTimeout     atomic.Int64
	EndFunctionLimit      atomic.Int64
	EndBackendUnavailable atomic.Int64
	EndClientGone         atomic.Int64
	EndBadRequest         atomic.Int64 // InvalidTTL, InvalidTimeout, InvalidPath, UpgradeUnsupported, MethodNotAllowed, HeaderNotAllowed, QueryNotAllowed
	EndRequestTimeout     atomic.Int64 // the client's body did not arrive in time (408)

	// Streams aborted after their headers were sent.
	StreamIdleCut          atomic.Int64
	StreamFunctionLimitCut atomic.Int64
	StreamBackendCut       atomic.Int64 // the backend broke off its answer mid-body

	// Async hand-offs.
	AsyncAccepted atomic.Int64
	// AsyncRequeued and AsyncPredicted count the hand-offs of requests
	// every host throttled and of those predicted to outlast the trigger
	// (both among AsyncAccepted).
	AsyncRequeued, AsyncPredicted atomic.Int64
	AsyncUnavailable              atomic.Int64
	// AsyncNotificationsDropped counts lifecycle notifications dropped
	// because the background sender's queue was full.
	AsyncNotificationsDropped atomic.Int64
	// Async requests ended, by final state, in the process that
	// committed their result.
	AsyncSucceeded atomic.Int64
	AsyncFailed    atomic.Int64
	AsyncCanceled  atomic.Int64
	AsyncExpired   atomic.Int64

	// Upstream policy (docs/settings.md#upstream-policy-per-route).
	Hedges               atomic.Int64 // attempts started beside one whose Timeout fired
	RetryBudgetExhausted atomic.Int64 // retries or hedges the retry budget refused
	Ejections            atomic.Int64 // hosts ejected
	EndBackendAuthFailed atomic.Int64 // a route's backend credential could not be had

	// Answers by status class (CountStatus): the backend's or the
	// gateway's, 499 for a client that left, 202 for an async hand-off.
	Status2xx atomic.Int64
	Status3xx atomic.Int64
	Status4xx atomic.Int64
	Status5xx atomic.Int64
}

func (s *Stats) countTimeout(c Cause) {
	if s == nil {
		return
	}
	switch c {
	case CauseTTL:
		s.AttemptTimeoutTTL.Add(1)
	case CauseTimeout:
		s.AttemptTimeoutPerTry.Add(1)
	case CauseFunctionLimit:
		s.AttemptTimeoutFunctionLimit.Add(1)
	}
}

// CountRequest counts a request the gateway forwards (or refuses).
func (s *Stats) CountRequest() {
	if s != nil {
		s.Requests.Add(1)
	}
}

// CountStatus counts an answer with status code in its class
// (status_2xx … status_5xx); a code outside 200–599 (a 1xx, or none)
// counts in none.
func (s *Stats) CountStatus(code int) {
	if s == nil {
		return
	}
	switch code / 100 {
	case 2:
		s.Status2xx.Add(1)
	case 3:
		s.Status3xx.Add(1)
	case 4:
		s.Status4xx.Add(1)
	case 5:
		s.Status5xx.Add(1)
	}
}

// StatusClassName returns the /_gateway/stats counter CountStatus adds an
// answer with status code to ("status_5xx"), or "" when it counts none.
// The Embedded Metric Format line names its status class with it
// (TestStatusClassName).
func StatusClassName(code int) string {
	if code < 200 || code > 599 {
		return ""
	}
	return StatusClassNames[code/100-2]
}

// StatusClassNames are the counters of the status classes, 2xx to 5xx.
var StatusClassNames = [...]string{"status_2xx", "status_3xx", "status_4xx", "status_5xx"}

// CountBackendCut counts a response whose backend broke off mid-body, so
// the gateway aborted it to the client.
func (s *Stats) CountBackendCut() {
	if s != nil {
		s.StreamBackendCut.Add(1)
	}
}

// CountNotificationDropped counts a lifecycle notification dropped
// because the background sender's queue was full.
func (s *Stats) CountNotificationDropped() {
	if s != nil {
		s.AsyncNotificationsDropped.Add(1)
	}
}

// CountEnd counts a request that ended with reason r.
func (s *Stats) CountEnd(r Reason) { s.countEnd(r) }

func (s *Stats) countEnd(r Reason) {
	if s == nil {
		return
	}
	switch r {
	case ReasonTTLExpired:
		s.EndTTLExpired.Add(1)
	case ReasonAttemptTimeout:
		s.EndAttemptTimeout.Add(1)
	case ReasonFunctionLimit:
		s.EndFunctionLimit.Add(1)
	case ReasonBackendUnavailable:
		s.EndBackendUnavailable.Add(1)
	case ReasonClientGone:
		s.EndClientGone.Add(1)
	case ReasonInvalidTTL, ReasonInvalidTimeout, ReasonInvalidPath, ReasonUpgradeUnsupported, ReasonInvalidBody,
		ReasonMethodNotAllowed, ReasonHeaderNotAllowed, ReasonQueryNotAllowed:
		s.EndBadRequest.Add(1)
	case ReasonRequestTimeout:
		s.EndRequestTimeout.Add(1)
	case ReasonAsyncUnavailable:
		s.AsyncUnavailable.Add(1)
	case ReasonBackendAuthFailed:
		s.EndBackendAuthFailed.Add(1)
	}
}

// EndName returns the /_gateway/stats counter that CountEnd adds a request
// ending with r to ("end_ttl_expired", "async_unavailable", …), or "" when
// CountEnd counts none. The Embedded Metric Format line names its endings
// with it, so the two never disagree (TestEndName).
func (r Reason) EndName() string {
	switch r {
	case ReasonTTLExpired:
		return "end_ttl_expired"
	case ReasonAttemptTimeout:
		return "end_attempt_timeout"
	case ReasonFunctionLimit:
		return "end_function_limit"
	case ReasonBackendUnavailable:
		return "end_backend_unavailable"
	case ReasonClientGone:
		return "end_client_gone"
	case ReasonInvalidTTL, ReasonInvalidTimeout, ReasonInvalidPath, ReasonUpgradeUnsupported, ReasonInvalidBody,
		ReasonMethodNotAllowed, ReasonHeaderNotAllowed, ReasonQueryNotAllowed:
		return "end_bad_request"
	case ReasonRequestTimeout:
		return "end_request_timeout"
	case ReasonAsyncUnavailable:
		return "async_unavailable"
	case ReasonBackendAuthFailed:
		return "end_backend_auth_failed"
	}
	return ""
}

func (s *Stats) countCut(err error) {
	if s == nil {
		return
	}
	if errors.Is(err, ErrIdleTimeout) {
		s.StreamIdleCut.Add(1)
	} else {
		s.StreamFunctionLimitCut.Add(1)
	}
}

// Snapshot returns the counters as a name → value map, for /_gateway/stats.
// A nil *Stats gives zeros.
func (s *Stats) Snapshot() map[string]int64 {
	if s == nil {
		s = &Stats{}
	}
	return map[string]int64{
		"requests":                       s.Requests.Load(),
		"attempts":                       s.Attempts.Load(),
		"retries":                        s.Retries.Load(),
		"attempt_timeout_ttl":            s.AttemptTimeoutTTL.Load(),
		"attempt_timeout_per_try":        s.AttemptTimeoutPerTry.Load(),
		"attempt_timeout_function_limit": s.AttemptTimeoutFunctionLimit.Load(),
		"end_ttl_expired":                s.EndTTLExpired.Load(),
		"end_attempt_timeout":            s.EndAttemptTimeout.Load(),
		"end_function_limit":             s.EndFunctionLimit.Load(),
		"end_backend_unavailable":        s.EndBackendUnavailable.Load(),
		"end_client_gone":                s.EndClientGone.Load(),
		"end_bad_request":                s.EndBadRequest.Load(),
		"end_request_timeout":            s.EndRequestTimeout.Load(),
		"stream_idle_cut":                s.StreamIdleCut.Load(),
		"stream_function_limit_cut":      s.StreamFunctionLimitCut.Load(),
		"stream_backend_cut":             s.StreamBackendCut.Load(),
		"async_accepted":                 s.AsyncAccepted.Load(),
		"async_requeued":                 s.AsyncRequeued.Load(),
		"async_predicted":                s.AsyncPredicted.Load(),
		"async_unavailable":              s.AsyncUnavailable.Load(),
		"async_notifications_dropped":    s.AsyncNotificationsDropped.Load(),
		"async_succeeded":                s.AsyncSucceeded.Load(),
		"async_failed":                   s.AsyncFailed.Load(),
		"async_canceled":                 s.AsyncCanceled.Load(),
		"async_expired":                  s.AsyncExpired.Load(),
		"hedges":                         s.Hedges.Load(),
		"retry_budget_exhausted":         s.RetryBudgetExhausted.Load(),
		"ejections":                      s.Ejections.Load(),
		"end_backend_auth_failed":        s.EndBackendAuthFailed.Load(),
		"status_2xx":                     s.Status2xx.Load(),
		"status_3xx":                     s.Status3xx.Load(),
		"status_4xx":                     s.Status4xx.Load(),
		"status_5xx":                     s.Status5xx.Load(),
	}
}

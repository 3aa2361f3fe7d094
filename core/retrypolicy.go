package core

import (
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// retryPolicy is the retry rules of docs/deadlines.md#deadlines-and-retries in one value: how many
// attempts, the wait before each retry, which endings are retried for
// which requests, and how a request that gets no answer ends. Forward, the
// hedged loop and Explain all ask it, so the engine and its explanation
// cannot drift apart. It is a value: copy it freely.
type retryPolicy struct {
	// MaxAttempts bounds the attempts (at least one).
	MaxAttempts int
	// BackoffBase is the base of the jittered exponential wait between
	// attempts (backoff). Zero means no wait.
	BackoffBase time.Duration
	// Jitter returns the uniform random r in [0,1) of each wait; nil means
	// math/rand/v2's Float64. Explain uses one that returns 1: the worst
	// case.
	Jitter func() float64
	// RetryOn are the answer statuses that move on to the next host (the
	// route's RetryOn); nil means 429, 502, 503 and 504.
	RetryOn []int
}

// AttemptEnding is how an attempt ended, as the retry rules see it.
type AttemptEnding struct {
	// Record is the attempt's record: its Outcome, Status and Cause.
	Record Attempt
	// Refused says the attempt failed before the request left (its
	// connection was refused): always safe to retry.
	Refused bool
}

// Stop says why no attempt follows an attempt: the rules' verdict (Next),
// or a wait or a deadline that leaves no time for one. Forward, the hedged
// loop and Explain all stop for these reasons; Explain reports them
// (Timeline.Stop).
type Stop uint8

// The reasons to stop.
const (
	// StopAnswered: the last answer is not retried (a success, or a status
	// such as 404).
	StopAnswered Stop = iota + 1
	// StopDeadline: a deadline (the TTL or the execution limit) cut the
	// last attempt.
	StopDeadline
	// StopMaxAttempts: the last attempt was the last of MaxAttempts.
	StopMaxAttempts
	// StopNotSafe: the method is not retried after such an ending without
	// a client Idempotency-Key.
	StopNotSafe
	// StopBackoff: the next backoff wait would outlast the deadline
	// (Fits).
	StopBackoff
	// StopExpired: the time was over before the next attempt could start
	// (Expired).
	StopExpired
)

// Next says why no attempt follows attempt n of a request with method and
// ClientKey clientKey that ended as e, or 0 when the rules allow another
// one (its wait still has to fit: Fits). StopAnswered is an answer that is
// not retried; StopDeadline an attempt cut by the TTL or the execution
// limit; StopMaxAttempts the last allowed attempt; StopNotSafe an ending
// after which the method is not retried without a client Idempotency-Key
// (429 and 503 say the request was not processed: always retried).
func (p retryPolicy) Next(n int, method string, clientKey bool, e AttemptEnding) Stop {
	rec := e.Record
	if rec.Outcome == OutcomeStatus && !p.Retries(rec.Status) {
		return StopAnswered
	}
	switch {
	case rec.Outcome == OutcomeFunctionLimit || rec.Cause == CauseTTL:
		return StopDeadline
	case n >= max(p.MaxAttempts, 1):
		return StopMaxAttempts
	}
	safe := e.Refused || idempotent(method) || clientKey
	if rec.Outcome == OutcomeStatus && (rec.Status == http.StatusTooManyRequests || rec.Status == http.StatusServiceUnavailable) {
		safe = true
	}
	if !safe {
		return StopNotSafe
	}
	return 0
}

// MaySendTwice reports whether a request with method and ClientKey
// clientKey may run two attempts at once (hedging): a safe method, or a
// client Idempotency-Key. PUT and DELETE, retried after a timeout, are not
// sent twice at once without one.
func (retryPolicy) MaySendTwice(method string, clientKey bool) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return clientKey
}

// Wait returns the wait before the attempt after attempt n: the jittered
// backoff, or retryAfter (the backend's Retry-After) when longer.
func (p retryPolicy) Wait(n int, retryAfter time.Duration) time.Duration {
	var wait time.Duration
	if p.BackoffBase > 0 {
		r := p.Jitter
		if r == nil {
			r = rand.Float64
		}
		wait = backoff(p.BackoffBase, n, r())
	}
	return max(wait, retryAfter)
}

// Fits reports whether a wait may start with left before the request's
// end: no wait that outlasts the budget is started.
func (retryPolicy) Fits(wait, left time.Duration) bool {
	return wait < left
}

// Ending returns how a request ends whose last attempt, ending as rec,
// brought no answer to pass through: its Reason and Message (Attempts
// left for the caller).
func (retryPolicy) Ending(rec Attempt) Error {
	switch rec.Outcome {
	case OutcomeFunctionLimit:
		return Error{Reason: ReasonFunctionLimit, Message: "the execution limit cut the attempt"}
	case OutcomeTimeout:
		if rec.Cause == CauseTTL {
			return Error{Reason: ReasonTTLExpired, Message: "the request's TTL ran out during an attempt"}
		}
		return Error{Reason: ReasonAttemptTimeout, Message: "the last attempt ran out of its Timeout"}
	}
	return Error{Reason: ReasonBackendUnavailable, Message: "no backend could be reached"}
}

// Expired returns how a request ends whose time, the deadline c, was over
// before attempt n could start.
func (retryPolicy) Expired(c Cause, n int) Error {
	switch {
	case c == CauseFunctionLimit:
		return Error{Reason: ReasonFunctionLimit, Message: "the execution limit leaves no time for another attempt"}
	case n <= 1:
		return Error{Reason: ReasonTTLExpired, Message: "the request's TTL was over before any attempt started"}
	}
	return Error{Reason: ReasonTTLExpired, Message: "the request's TTL ran out"}
}

// backoff returns the wait before retry n (n ≥ 1) for a uniform random
// r in [0,1): r × min(10 × base, base × 2ⁿ⁻¹), as Envoy does.
func backoff(base time.Duration, n int, r float64) time.Duration {
	if base <= 0 || n < 1 {
		return 0
	}
	ceil := 10 * base
	if n < 5 {
		if c := base << (n - 1); c < ceil {
			ceil = c
		}
	}
	return time.Duration(r * float64(ceil))
}

// parseRetryAfter reads Retry-After as seconds or an HTTP date; zero if
// absent, unreadable or past.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 || n > MaxSeconds {
			return 0
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// Retries reports whether an answer with status code moves on to the next
// host.
func (p retryPolicy) Retries(code int) bool {
	if p.RetryOn != nil {
		return slices.Contains(p.RetryOn, code)
	}
	switch code {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// throttled follows whether every attempt of a request answered 429 or
// 503 with a Retry-After, and the shortest of those waits (Result.Throttled).
// The zero value is a request with no attempt yet.
type throttled struct {
	n        int
	broken   bool
	shortest time.Duration
}

// note adds an attempt's ending.
func (t *throttled) note(ar *attemptResult) {
	t.n++
	s := ar.record.Status
	if ar.record.Outcome != OutcomeStatus || s != http.StatusTooManyRequests && s != http.StatusServiceUnavailable || ar.retryAfter <= 0 {
		t.broken = true
		return
	}
	if t.shortest == 0 || ar.retryAfter < t.shortest {
		t.shortest = ar.retryAfter
	}
}

// after returns the shortest Retry-After when every attempt was
// throttled; zero otherwise. The caller asks once the request ends without
// another attempt (its attempts, its time for the wait or its retry budget
// spent).
func (t *throttled) after() time.Duration {
	if t.broken || t.n == 0 {
		return 0
	}
	return t.shortest
}

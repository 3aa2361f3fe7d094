package core

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryPolicyNext(t *testing.T) {
	status := func(code int) AttemptEnding {
		return AttemptEnding{Record: Attempt{Outcome: OutcomeStatus, Status: code}}
	}
	timeout := AttemptEnding{Record: Attempt{Outcome: OutcomeTimeout, Cause: CauseTimeout}}
	reset := AttemptEnding{Record: Attempt{Outcome: OutcomeConnectError}}
	refused := AttemptEnding{Record: Attempt{Outcome: OutcomeConnectError}, Refused: true}
	pol := retryPolicy{MaxAttempts: 3}
	tests := []struct {
		name   string
		n      int
		method string
		key    bool
		e      AttemptEnding
		want   Stop
	}{
		{"success", 1, http.MethodGet, false, status(200), StopAnswered},
		{"404 is an answer", 1, http.MethodGet, false, status(404), StopAnswered},
		{"500 is an answer", 1, http.MethodGet, false, status(500), StopAnswered},
		{"502 on GET", 1, http.MethodGet, false, status(502), 0},
		{"502 on POST", 1, http.MethodPost, false, status(502), StopNotSafe},
		{"502 on POST with a key", 1, http.MethodPost, true, status(502), 0},
		{"503 on POST: not processed", 1, http.MethodPost, false, status(503), 0},
		{"429 on PATCH: not processed", 1, http.MethodPatch, false, status(429), 0},
		{"timeout on PUT", 2, http.MethodPut, false, timeout, 0},
		{"timeout on POST", 1, http.MethodPost, false, timeout, StopNotSafe},
		{"reset on POST", 1, http.MethodPost, false, reset, StopNotSafe},
		{"refused on POST: never left", 1, http.MethodPost, false, refused, 0},
		{"the last attempt", 3, http.MethodGet, false, timeout, StopMaxAttempts},
		{"cut by the TTL", 1, http.MethodGet, false, AttemptEnding{Record: Attempt{Outcome: OutcomeTimeout, Cause: CauseTTL}}, StopDeadline},
		{"cut by the execution limit", 1, http.MethodGet, false, AttemptEnding{Record: Attempt{Outcome: OutcomeFunctionLimit, Cause: CauseFunctionLimit}}, StopDeadline},
		{"a deadline before the attempt count", 3, http.MethodGet, false, AttemptEnding{Record: Attempt{Outcome: OutcomeTimeout, Cause: CauseTTL}}, StopDeadline},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pol.Next(tt.n, tt.method, tt.key, tt.e); got != tt.want {
				t.Errorf("Next = %d, want %d", got, tt.want)
			}
		})
	}
	if got := (retryPolicy{}).Next(1, http.MethodGet, false, timeout); got != StopMaxAttempts {
		t.Errorf("zero MaxAttempts: Next = %d, want StopMaxAttempts (one attempt)", got)
	}
}

func TestRetryPolicyWait(t *testing.T) {
	const ms = time.Millisecond
	half := func() float64 { return 0.5 }
	tests := []struct {
		name       string
		pol        retryPolicy
		n          int
		retryAfter time.Duration
		want       time.Duration
	}{
		{"no base, no wait", retryPolicy{Jitter: half}, 3, 0, 0},
		{"no base, Retry-After", retryPolicy{Jitter: half}, 1, 2 * time.Second, 2 * time.Second},
		{"first retry", retryPolicy{BackoffBase: 100 * ms, Jitter: half}, 1, 0, 50 * ms},
		{"third retry", retryPolicy{BackoffBase: 100 * ms, Jitter: half}, 3, 0, 200 * ms},
		{"capped at ten times the base", retryPolicy{BackoffBase: 100 * ms, Jitter: half}, 9, 0, 500 * ms},
		{"Retry-After longer", retryPolicy{BackoffBase: 100 * ms, Jitter: half}, 1, time.Second, time.Second},
		{"Retry-After shorter", retryPolicy{BackoffBase: 100 * ms, Jitter: half}, 3, 10 * ms, 200 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.pol.Wait(tt.n, tt.retryAfter); got != tt.want {
				t.Errorf("Wait(%d, %v) = %v, want %v", tt.n, tt.retryAfter, got, tt.want)
			}
		})
	}
	// Without a Jitter the wait is random within [0, the ceiling).
	pol := retryPolicy{BackoffBase: 100 * ms}
	for range 100 {
		if w := pol.Wait(2, 0); w < 0 || w >= 200*ms {
			t.Fatalf("Wait(2) = %v, want in [0, 200ms)", w)
		}
	}
	if pol.Fits(time.Second, time.Second) || !pol.Fits(time.Second-1, time.Second) {
		t.Error("Fits: a wait must end before the deadline")
	}
}

func TestRetryPolicyEnding(t *testing.T) {
	var pol retryPolicy
	tests := []struct {
		rec  Attempt
		want Reason
	}{
		{Attempt{Outcome: OutcomeFunctionLimit, Cause: CauseFunctionLimit}, ReasonFunctionLimit},
		{Attempt{Outcome: OutcomeTimeout, Cause: CauseTTL}, ReasonTTLExpired},
		{Attempt{Outcome: OutcomeTimeout, Cause: CauseTimeout}, ReasonAttemptTimeout},
		{Attempt{Outcome: OutcomeConnectError}, ReasonBackendUnavailable},
	}
	for _, tt := range tests {
		if e := pol.Ending(tt.rec); e.Reason != tt.want || e.Message == "" {
			t.Errorf("Ending(%+v) = %v %q, want %v with a message", tt.rec, e.Reason, e.Message, tt.want)
		}
	}
	if e := pol.Expired(CauseFunctionLimit, 2); e.Reason != ReasonFunctionLimit {
		t.Errorf("Expired(function limit) = %v", e.Reason)
	}
	first, later := pol.Expired(CauseTTL, 1), pol.Expired(CauseTTL, 2)
	if first.Reason != ReasonTTLExpired || later.Reason != ReasonTTLExpired || first.Message == later.Message {
		t.Errorf("Expired(TTL) = %v %q, then %v %q: want TTLExpired, saying whether any attempt started", first.Reason, first.Message, later.Reason, later.Message)
	}
}

// TestRetryPolicyMaySendTwice: only safe methods, or any method with a
// client Idempotency-Key, run two attempts at once.
func TestRetryPolicyMaySendTwice(t *testing.T) {
	tests := []struct {
		method    string
		clientKey bool
		want      bool
	}{
		{http.MethodGet, false, true},
		{http.MethodHead, false, true},
		{http.MethodOptions, false, true},
		{http.MethodTrace, false, true},
		{http.MethodPut, false, false},
		{http.MethodDelete, false, false},
		{http.MethodPost, false, false},
		{http.MethodPatch, false, false},
		{http.MethodPost, true, true},
		{http.MethodPut, true, true},
	}
	for _, tt := range tests {
		if got := (retryPolicy{}).MaySendTwice(tt.method, tt.clientKey); got != tt.want {
			t.Errorf("MaySendTwice(%s, clientKey %v) = %v; want %v", tt.method, tt.clientKey, got, tt.want)
		}
	}
}

package core

import "sync/atomic"

// RetryBudget bounds the retries on one instance, as Envoy's retry_budget:
// a retry or a hedge starts only while the retries in flight stay under
// max(MinConcurrency, Percent × requests in flight / 100). Retries multiply
// load exactly when a backend is already failing; the budget keeps that
// extra load in proportion. A retry is in flight from the moment it is
// decided (its backoff wait included) until its attempt ends.
//
// The zero value allows no retry at all (use NewRetryBudget); a nil
// *RetryBudget allows every retry. Methods are safe
// for concurrent use. State is per instance: each Lambda execution
// environment and each Azure instance keeps its own.
type RetryBudget struct {
	// Percent of the requests in flight that may be retrying at once.
	Percent int64
	// MinConcurrency is the number of retries always allowed in flight,
	// however few the requests.
	MinConcurrency int64

	requests atomic.Int64
	retries  atomic.Int64
}

// NewRetryBudget returns a budget of percent (of the requests in flight)
// and minConcurrency retries.
func NewRetryBudget(percent, minConcurrency int64) *RetryBudget {
	return &RetryBudget{Percent: percent, MinConcurrency: minConcurrency}
}

// begin counts a request in flight until end.
func (b *RetryBudget) begin() {
	if b != nil {
		b.requests.Add(1)
	}
}

func (b *RetryBudget) end() {
	if b != nil {
		b.requests.Add(-1)
	}
}

// limit is the number of retries allowed in flight now.
func (b *RetryBudget) limit() int64 {
	return max(b.MinConcurrency, b.Percent*b.requests.Load()/100)
}

// acquire takes a retry slot, reporting false when the budget is spent.
func (b *RetryBudget) acquire() bool {
	if b == nil {
		return true
	}
	for {
		n := b.retries.Load()
		if n >= b.limit() {
			return false
		}
		if b.retries.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release returns a slot taken by acquire.
func (b *RetryBudget) release() {
	if b != nil {
		b.retries.Add(-1)
	}
}

// InFlight returns the requests and the retries in flight now.
func (b *RetryBudget) InFlight() (requests, retries int64) {
	if b == nil {
		return 0, 0
	}
	return b.requests.Load(), b.retries.Load()
}

// room reports whether a retry could start now, without taking a slot.
func (b *RetryBudget) room() bool {
	return b == nil || b.retries.Load() < b.limit()
}

// retrySlot decides whether a retry or a hedge may start, counting
// retry_budget_exhausted when it may not; held says it took a RetryBudget
// slot, to be released when its attempt ends. chosen says the attempt
// before it was cut by a deadline the client shortened below the route's
// own (Budget.Chosen): such a retry is no sign of a failing backend, so it
// holds no slot and cannot spend the budget that other clients' retries
// need, but it starts only while the budget has room, so it adds nothing
// when backends are really failing.
func (f *Forwarder) retrySlot(chosen bool) (ok, held bool) {
	if chosen && f.RetryBudget.room() {
		return true, false
	}
	if !chosen && f.RetryBudget.acquire() {
		return true, true
	}
	if f.Stats != nil {
		f.Stats.RetryBudgetExhausted.Add(1)
	}
	return false, false
}

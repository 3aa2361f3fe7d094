package async

import (
	"context"
	"time"

	"fngateway/core"
)

// engine is what the parts behind the façade share: Async's ports and
// settings, defaults applied, and its hooks. Async builds one per call
// (Async.engine); the hand-off, the worker and the continuation each
// embed it. An engine is a plain value; it points to Async's notifier and
// cancelListeners, which are safe for concurrent use.
type engine struct {
	store   Store
	queue   Queue
	records records
	notes   sender
	cancels *cancelListeners
	fwd     *core.Forwarder
	router  *core.Router
	// ttl, lease and retryAfter are Async's, defaults applied; timeout and
	// margin are Async.Timeout and Async.Margin.
	ttl, timeout, margin, lease, retryAfter time.Duration
	// poll is the Retry-After of a pending status, grown with its age.
	poll pollPolicy
	// scope is the idempotency scope headers, defaults applied.
	scope   []string
	stats   *core.Stats
	onError reporter
	onEnd   func(ctx context.Context, e End)
}

// engine returns a's parts and settings, defaults applied.
func (a *Async) engine() engine {
	t := a.tuned()
	e := engine{store: a.Store, queue: a.Queue, records: records{a.Store}, cancels: &a.cancels,
		fwd: t.Forwarder, router: t.Router, ttl: t.TTL, timeout: t.Timeout, margin: a.Margin, lease: a.Lease,
		retryAfter: asyncPoll, scope: a.ScopeHeaders, stats: a.Stats, onError: a.OnError, onEnd: a.OnEnd}
	e.notes = sender{port: a.Notifier, stats: a.Stats, onError: e.onError}
	if a.Host.WorkAfterAnswer {
		e.notes.queue = &a.notes
	}
	if e.fwd == nil {
		e.fwd = &core.Forwarder{}
	}
	if e.ttl <= 0 {
		e.ttl = defaultAsyncTTL
	}
	if e.lease <= 0 {
		e.lease = DefaultLease
	}
	// The poll interval: 2 s, or 1 s when attempts are shorter, at first.
	if t.Timeout > 0 && t.Timeout < asyncPoll {
		e.retryAfter = time.Second
	}
	e.poll = pollPolicy{first: e.retryAfter, max: max(a.PollMax, e.retryAfter)}
	if a.PollMax <= 0 {
		e.poll.max = defaultPollMax
	}
	if e.scope == nil {
		e.scope = DefaultIdempotencyScopeHeaders
	}
	return e
}

// idempotency returns the index over e's records and settings.
func (e engine) idempotency() idempotency {
	return idempotency{records: e.records, scope: e.scope, retryAfter: e.retryAfter}
}

// reporter hands the errors core cannot return to a caller to
// Async.OnError. A nil reporter drops them.
type reporter func(ctx context.Context, id string, err error)

// report hands err, about request id, to r, if set.
func (r reporter) report(ctx context.Context, id string, err error) {
	if r != nil {
		r(ctx, id, err)
	}
}

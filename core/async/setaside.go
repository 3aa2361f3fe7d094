package async

import (
	"context"
	"errors"
	"fmt"
	"time"

	"fngateway/core"
)

// ContinuationID returns the request id a continuation message names, and
// whether body is one the engine can decode (docs/async-api.md#corrupt-records-and-messages): what a store
// that sets a message aside uses to say which request it concerns.
func ContinuationID(body []byte) (string, bool) {
	c, err := decodeContinuation(body)
	return c.ID, err == nil
}

// EndSetAside ends request id, whose continuation message was set aside (a
// dead letter no queue will deliver again), with a result that says why: a
// gateway-made error, code Internal (500), whose message is reason, so that
// its status URI answers Failed instead of 202 running until its expiry
// (docs/operations.md#dead-letters). A request already finished, unknown, or held by a live
// claim (it runs: its holder writes its result) is left as it is; nil then
// too. Safe for concurrent use; at most one result is ever written.
func (a *Async) EndSetAside(ctx context.Context, id, reason string) error {
	if !validAsyncID(id) {
		return fmt.Errorf("end set-aside request: malformed id %.40q", id)
	}
	return worker{a.engine()}.endRequest(ctx, id, reason)
}

// endRequest claims request id and commits a gateway-made error saying
// reason, the attempts so far kept.
func (w worker) endRequest(ctx context.Context, id, reason string) error {
	now := time.Now()
	owner := newAsyncID()
	var seen bool
	rec, err := w.records.update(ctx, id, func(r *asyncRecord) (err error) {
		_, seen, err = r.claim(owner, now, now.Add(w.lease))
		return err
	})
	switch {
	case errors.Is(err, ErrNotFound), errors.Is(err, errNoop), errors.Is(err, errLeased), errors.Is(err, errBadRecord):
		return nil
	case err != nil:
		return fmt.Errorf("end request %s: claim: %w", id, err)
	}
	if rec.RequestID != "" {
		ctx = core.WithRequestID(ctx, rec.RequestID)
	}
	stopped := newCauseSignal()
	s := &continuation{engine: w.engine, rec: rec, owner: owner, stopped: stopped, endFn: func() { stopped.fire(context.Canceled) }}
	defer s.end()
	if seen {
		if done, err := s.adoptResult(ctx); err == nil && done {
			return nil // a holder that died had committed
		}
	}
	return s.commitError(ctx, &core.Error{Reason: core.ReasonNone, Message: reason, Attempts: rec.Attempts})
}

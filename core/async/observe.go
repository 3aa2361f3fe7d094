package async

import (
	"context"

	"fngateway/core"
)

// The async events of Observer (CONTRACT §7): the hand-off, and the
// continuation that links back to the request's trace.

func (a *Async) observer() core.Observer { return a.forwarder().Observer }

// traceContextKey carries the request's Observer.TraceContext from the
// hand-off to the record it writes.
type traceContextKey struct{}

// traceContextOf returns the trace context startHandoff kept in ctx, or "".
func traceContextOf(ctx context.Context) string {
	s, _ := ctx.Value(traceContextKey{}).(string)
	return s
}

// startHandoff starts observing a hand-off, and keeps the request's
// trace context in the returned context for its record.
func (a *Async) startHandoff(ctx context.Context) (context.Context, func(*Accepted, error)) {
	o := a.observer()
	if o == nil {
		return ctx, func(*Accepted, error) {}
	}
	if tc := o.TraceContext(ctx); tc != "" {
		ctx = context.WithValue(ctx, traceContextKey{}, tc)
	}
	ctx, end := o.StartHandoff(ctx)
	return ctx, func(acc *Accepted, err error) {
		id := ""
		if acc != nil {
			id = acc.ID
		}
		end(id, err)
	}
}

// startContinuation starts observing the continuation of rec.
func (a *Async) startContinuation(ctx context.Context, rec *asyncRecord) (context.Context, func()) {
	o := a.observer()
	if o == nil {
		return ctx, func() {}
	}
	return o.StartContinuation(ctx, rec.ID, rec.Request.Trace, len(rec.Attempts))
}

// settleObserved is settle, observed as the continuation's result write.
func (a *Async) settleObserved(ctx context.Context, s *session, res *core.Result, ferr error) error {
	o := a.observer()
	if o == nil {
		return a.settle(ctx, s, res, ferr)
	}
	end := o.StartResultWrite(ctx, s.rec.ID)
	err := a.settle(ctx, s, res, ferr)
	end(err)
	return err
}

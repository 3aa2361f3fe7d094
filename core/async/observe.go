package async

import (
	"context"

	"fngateway/core"
)

// The async events of Observer (docs/observability.md#spans): the hand-off, and the
// continuation that links back to the request's trace.

func (e engine) observer() core.Observer { return e.fwd.Observer }

// traceContextKey carries the request's Observer.TraceContext from the
// hand-off to the record it writes.
type traceContextKey struct{}

// traceContextOf returns the trace context handoff.start kept in ctx, or "".
func traceContextOf(ctx context.Context) string {
	s, _ := ctx.Value(traceContextKey{}).(string)
	return s
}

// start starts observing a hand-off, and keeps the request's
// trace context in the returned context for its record.
func (h handoff) start(ctx context.Context) (context.Context, func(*Accepted, error)) {
	o := h.observer()
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
func (w worker) startContinuation(ctx context.Context, rec *asyncRecord) (context.Context, func()) {
	o := w.observer()
	if o == nil {
		return ctx, func() {}
	}
	return o.StartContinuation(ctx, rec.ID, rec.Request.Trace, len(rec.Attempts))
}

// settleObserved is settle, observed as the continuation's result write.
func (s *continuation) settleObserved(ctx context.Context, res *core.Result, ferr error) error {
	o := s.observer()
	if o == nil {
		return s.settle(ctx, res, ferr)
	}
	end := o.StartResultWrite(ctx, s.rec.ID)
	err := s.settle(ctx, res, ferr)
	end(err)
	return err
}

package core

import "context"

// The async events of Observer (CONTRACT §7): the hand-off, and the
// continuation that links back to the request's trace.

func (a *Async) observer() Observer { return a.forwarder().Observer }

// startHandoff starts observing req's hand-off, and keeps the request's
// trace context in req for its record.
func (a *Async) startHandoff(ctx context.Context, req *Request) (context.Context, func(*Accepted, error)) {
	o := a.observer()
	if o == nil {
		return ctx, func(*Accepted, error) {}
	}
	req.traceContext = o.TraceContext(ctx)
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
func (a *Async) settleObserved(ctx context.Context, s *session, res *Result, ferr error) error {
	o := a.observer()
	if o == nil {
		return a.settle(ctx, s, res, ferr)
	}
	end := o.StartResultWrite(ctx, s.rec.ID)
	err := a.settle(ctx, s, res, ferr)
	end(err)
	return err
}

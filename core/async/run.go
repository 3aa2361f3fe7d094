package async

import (
	"context"
	"errors"
	"fmt"
	"time"

	"fngateway/core"
)

// handoffTimeout bounds the durable writes of a hand-off, which go on even
// if the client leaves meanwhile.
const handoffTimeout = 10 * time.Second

// errHandedOff is the cause of an in-flight attempt cancelled at the
// hand-off: its continuation runs from the queue.
var errHandedOff = errors.New("handed off to the queue")

type forwarded struct {
	res *core.Result
	err error
}

// close closes the response body, if any.
func (f forwarded) close() {
	if f.res != nil && f.res.Response != nil && f.res.Response.Body != nil {
		f.res.Response.Body.Close()
	}
}

// Run forwards req, a request that may go async (docs/async-api.md#when-a-request-goes-async), and races
// the backend's answer against the hand-off. Exactly one of its results is
// set:
//
//   - A Result when the backend answered first: the caller relays it in
//     line and closes its body. The attempt is tied to ctx from then on, as
//     an ordinary request's is.
//   - An Accepted, for the 202, once the request is handed off: at
//     TriggerTimeout after arrival, or earlier at req.Budget.Limit (the
//     execution limit less the margin), or when the attempts were cut by
//     that limit. The hand-off is durable (record, body and queue message
//     written, the Queued notification sent or queued) before Run returns.
//   - An error otherwise: the attempts' *Error when they ended first (with
//     ReasonClientGone when ctx ended before the hand-off), or Submit's
//     *Error when the hand-off could not be made durable.
//
// Before anything is forwarded, a client's Idempotency-Key seen before is
// answered from the idempotency index (idempotency.replay): the first submission's
// Accepted, or a ReasonIdempotencyKeyReused *Error; the backend is not
// called.
//
// Once async, the request lives by the async budget: TTL from arrival and
// Timeout per attempt.
//
// What becomes of the attempt in flight at the hand-off depends on the host
// and on the instance's load. Where the host may work after answering
// (Host.WorkAfterAnswer) and a slot of Continuations is free (and the
// profile holds fewer than its share, Continuations.PerProfile), it goes on in
// this process and finishes the request itself, holding the claim (its
// lease renewed by a heartbeat) and the slot until it is done; its queue
// message is delayed to the lease's end, so a queue worker takes over only
// if this process dies. Otherwise — a host frozen once it answers (Lambda),
// no free slot, or a hand-off forced by the execution limit — the attempt
// is cancelled before Run returns (the backend sees its connection close)
// and the continuation runs from the queue, sent again with the same
// Idempotency-Key. The in-process finish stops at Continuations' shutdown:
// its claim is released and a message left for another instance.
func (a *Async) Run(ctx context.Context, req *core.Request, profile *core.Profile) (*core.Result, *Accepted, error) {
	e := a.engine()
	if acc, err := e.idempotency().replay(ctx, req, profile); err != nil || acc != nil {
		return nil, acc, err
	}
	if req.Budget.Arrival.IsZero() {
		req.Budget.Arrival = time.Now()
	}
	arrival := req.Budget.Arrival
	req.Budget.TTL = arrival.Add(e.ttl)
	req.Budget.Timeout = e.timeout
	trigger, atLimit := arrival.Add(a.triggerTimeout()), false
	if l := req.Budget.Limit; !l.IsZero() && l.Before(trigger) {
		trigger, atLimit = l, true
	}
	route := req.Route.Prefix
	if a.Predictor.predict(route) {
		acc, err := a.handOffNow(ctx, req, profile, 0, ReasonPredicted)
		return nil, acc, err
	}

	// The attempt may outlive ctx (it may finish after the 202), so it is
	// detached from it; until the hand-off, ctx ending ends it too.
	fctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	unhook := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	done := make(chan forwarded, 1)
	go func() {
		res, err := e.fwd.Forward(fctx, req)
		done <- forwarded{res, err}
	}()
	timer := time.NewTimer(time.Until(trigger))
	defer timer.Stop()
	var cut *core.Error // attempts cut by the execution limit: hand off
	select {
	case f := <-done:
		if errors.As(f.err, &cut) && cut.Reason == core.ReasonFunctionLimit {
			break
		}
		if f.err != nil {
			cancel(context.Canceled)
			return nil, nil, f.err
		}
		a.Predictor.observe(route, time.Since(arrival) > a.triggerTimeout())
		if d := a.requeueAfter(f.res, req.Budget.TTL); d > 0 {
			f.close()
			cancel(context.Canceled)
			acc, err := a.handOffNow(ctx, req, profile, d, ReasonRequeued)
			return nil, acc, err
		}
		// In line: the response streams to the client under ctx.
		return f.res, nil, nil
	case <-ctx.Done():
		f := <-done // the hook cancelled the attempt
		f.close()
		return nil, nil, &core.Error{Reason: core.ReasonClientGone, Attempts: attemptsOf(f.err), Err: context.Cause(ctx)}
	case <-timer.C:
	}
	reason := ReasonTrigger
	if cut != nil || atLimit {
		reason = ReasonFunctionLimit
	} else {
		a.Predictor.observe(route, true)
	}

	var (
		work    context.Context
		release = func() {}
	)
	inflight := false
	if cut == nil && !atLimit && a.Host.WorkAfterAnswer {
		if wctx, rel, ok := a.Continuations.TryStartFor(profileID(profile)); ok {
			if unhook() {
				work, release, inflight = wctx, rel, true
			} else {
				rel() // the client left at this very moment
			}
		}
	}
	if !inflight {
		// Cancelled before the answer: the backend sees it go, and a host
		// frozen after answering leaves nothing running.
		cancel(errHandedOff)
		if cut == nil {
			defer func() { (<-done).close() }()
		}
	}
	// The hand-off must end while the invocation can still answer
	// (handoffContext).
	sctx, scancel := a.handoffContext(ctx)
	acc, claim, err := a.Submit(sctx, req, profile, inflight)
	scancel()
	if acc != nil && err == nil {
		acc.Reason = reason
	}
	if err != nil || claim == nil {
		// Not durable, or an earlier submission with the same key owns the
		// request: this attempt is not needed.
		if inflight {
			cancel(errHandedOff)
			(<-done).close()
			release()
		}
		return nil, acc, err
	}
	// Listen for a cancel before the 202 leaves: a client may DELETE the
	// moment it has the status URI, before finishInProcess runs.
	unlisten := a.cancels.listen(claim.ID(), cancel)
	go a.finishInProcess(ctx, claim, work, done, cancel, func() { unlisten(); release() })
	return nil, acc, nil
}

// finishInProcess waits for the in-flight attempt of claim and ends the
// claim with its outcome; release frees its slot and stops listening for
// a cancel. The attempt stops early when the lease is lost
// to a queue worker or when work ends (the instance shuts down); either way
// Finish hands the request on or writes nothing, as its claim allows.
func (a *Async) finishInProcess(ctx context.Context, claim *Claim, work context.Context, done <-chan forwarded, cancel context.CancelCauseFunc, release func()) {
	defer release()
	defer cancel(context.Canceled)
	stop := context.AfterFunc(work, func() { cancel(context.Cause(work)) })
	defer stop()
	var f forwarded
	select {
	case f = <-done:
	case <-claim.Lost():
		// ErrLeaseLost, or ErrCancelRequested seen at a lease renewal.
		cancel(claim.lost.Cause())
		f = <-done
	}
	if err := a.Finish(context.WithoutCancel(ctx), claim, f.res, f.err); err != nil && !errors.Is(err, ErrLeaseLost) {
		reporter(a.OnError).report(ctx, claim.ID(), fmt.Errorf("async %s: finishing in-process: %w", claim.ID(), err))
	}
}

func (a *Async) triggerTimeout() time.Duration {
	if t := a.tuned().TriggerTimeout; t > 0 {
		return t
	}
	return defaultTriggerTimeout
}

// attemptsOf returns the attempts of an *Error, if err is one.
func attemptsOf(err error) []core.Attempt {
	var e *core.Error
	if errors.As(err, &e) {
		return e.Attempts
	}
	return nil
}

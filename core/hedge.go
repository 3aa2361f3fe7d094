package core

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"
)

// This file is hedging on the per-try timeout (docs/settings.md#hedging), Envoy's
// hedge_on_per_try_timeout: when an attempt's Timeout fires while the TTL
// still has time, the attempt is not cancelled; the next one starts beside
// it, and the first acceptable answer wins. Every other attempt still
// running is cancelled then, so its backend sees the connection closed.
// When the request ends is the attempt loop's to decide (loop.go); this file
// drives it with attempts in goroutines and real timers. The TTL and the
// execution limit cut every attempt.

// OutcomeCancelled is the outcome of an attempt its caller cut: a hedged
// attempt cancelled because another attempt of its request answered
// first, or any attempt running when the client left or cancelled the
// async request (DELETE on its status URI).
const OutcomeCancelled Outcome = "cancelled"

// errHedgeLost cancels the attempts that lost the race.
var errHedgeLost = errors.New("another hedged attempt answered first")

// hedgeable reports whether req may hedge: its route asks for it, the
// request may be sent twice (pol.MaySendTwice), its body is buffered, it
// is not an upgrade, and a Timeout bounds its attempts.
func hedgeable(req *Request, pol retryPolicy) bool {
	if !req.Route.HedgeOnPerTryTimeout || req.BodyStream != nil || req.Upgrade != "" || req.Budget.Timeout <= 0 {
		return false
	}
	return pol.MaySendTwice(req.Method, req.ClientKey)
}

// hedgeSlot is one attempt of a hedged request, owned by the loop.
type hedgeSlot struct {
	host     *url.URL
	start    time.Time
	cancel   context.CancelCauseFunc
	ar       *attemptResult // once done
	done     bool
	retrying bool // holds a RetryBudget slot
	hedge    bool // started beside a running attempt (Attempt.Hedge)
}

type hedgeDone struct {
	i  int
	ar *attemptResult
}

// hedgeRun is the state of one hedged request.
type hedgeRun struct {
	f            *Forwarder
	rt           http.RoundTripper
	req          *Request // Informational off: attempts run side by side
	path         target
	hosts        HostList
	streamCtx    context.Context
	streamCancel context.CancelFunc
	pol          retryPolicy
	slots        []*hedgeSlot
	running      int
	results      chan hedgeDone
}

// forwardHedged is Forward for a hedgeable request: it drives the attempt
// loop (loop.go) with each attempt in its own goroutine, a timer for the
// latest attempt's Timeout and one for the backoff waits.
func (f *Forwarder) forwardHedged(ctx, streamCtx context.Context, streamCancel context.CancelFunc, rt http.RoundTripper, req *Request, path target, hosts HostList, pol retryPolicy) (*Result, error) {
	hreq := *req
	hreq.Informational = nil // 1xx answers cannot be relayed from attempts side by side
	h := &hedgeRun{f: f, rt: rt, req: &hreq, path: path, hosts: hosts, streamCtx: streamCtx, streamCancel: streamCancel,
		pol: pol, results: make(chan hedgeDone, pol.MaxAttempts)}
	defer h.release()
	l := newLoop(pol, req.Method, req.ClientKey, req.Budget, true)
	var perTry, wait *time.Timer // the latest attempt's Timeout, and the backoff
	var perTryC, waitC <-chan time.Time
	var armed time.Time // when perTry fires; zero: stopped
	defer func() {
		if perTry != nil {
			perTry.Stop()
		}
		if wait != nil {
			wait.Stop()
		}
	}()
	held := false // the attempt about to start holds a RetryBudget slot
	defer func() {
		if held {
			f.RetryBudget.release()
		}
	}()
	var last *attemptResult // the latest attempt's, once ended
	now := time.Now()
	act := l.begin(now)
	for {
		if act.timedOut {
			f.Stats.countTimeout(CauseTimeout)
		}
		switch act.kind {
		case actStart:
			h.start(now, held, act.hedge)
			held, last = false, nil
		case actSlot:
			var ok bool
			ok, held = f.takeSlot(act)
			act = l.slot(now, ok)
			continue
		case actWait:
			last.close()
			f.observeBackoff(ctx, l.started, act.wait)
			wait = time.NewTimer(act.wait)
			waitC = wait.C
		case actAnswer:
			if ar := h.slots[act.i].ar; ar != last {
				last.close() // the latest attempt's failed answer, kept until now
			}
			h.cancelAll()
			return f.deliver(h.slots[act.i].ar, h.records(-1), req.Route, streamCancel), nil
		case actGiveUp:
			return h.finish(h.slots[act.i].ar)
		case actTimeout:
			h.cancelAll()
			streamCancel()
			return nil, f.failure(pol, perTryTimeout, h.records(-1))
		case actExpired:
			h.cancelAll()
			streamCancel()
			return nil, f.expired(pol, act.cause, h.records(-1), act.i+1)
		}
		// Wait for the next event, the latest attempt's Timeout armed as
		// the loop says.
		if !l.due.Equal(armed) {
			armed, perTryC = l.due, nil
			switch {
			case armed.IsZero():
				perTry.Stop()
			case perTry == nil:
				perTry = time.NewTimer(armed.Sub(now))
			default:
				perTry.Reset(armed.Sub(now))
			}
			if !armed.IsZero() {
				perTryC = perTry.C
			}
		}
		select {
		case d := <-h.results:
			now = time.Now()
			h.running--
			s := h.slots[d.i]
			s.ar, s.done = d.ar, true
			h.releaseSlot(s)
			ar := d.ar
			if ar.authErr != nil {
				h.cancelAll()
				streamCancel()
				return nil, f.authFailed(ar.authErr, h.records(d.i))
			}
			f.recordHost(req.Route, s.host, ar)
			if ar.clientGone {
				return nil, h.clientGone(ctx, ar)
			}
			act = l.ended(now, d.i, ar.ending(), ar.retryAfter)
			if d.i == l.started-1 {
				last = ar
			} else if act.kind != actAnswer {
				ar.close() // an older attempt's failure: the latest decides
			}
		case <-waitC:
			waitC = nil
			now = time.Now()
			act = l.waited(now)
		case <-perTryC:
			perTryC, armed = nil, time.Time{}
			now = time.Now()
			act = l.timedOut(now)
		case <-ctx.Done():
			return nil, h.clientGone(ctx, nil)
		}
	}
}

// start starts the next attempt at now; retry says it holds a RetryBudget
// slot, hedge that it runs beside a running attempt.
func (h *hedgeRun) start(now time.Time, retry, hedge bool) {
	i := len(h.slots)
	actx, cancel := context.WithCancelCause(h.streamCtx)
	s := &hedgeSlot{host: h.hosts[i%len(h.hosts)], start: now, cancel: cancel, retrying: retry, hedge: hedge}
	h.slots = append(h.slots, s)
	h.running++
	go func() {
		h.results <- hedgeDone{i, h.f.attempt(actx, h.rt, h.req, h.path, s.host, now, i+1, true)}
	}()
}

func (h *hedgeRun) releaseSlot(s *hedgeSlot) {
	if s.retrying {
		s.retrying = false
		h.f.RetryBudget.release()
	}
}

// release gives back the budget slots of attempts still running when the
// request ends.
func (h *hedgeRun) release() {
	for _, s := range h.slots {
		h.releaseSlot(s)
	}
}

// cancelAll cancels the attempts still running, so their backends see the
// connection closed, and waits for them to end (at once: a cancelled
// RoundTrip returns), closing what they return. Waiting leaves nothing
// behind: on Lambda the process may be frozen as soon as Forward returns.
// Their records are taken when the cancellation is decided (records).
func (h *hedgeRun) cancelAll() {
	if h.running == 0 {
		return
	}
	for _, s := range h.slots {
		if !s.done {
			s.cancel(errHedgeLost)
		}
	}
	for ; h.running > 0; h.running-- {
		d := <-h.results
		d.ar.close()
	}
}

// records is the attempt timeline in start order: the finished attempts'
// records, and the ones cancelled still running as OutcomeCancelled, or as
// a timeout when their Timeout had fired. upTo, if not -1, keeps only the
// attempts started before it.
func (h *hedgeRun) records(upTo int) []Attempt {
	now := time.Now()
	slots := h.slots
	if upTo >= 0 {
		slots = slots[:upTo]
	}
	out := make([]Attempt, 0, len(slots))
	for _, s := range slots {
		if s.done {
			a := s.ar.record
			a.Hedge = s.hedge
			out = append(out, a)
			continue
		}
		a := Attempt{Host: s.host.Host, Outcome: OutcomeCancelled, DurationMs: durationMs(now.Sub(s.start)), Hedge: s.hedge}
		if now.Sub(s.start) >= h.req.Budget.Timeout {
			a.Outcome, a.Cause = OutcomeTimeout, CauseTimeout
		}
		out = append(out, a)
	}
	return out
}

// finish ends the request with what its latest attempt, ar, gave.
func (h *hedgeRun) finish(ar *attemptResult) (*Result, error) {
	h.cancelAll()
	attempts := h.records(-1)
	if ar.resp != nil {
		return h.f.deliver(ar, attempts, h.req.Route, h.streamCancel), nil
	}
	h.streamCancel()
	return nil, h.f.failure(h.pol, ar.record, attempts)
}

func (h *hedgeRun) clientGone(ctx context.Context, ar *attemptResult) error {
	if ar != nil {
		ar.close()
	}
	h.cancelAll()
	h.streamCancel()
	h.f.Stats.countEnd(ReasonClientGone)
	return &Error{Reason: ReasonClientGone, Attempts: h.records(-1), Err: context.Cause(ctx)}
}

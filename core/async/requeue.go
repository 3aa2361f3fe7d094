package async

import (
	"context"
	"sync"
	"time"

	"fngateway/core"
)

// This file is the two hand-offs that do not wait for the trigger
// (issue 33; docs/async-api.md "Requeue and predictive hand-off"):
//
//   - Requeue: every host answered 429 or 503 with a Retry-After. Rather
//     than pass that answer on, the request is handed to a continuation
//     whose queue message becomes visible after the shortest Retry-After
//     (a visibility delay every queue of the gateway takes: the file
//     queue's not-before, Azure's visibilitytimeout, SQS's DelaySeconds,
//     at most 15 minutes).
//   - Predictive: a route whose recent requests mostly outlast the trigger
//     hands the next ones off at once (Predictor).

// The reasons of a hand-off, in Accepted.Reason, the 202's x-Async-Reason
// and the log line's asyncReason.
const (
	ReasonTrigger       = "trigger"        // AsyncTriggerTimeout passed without an answer
	ReasonFunctionLimit = "function-limit" // the execution limit was near
	ReasonRequeued      = "requeued"       // every host answered 429/503 with a Retry-After
	ReasonPredicted     = "predicted"      // the route's recent answers came after the trigger
)

// requeueAfter returns the wait after which a request whose attempts
// ended with res may run again as a continuation instead of passing res
// on: res.Throttled, when the queue can delay a message that long and the
// request's expiry leaves time for it after the wait. Zero otherwise.
func (a *Async) requeueAfter(res *core.Result, expiry time.Time) time.Duration {
	d := res.Throttled
	if d <= 0 || d > maxQueueDelay || !time.Now().Add(d).Before(expiry) {
		return 0
	}
	return d
}

// handOffNow makes req's continuation durable with no attempt running
// here, its queue message visible after after, and returns its Accepted
// with reason.
func (a *Async) handOffNow(ctx context.Context, req *core.Request, profile *core.Profile, after time.Duration, reason string) (*Accepted, error) {
	sctx, cancel := a.handoffContext(ctx)
	defer cancel()
	acc, _, err := a.submit(sctx, req, profile, false, after)
	if err != nil || acc == nil {
		return acc, err
	}
	acc.Reason = reason
	acc.RetryAfter = max(acc.RetryAfter, after)
	if a.Stats != nil {
		switch reason {
		case ReasonRequeued:
			a.Stats.AsyncRequeued.Add(1)
		case ReasonPredicted:
			a.Stats.AsyncPredicted.Add(1)
		}
	}
	return acc, nil
}

// handoffContext bounds the durable writes of a hand-off: within
// handoffTimeout, and no later than half the margin before the execution
// limit (ctx's deadline), so a hanging store is a 503 rather than an
// invocation the platform kills. The writes go on if the client leaves.
func (a *Async) handoffContext(ctx context.Context) (context.Context, context.CancelFunc) {
	handoff := time.Now().Add(handoffTimeout)
	if dl, ok := ctx.Deadline(); ok {
		if d := (core.Budget{}).WithLimit(dl, a.Margin/2).Limit; d.Before(handoff) {
			handoff = d
		}
	}
	return context.WithDeadline(context.WithoutCancel(ctx), handoff)
}

// predictProbeEvery is how often a request on a route the Predictor hands
// off runs the usual race instead, so the route's window keeps learning:
// one in ten.
const predictProbeEvery = 10

// Predictor is predictive hand-off (AsyncPredictWindow): it keeps, per
// route, whether each of the last Window async-eligible requests took
// longer than the trigger, and predicts that the next one will while the
// p90 of those times is above the trigger (more than a tenth of them
// took longer). A predicted request is handed off at once instead of after
// the trigger, except one in ten, which runs as usual so that the window
// follows the backend when it gets faster. Memory is bounded: Window bits
// per route. State is per instance. A nil *Predictor predicts nothing;
// methods are safe for concurrent use.
type Predictor struct {
	// Window is the count of recent requests per route the prediction
	// reads; at least 1.
	Window int

	mu     sync.Mutex
	routes map[string]*predictWindow
}

type predictWindow struct {
	over  []bool // a ring of the last Window requests: took longer than the trigger
	next  int
	n     int // filled
	count int // of over
	turn  int // predicted requests, for the probes
}

// predict reports whether the next request on route should be handed off
// at once.
func (p *Predictor) predict(route string) bool {
	if p == nil || p.Window <= 0 {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.routes[route]
	if w == nil || w.n < p.Window {
		return false
	}
	// p90 is the ceil(0.9 n)-th smallest time: above the trigger when
	// more than the n - ceil(0.9 n) largest ones are.
	rank := (9*w.n + 9) / 10
	if w.count < w.n-rank+1 {
		return false
	}
	w.turn++
	return w.turn%predictProbeEvery != 0
}

// observe records that a request on route took longer than the trigger
// (over) or answered within it.
func (p *Predictor) observe(route string, over bool) {
	if p == nil || p.Window <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.routes[route]
	if w == nil {
		if p.routes == nil {
			p.routes = map[string]*predictWindow{}
		}
		w = &predictWindow{over: make([]bool, p.Window)}
		p.routes[route] = w
	}
	if w.n == len(w.over) {
		if w.over[w.next] {
			w.count--
		}
	} else {
		w.n++
	}
	w.over[w.next] = over
	if over {
		w.count++
	}
	w.next = (w.next + 1) % len(w.over)
}

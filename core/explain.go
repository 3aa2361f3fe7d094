package core

import (
	"net/http"
	"time"
)

// This file explains a request's budget on paper: Explain drives the
// engine's own attempt loop (loop.go) with a simulated clock and arithmetic
// instead of a network, so a user can see which deadline bounded each
// attempt and why the request ended as it did. The loop, Budget.Attempt and
// the retryPolicy are what Forwarder.Forward runs, so the two cannot drift
// apart. The
// result is data (Stop, Hint); its wording and the reply syntax belong to
// the command that presents it (functions/ explain).

// ReplyKind says what a backend does with one explained attempt.
type ReplyKind uint8

// The kinds of reply.
const (
	// ReplySilent never answers: a deadline ends the attempt.
	ReplySilent ReplyKind = iota
	// ReplyStatus answers with Status after After.
	ReplyStatus
	// ReplyRefused refuses the connection after After: the request never
	// left, so a retry is always safe.
	ReplyRefused
	// ReplyReset drops the connection after After, the request sent: a
	// POST or PATCH is retried only with a client Idempotency-Key.
	ReplyReset
)

// Reply is what a backend does with one attempt of an explained request.
// The zero value is a backend that never answers.
type Reply struct {
	Kind   ReplyKind
	Status int           // for ReplyStatus: 100–599
	After  time.Duration // from the attempt's start
}

// ExplainParams describes the request to explain. Every instant is an
// offset from the request's arrival, when the TTL clock starts. The zero
// value is a request with no time at all (answered 412).
type ExplainParams struct {
	// TTL is the whole request's budget from arrival. Zero or negative
	// means it expired on arrival (S7PTTL: 0).
	TTL time.Duration
	// Timeout is one attempt's window, fresh for every attempt. Zero means
	// none.
	Timeout time.Duration
	// QueueWait is the time between arrival and the first attempt: the
	// request sat in a queue (the host's or the gateway's) while the TTL
	// clock and the execution limit already ran.
	QueueWait time.Duration
	// FunctionTimeout is the host's execution limit, counted from arrival.
	// Zero means none; Margin is kept free before it (Budget.WithLimit: a
	// negative Margin counts as zero).
	FunctionTimeout time.Duration
	Margin          time.Duration
	// BackoffBase is RetryBackoffMs. Explain waits the worst case before
	// retry n, min(10 × base, base × 2ⁿ⁻¹), the top of the engine's
	// jittered range. Zero means no wait.
	BackoffBase time.Duration
	// MaxAttempts bounds the attempts. Zero means one per reply (at least
	// one).
	MaxAttempts int
	// RetryOn are the answer statuses retried (RetryOnStatusCodes, a
	// route's retryOn); nil means 429, 502, 503 and 504.
	RetryOn []int
	// Method is the request's method; empty means GET. With ClientKey (the
	// client sent an Idempotency-Key) a POST or PATCH is retried after a
	// timeout or a lost response.
	Method    string
	ClientKey bool
	// Replies are the backend's replies, one per attempt in order; attempts
	// beyond the list repeat its last reply, and an empty list is all
	// "timeout".
	Replies []Reply
	// Hedge is the route's hedgeOnPerTryTimeout: a request that may be
	// sent twice starts its next attempt beside one whose Timeout fired
	// (see ExplainHedged).
	Hedge bool
}

// Timeline is an explained request: its attempts and the answer the client
// gets. It is a value, built by Explain.
type Timeline struct {
	// Params are Explain's inputs, zero fields defaulted.
	Params ExplainParams
	// Limit is the execution limit minus the margin, when HasLimit.
	Limit    time.Duration
	HasLimit bool
	// Attempts are the attempts made, in order.
	Attempts []ExplainedAttempt
	// Reason is why the request ended without a backend answer; ReasonNone
	// when the last attempt's answer is passed through.
	Reason Reason
	// Status is the HTTP status the client gets, at At.
	Status int
	At     time.Duration
	// Stop says why no attempt follows the last one. For StopBackoff,
	// NextWait is the wait that would not fit and Left the time to the
	// deadline EndCause (the TTL or the execution limit); for StopExpired,
	// EndCause is the deadline that was over.
	Stop     Stop
	EndCause Cause
	NextWait time.Duration
	Left     time.Duration
	// Hints point out settings that cannot nest.
	Hints []Hint
	// Hedged says the attempts ran side by side (ExplainParams.Hedge);
	// Decider is then the index in Attempts of the attempt whose ending
	// decided the answer (the winner, or the latest), where it is the last
	// attempt otherwise.
	Hedged  bool
	Decider int
}

// Hint names settings that cannot nest.
type Hint uint8

// The hints.
const (
	// HintTTLUnderTimeout: the TTL is shorter than Timeout.
	HintTTLUnderTimeout Hint = iota + 1
	// HintAttemptsDoNotFit: MaxAttempts × Timeout does not fit in what the
	// TTL leaves after the queue wait.
	HintAttemptsDoNotFit
	// HintTimeoutOverLimit: Timeout is longer than the execution limit less
	// the margin.
	HintTimeoutOverLimit
	// HintTTLOverLimit: the TTL outlasts the execution limit less the
	// margin.
	HintTTLOverLimit
)

// ExplainedAttempt is one attempt of a Timeline.
type ExplainedAttempt struct {
	N int // 1 for the first attempt
	// Wait is the backoff waited before the attempt (worst case).
	Wait time.Duration
	// Start and End are offsets from arrival; Window is the time the
	// attempt may take, and Bound the deadline that sets it.
	Start, Window, End time.Duration
	Bound              Cause
	// Reply is what the backend was given to do; Record what the engine
	// records for it (Host empty).
	Reply  Reply
	Record Attempt
	// Beside is, for a hedge, the attempt whose Timeout fired when it
	// started (0 otherwise); Cancelled says the attempt was still running
	// when the request ended, and was cancelled then.
	Beside    int
	Cancelled bool
}

// Code returns the contract's error code of t's answer, or "" when a
// backend answer is passed through.
func (t *Timeline) Code() string {
	if t.Reason == ReasonNone {
		return ""
	}
	return t.Reason.Code()
}

// explainEpoch stands for the arrival: any non-zero time will do, since
// Budget treats a zero Limit as "none".
var explainEpoch = time.Unix(1<<30, 0)

// Explain replays the attempt loop of Forwarder.Forward for p and returns
// the timeline: each attempt's window and the deadline bounding it (from
// Budget.Attempt), what ended it, and the answer with the contract's status
// and code (docs/deadlines.md#status-codes). It is pure and safe for concurrent use.
func Explain(p ExplainParams) Timeline {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = max(len(p.Replies), 1)
	}
	if p.Method == "" {
		p.Method = http.MethodGet
	}
	t := Timeline{Params: p}
	b := Budget{Arrival: explainEpoch, TTL: explainEpoch.Add(p.TTL), Timeout: p.Timeout}
	if p.FunctionTimeout > 0 {
		b = b.WithLimit(explainEpoch.Add(p.FunctionTimeout), p.Margin)
		t.HasLimit, t.Limit = true, b.Limit.Sub(explainEpoch)
	}
	t.Hints = explainHints(p, t)
	pol := p.policy()
	t.Hedged = p.hedges(pol)
	l := newLoop(pol, p.Method, p.ClientKey, b, t.Hedged)
	endAt := l.end.Sub(explainEpoch)
	// The simulated clock: now is the instant of the event fed to l. An
	// attempt's End is when it ends by itself, until it ends or is
	// cancelled; running says which still run.
	var running []bool
	now, wait, waitEnd := p.QueueWait, time.Duration(0), time.Duration(-1)
	act := l.begin(explainEpoch.Add(now))
	for {
		switch act.kind {
		case actStart:
			n := act.i + 1
			deadline, bound := b.Attempt(explainEpoch.Add(now))
			a := ExplainedAttempt{N: n, Wait: wait, Start: now, Window: deadline.Sub(explainEpoch) - now, Bound: bound, Reply: p.reply(n)}
			if act.hedge {
				a.Beside = act.i // the attempt whose Timeout fired
			}
			if t.Hedged {
				a.run(endAt, l.endCause) // only the TTL and the execution limit cut a hedged attempt
			} else {
				a.run(a.Start+a.Window, a.Bound)
			}
			t.Attempts = append(t.Attempts, a)
			running = append(running, true)
			wait = 0
		case actSlot:
			act = l.slot(explainEpoch.Add(now), true) // a request on paper has the retry budget to itself
			continue
		case actWait:
			wait, waitEnd = act.wait, now+act.wait
		case actExpired:
			t.expired(pol, act.cause, now, act.i+1)
			return t
		case actAnswer, actGiveUp, actTimeout:
			t.end(&l, act, now, running, pol)
			return t
		}
		// The next event: an attempt ending by itself, the end of a
		// backoff wait, or the latest attempt's Timeout. An ending comes
		// first at a tie.
		first, at := -1, time.Duration(1<<62)
		for i, r := range running {
			if r && t.Attempts[i].End < at {
				first, at = i, t.Attempts[i].End
			}
		}
		due := l.due.Sub(explainEpoch)
		switch {
		case waitEnd >= 0 && waitEnd < at:
			now, waitEnd = waitEnd, -1
			act = l.waited(explainEpoch.Add(now))
		case !l.due.IsZero() && due < at:
			now = due
			act = l.timedOut(explainEpoch.Add(now))
		default:
			now, running[first] = at, false
			act = l.ended(explainEpoch.Add(now), first, t.Attempts[first].ending(), 0)
		}
	}
}

// end ends t at now with the loop's action act: an answer passed
// through, the latest attempt's ending (actGiveUp), or a hedged request's
// Timeout. The attempts still running are cancelled.
func (t *Timeline) end(l *loop, act loopAction, now time.Duration, running []bool, pol retryPolicy) {
	if t.Hedged {
		t.Decider = act.i
		t.cancelRest(now, running)
	}
	t.Stop, t.At = l.stop, now
	if l.stop == StopBackoff {
		t.NextWait, t.EndCause, t.Left = l.nextWait, l.endCause, l.left
	}
	rec := t.Attempts[act.i].Record
	if act.kind == actTimeout {
		rec = perTryTimeout
	}
	if rec.Outcome == OutcomeStatus {
		t.Status = rec.Status
		return
	}
	t.Reason = pol.Ending(rec).Reason
	t.Status = t.Reason.Status(true)
}

// reply returns the backend's reply to attempt n.
func (p *ExplainParams) reply(n int) Reply {
	if len(p.Replies) == 0 {
		return Reply{}
	}
	return p.Replies[min(n, len(p.Replies))-1]
}

// run works out how the attempt ends if nothing cancels it, as
// Forwarder.attempt records it: a reply that would come at or after cut,
// the deadline cause, is cut by it.
func (a *ExplainedAttempt) run(cut time.Duration, cause Cause) {
	a.Record = Attempt{}
	if a.Reply.Kind == ReplySilent || a.Start+a.Reply.After >= cut {
		a.End = cut
		a.Record.Outcome, a.Record.Cause = OutcomeTimeout, cause
		if cause == CauseFunctionLimit {
			a.Record.Outcome = OutcomeFunctionLimit
		}
	} else {
		a.End = a.Start + a.Reply.After
		a.Record.Outcome = OutcomeConnectError
		if a.Reply.Kind == ReplyStatus {
			a.Record.Outcome, a.Record.Status = OutcomeStatus, a.Reply.Status
		}
	}
	a.Record.DurationMs = durationMs(a.End - a.Start)
}

// policy returns the engine's retry rules for p, with the worst-case
// backoff: the top of the jittered range.
func (p *ExplainParams) policy() retryPolicy {
	return retryPolicy{MaxAttempts: p.MaxAttempts, BackoffBase: p.BackoffBase, Jitter: worstJitter, RetryOn: p.RetryOn}
}

func worstJitter() float64 { return 1 }

// ending is how the attempt ended, for the retry rules: a refused
// connection never left.
func (a *ExplainedAttempt) ending() AttemptEnding {
	return AttemptEnding{Record: a.Record, Refused: a.Reply.Kind == ReplyRefused}
}

// expired ends t because its time was over before attempt n could start.
func (t *Timeline) expired(pol retryPolicy, c Cause, now time.Duration, n int) {
	t.At, t.Stop, t.EndCause = now, StopExpired, c
	t.Reason = pol.Expired(c, n).Reason
	t.Status = t.Reason.Status(n > 1)
}

// explainHints flags budgets that do not nest.
func explainHints(p ExplainParams, t Timeline) []Hint {
	var hints []Hint
	switch {
	case p.Timeout <= 0 || p.TTL <= 0:
	case p.TTL < p.Timeout:
		hints = append(hints, HintTTLUnderTimeout)
	case p.MaxAttempts > 1 && p.Timeout*time.Duration(p.MaxAttempts) > p.TTL-p.QueueWait:
		hints = append(hints, HintAttemptsDoNotFit)
	}
	if t.HasLimit && p.Timeout > t.Limit {
		hints = append(hints, HintTimeoutOverLimit)
	}
	if t.HasLimit && p.TTL > t.Limit && p.TTL > 0 {
		hints = append(hints, HintTTLOverLimit)
	}
	return hints
}

package core

import "time"

// This file is the attempt loop of docs/deadlines.md#deadlines-and-retries,
// hedging on the per-try timeout (docs/settings.md#hedging) included, as one
// pure state machine: events in (an attempt ended, a backoff wait is over,
// the latest attempt's Timeout fired, a retry slot was granted or refused),
// actions out (start an attempt, take a retry slot, wait, deliver an answer,
// give up). It decides when and whether an attempt starts; it performs
// nothing and reads no clock: every event carries the current time.
// Forwarder.Forward drives it with real attempts, timers and goroutines
// (forward.go, hedge.go), Explain with a simulated clock (explain.go), so the
// engine and its explanation run the same loop.
//
// A hedged request's attempts may run side by side: when the latest
// attempt's Timeout fires while the TTL still has time, the next attempt
// starts beside it, and the first acceptable answer wins. The request ends at
// the latest of these instants: an acceptable answer from any attempt; the
// Timeout of the latest attempt when no attempt may follow it (MaxAttempts
// reached, the retry budget spent, no time left); or when nothing runs any
// more and nothing may start.

// loopAct is what the attempt loop asks of its driver.
type loopAct uint8

// The actions.
const (
	// actNone: nothing to do until the next event.
	actNone loopAct = iota
	// actStart: start attempt i now; hedge says beside a running one.
	actStart
	// actSlot: take a retry slot for a retry or, with hedge, a hedge
	// (chosen: the ending before it was the client's doing, retrySlot), and
	// report the answer to slot.
	actSlot
	// actWait: wait wait, then report waited.
	actWait
	// actAnswer: attempt i's answer is the request's: deliver it and
	// cancel the attempts still running.
	actAnswer
	// actGiveUp: no attempt follows: the request ends with the ending of
	// attempt i, the latest (its answer passed through, or its failure);
	// cancel the attempts still running.
	actGiveUp
	// actTimeout: the Timeout of attempt i, the latest, fired and no
	// attempt may follow it: the request ends with that Timeout
	// (perTryTimeout); cancel the attempts still running.
	actTimeout
	// actExpired: the request's time, ended by the deadline cause, was over
	// before attempt i could start; cancel the attempts still running.
	actExpired
)

// loopAction is one action of the attempt loop.
type loopAction struct {
	kind   loopAct
	i      int           // the attempt, 0 for the first
	hedge  bool          // actStart, actSlot: a hedge, beside a running attempt
	chosen bool          // actSlot
	wait   time.Duration // actWait
	cause  Cause         // actExpired
	// timedOut says the event was the latest attempt's Timeout firing
	// while the request still had time (Stats.countTimeout).
	timedOut bool
}

// loop is the state of one request's attempt loop. It is a value, built by
// newLoop; a driver feeds it events in the order they happen, each with the
// time it happened, and performs the action each one returns. One driver
// owns it: it is not safe for concurrent use.
type loop struct {
	pol       retryPolicy
	method    string
	clientKey bool
	budget    Budget
	hedged    bool
	end       time.Time // Budget.End
	endCause  Cause

	started    int           // attempts started
	running    int           // attempts started and not ended
	latestDone bool          // the latest attempt ended, unanswered
	slotFor    loopAct       // actSlot asked, unanswered: actWait for a retry, actStart for a hedge
	waiting    bool          // a retry waits for its backoff
	wait       time.Duration // the backoff of the retry asking for a slot
	due        time.Time     // hedged: when the latest attempt's Timeout fires; zero when it does not matter

	// stop says why no attempt follows the latest one, once known; for
	// StopBackoff, nextWait is the wait that would not fit in left, the
	// time to the end.
	stop           Stop
	nextWait, left time.Duration
}

// newLoop returns the loop of a request with method and ClientKey
// clientKey under pol and b; hedged says its attempts may run side by side
// (b.Timeout must then be positive).
func newLoop(pol retryPolicy, method string, clientKey bool, b Budget, hedged bool) loop {
	end, endCause := b.End()
	return loop{pol: pol, method: method, clientKey: clientKey, budget: b, hedged: hedged, end: end, endCause: endCause}
}

// begin is the request's start at now.
func (l *loop) begin(now time.Time) loopAction {
	return l.next(now, false)
}

// next starts the next attempt at now, if the request's time is not over.
func (l *loop) next(now time.Time, hedge bool) loopAction {
	if !now.Before(l.end) {
		l.stop = StopExpired
		return loopAction{kind: actExpired, i: l.started, cause: l.endCause}
	}
	i := l.started
	l.started++
	l.running++
	l.latestDone = false
	if l.hedged {
		l.due = now.Add(l.budget.Timeout)
	}
	return loopAction{kind: actStart, i: i, hedge: hedge}
}

// ended is attempt i's end at now, as e; retryAfter is the wait its
// backend asked for before another attempt (Retry-After), or zero.
func (l *loop) ended(now time.Time, i int, e AttemptEnding, retryAfter time.Duration) loopAction {
	l.running--
	stop := l.pol.Next(i+1, l.method, l.clientKey, e)
	if stop == StopAnswered {
		l.stop = stop
		return loopAction{kind: actAnswer, i: i}
	}
	if i == l.started-1 {
		l.latestDone = true
		if stop == 0 {
			w := l.pol.Wait(i+1, retryAfter)
			left := l.end.Sub(now)
			if l.pol.Fits(w, left) {
				l.slotFor, l.wait = actWait, w
				return loopAction{kind: actSlot, chosen: l.budget.Chosen(e.Record.Cause)}
			}
			stop, l.nextWait, l.left = StopBackoff, w, left
		}
		l.stop = stop
	}
	return l.settle()
}

// settle ends the request once its latest attempt ended unanswered and
// nothing else runs or waits; until then, older attempts still run, up to
// the latest one's Timeout.
func (l *loop) settle() loopAction {
	if l.latestDone && l.running == 0 && !l.waiting {
		return loopAction{kind: actGiveUp, i: l.started - 1}
	}
	return loopAction{}
}

// slot is the answer to actSlot at now: ok says a retry slot was had.
func (l *loop) slot(now time.Time, ok bool) loopAction {
	what := l.slotFor
	l.slotFor = actNone
	switch {
	case what == actStart && ok:
		return l.next(now, true)
	case what == actStart:
		return l.timeout()
	case ok:
		l.waiting, l.due = true, time.Time{}
		return loopAction{kind: actWait, wait: l.wait}
	}
	return l.settle()
}

// waited is the end at now of the backoff wait actWait asked for.
func (l *loop) waited(now time.Time) loopAction {
	l.waiting = false
	return l.next(now, false)
}

// timedOut is the latest attempt's Timeout firing at now (hedged only:
// otherwise the Timeout ends the attempt, and ended reports it).
func (l *loop) timedOut(now time.Time) loopAction {
	if l.due.IsZero() {
		return loopAction{}
	}
	l.due = time.Time{}
	switch {
	case l.latestDone:
		return loopAction{kind: actGiveUp, i: l.started - 1}
	case !now.Before(l.end):
		return loopAction{} // the TTL or the execution limit cuts them all now
	case l.started < l.pol.MaxAttempts:
		l.slotFor = actStart
		return loopAction{kind: actSlot, hedge: true, chosen: l.budget.ClientTimeout, timedOut: true}
	}
	a := l.timeout()
	a.timedOut = true
	return a
}

// timeout ends a hedged request with its latest attempt's Timeout.
func (l *loop) timeout() loopAction {
	l.stop = StopMaxAttempts
	return loopAction{kind: actTimeout, i: l.started - 1}
}

// perTryTimeout is how a request ends that actTimeout ended, for
// retryPolicy.Ending: its latest attempt's Timeout.
var perTryTimeout = Attempt{Outcome: OutcomeTimeout, Cause: CauseTimeout}

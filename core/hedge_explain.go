package core

import "time"

// This file explains a hedged request on paper: explainHedged replays the
// loop of forwardHedged (hedge.go) with arithmetic instead of a network,
// with the same rules: an attempt's Timeout starts the next one beside it
// while attempts and time are left; the first acceptable answer wins and
// cancels the rest; the latest attempt's Timeout, when nothing may follow,
// ends the request; the TTL and the execution limit cut every attempt.

// hedges reports whether an explained request hedges under pol, as
// hedgeable does for a real one.
func (p *ExplainParams) hedges(pol RetryPolicy) bool {
	return p.Hedge && p.Timeout > 0 && p.MaxAttempts >= 2 && pol.MaySendTwice(p.Method, p.ClientKey)
}

// explainHedged is Explain for a hedged request.
func explainHedged(p ExplainParams, pol RetryPolicy, t Timeline, b Budget) Timeline {
	t.Hedged = true
	end, endCause := b.End()
	endAt := end.Sub(explainEpoch)
	if p.QueueWait >= endAt {
		t.expired(pol, endCause, p.QueueWait, 1)
		return t
	}
	type run struct {
		finish  time.Duration // when the attempt ends by itself
		byReply bool          // with its backend's reply, not cut by a deadline
		running bool
	}
	var runs []run
	start := func(at, wait time.Duration, beside int) {
		n := len(t.Attempts) + 1
		deadline, bound := b.Attempt(explainEpoch.Add(at))
		a := ExplainedAttempt{N: n, Wait: wait, Start: at, Window: deadline.Sub(explainEpoch) - at, Bound: bound, Reply: p.reply(n), Beside: beside}
		r := run{finish: endAt, running: true}
		if a.Reply.Kind != ReplySilent && at+a.Reply.After < endAt {
			r.finish, r.byReply = at+a.Reply.After, true
		}
		t.Attempts = append(t.Attempts, a)
		runs = append(runs, r)
	}
	// cancelRest cancels every attempt still running at now.
	cancelRest := func(now time.Duration) {
		for i := range runs {
			if runs[i].running {
				runs[i].running = false
				a := &t.Attempts[i]
				a.End, a.Cancelled = now, true
				a.Record.Outcome = OutcomeCancelled
				if now-a.Start >= p.Timeout {
					a.Record.Outcome, a.Record.Cause = OutcomeTimeout, CauseTimeout
				}
				a.Record.DurationMs = durationMs(now - a.Start)
			}
		}
	}
	start(p.QueueWait, 0, 0)
	perTry := p.QueueWait + p.Timeout
	next := time.Duration(-1) // a retry's start after its backoff wait
	var nextWait time.Duration
	latestDone := false
	for {
		// The earliest event: an attempt ending, the latest one's
		// Timeout, or a retry's start. An ending comes first at a tie.
		first, at := -1, time.Duration(1<<62)
		for i, r := range runs {
			if r.running && r.finish < at {
				first, at = i, r.finish
			}
		}
		if next >= 0 && next < at {
			latestDone = false
			start(next, nextWait, 0)
			perTry = next + p.Timeout
			next = -1
			continue
		}
		if next < 0 && perTry < at && perTry < endAt {
			latest := len(t.Attempts)
			if latestDone {
				t.Decider = latest - 1
				cancelRest(perTry)
				t.finish(pol, t.Attempts[latest-1])
				t.At = perTry
				return t
			}
			if latest < p.MaxAttempts {
				start(perTry, 0, latest)
				perTry += p.Timeout
				continue
			}
			// No attempt may follow: the request ends with its Timeout.
			t.Decider = latest - 1
			cancelRest(perTry)
			t.Stop, t.At = StopMaxAttempts, perTry
			t.Reason = pol.Ending(Attempt{Outcome: OutcomeTimeout, Cause: CauseTimeout}).Reason
			t.Status = t.Reason.Status(true)
			return t
		}
		// Attempt first ends by itself at at.
		runs[first].running = false
		a := &t.Attempts[first]
		a.End = at
		if runs[first].byReply {
			a.Record.Outcome = OutcomeConnectError
			if a.Reply.Kind == ReplyStatus {
				a.Record.Outcome, a.Record.Status = OutcomeStatus, a.Reply.Status
			}
		} else {
			a.Record.Outcome, a.Record.Cause = OutcomeTimeout, endCause
			if endCause == CauseFunctionLimit {
				a.Record.Outcome = OutcomeFunctionLimit
			}
		}
		a.Record.DurationMs = durationMs(a.End - a.Start)
		stop := pol.Next(a.N, p.Method, p.ClientKey, a.ending())
		if stop == StopAnswered {
			t.Decider = first
			cancelRest(at)
			t.Status, t.At, t.Stop = a.Record.Status, at, StopAnswered
			return t
		}
		latest := first == len(t.Attempts)-1
		running := false
		for _, r := range runs {
			running = running || r.running
		}
		if latest {
			latestDone = true
			if stop == 0 {
				w := pol.Wait(a.N, 0)
				if pol.Fits(w, endAt-at) {
					next, nextWait = at+w, w
					continue
				}
				t.Stop, t.NextWait, t.EndCause, t.Left = StopBackoff, w, endCause, endAt-at
			} else {
				t.Stop = stop
			}
		}
		if !running && latestDone && next < 0 {
			t.Decider = len(t.Attempts) - 1
			t.finish(pol, t.Attempts[t.Decider])
			t.At = at
			return t
		}
	}
}

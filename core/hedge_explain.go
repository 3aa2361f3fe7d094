package core

import "time"

// This file is what Explain adds for a hedged request: when it hedges, and
// how the attempts still running are recorded when the request ends. The
// loop itself is the engine's (loop.go).

// hedges reports whether an explained request hedges under pol, as
// hedgeable does for a real one.
func (p *ExplainParams) hedges(pol retryPolicy) bool {
	return p.Hedge && p.Timeout > 0 && p.MaxAttempts >= 2 && pol.MaySendTwice(p.Method, p.ClientKey)
}

// cancelRest cancels the attempts of t still running at now: the record of
// each is OutcomeCancelled, or a timeout when its Timeout had passed, as
// hedgeRun.records tells it.
func (t *Timeline) cancelRest(now time.Duration, running []bool) {
	for i, r := range running {
		if !r {
			continue
		}
		a := &t.Attempts[i]
		a.End, a.Cancelled = now, true
		a.Record = Attempt{Outcome: OutcomeCancelled}
		if now-a.Start >= t.Params.Timeout {
			a.Record.Outcome, a.Record.Cause = OutcomeTimeout, CauseTimeout
		}
		a.Record.DurationMs = durationMs(now - a.Start)
	}
}

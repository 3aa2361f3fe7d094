package async

import "time"

// pollPolicy is the Retry-After of a pending async request (docs/async-api.md#polling-interval):
// short while the request is young, when most finish, then a tenth of its
// age, so that a long job is polled about as often in proportion to how
// long it has run, capped by max (AsyncPollMaxSecs), and never beyond the
// time the request has left. A 30-minute job costs about 90 polls at the
// defaults, not 900 at a fixed 2 s.
type pollPolicy struct {
	first time.Duration // the interval of a young request (2 s, or 1 s for short attempts)
	max   time.Duration // the cap; at least first
}

// pollGrowth is the fraction of the request's age its next poll waits.
const pollGrowth = 10

// after returns the interval a poller should wait before asking again about
// a request of age age with left to run before its expiry. It is whole
// seconds, at least one, as Retry-After writes it.
func (p pollPolicy) after(age, left time.Duration) time.Duration {
	d := max(p.first, age/pollGrowth)
	d = min(d, p.max, left)
	d = d.Truncate(time.Second)
	return max(d, time.Second)
}

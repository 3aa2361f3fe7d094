package core

import (
	"net/http"
	"testing"
	"time"
)

// loopStep is one event fed to the attempt loop and the action it must
// return.
type loopStep struct {
	ev   string        // begin, ended, slot, waited, timedOut
	at   time.Duration // from arrival
	i    int           // ended: the attempt
	end  AttemptEnding // ended
	ra   time.Duration // ended: Retry-After
	ok   bool          // slot
	want loopAction
}

func endStatus(code int) AttemptEnding {
	return AttemptEnding{Record: Attempt{Outcome: OutcomeStatus, Status: code}}
}

func endTimeout(c Cause) AttemptEnding {
	return AttemptEnding{Record: Attempt{Outcome: OutcomeTimeout, Cause: c}}
}

var (
	endReset   = AttemptEnding{Record: Attempt{Outcome: OutcomeConnectError}}
	endRefused = AttemptEnding{Record: Attempt{Outcome: OutcomeConnectError}, Refused: true}
)

// TestLoop runs the attempt loop as a table: each row a request, its
// events in order, and the action each one must return; then why no
// attempt followed the last.
func TestLoop(t *testing.T) {
	arrival := time.Unix(1<<30, 0)
	budget := func(ttl, timeout time.Duration) Budget {
		return Budget{Arrival: arrival, TTL: arrival.Add(ttl), Timeout: timeout}
	}
	pol := func(maxAttempts int, base time.Duration) retryPolicy {
		return retryPolicy{MaxAttempts: maxAttempts, BackoffBase: base, Jitter: worstJitter}
	}
	limited := budget(10*time.Second, time.Second).WithLimit(arrival.Add(3*time.Second), time.Second)
	clientTimeout := budget(10*time.Second, time.Second)
	clientTimeout.ClientTimeout = true
	start := func(i int) loopAction { return loopAction{kind: actStart, i: i} }
	hedge := func(i int) loopAction { return loopAction{kind: actStart, i: i, hedge: true} }
	slot := loopAction{kind: actSlot}
	hedgeSlot := loopAction{kind: actSlot, hedge: true, timedOut: true}
	wait := func(d time.Duration) loopAction { return loopAction{kind: actWait, wait: d} }
	answer := func(i int) loopAction { return loopAction{kind: actAnswer, i: i} }
	giveUp := func(i int) loopAction { return loopAction{kind: actGiveUp, i: i} }
	none := loopAction{}
	// hedgedAt1s is a hedged request whose first attempt's Timeout fires
	// at 1s, and the hedge then started, followed by rest.
	hedgedAt1s := func(rest []loopStep) []loopStep {
		return append([]loopStep{
			{ev: "begin", want: start(0)},
			{ev: "timedOut", at: time.Second, want: hedgeSlot},
			{ev: "slot", at: time.Second, ok: true, want: hedge(1)},
		}, rest...)
	}
	tests := []struct {
		name     string
		pol      retryPolicy
		method   string
		key      bool
		budget   Budget
		hedged   bool
		steps    []loopStep
		wantStop Stop
		// For StopBackoff: the wait that did not fit, and the time left.
		wantNextWait, wantLeft time.Duration
	}{
		{name: "answered at once", pol: pol(3, 0), budget: budget(10*time.Second, time.Second),
			steps: []loopStep{
				{ev: "begin", want: start(0)},
				{ev: "ended", at: 100 * time.Millisecond, end: endStatus(200), want: answer(0)},
			}, wantStop: StopAnswered},
		{name: "expired on arrival", pol: pol(3, 0), budget: budget(0, time.Second),
			steps:    []loopStep{{ev: "begin", want: loopAction{kind: actExpired, cause: CauseTTL}}},
			wantStop: StopExpired},
		{name: "the execution limit was over before the first attempt", pol: pol(3, 0), budget: limited,
			steps:    []loopStep{{ev: "begin", at: 2 * time.Second, want: loopAction{kind: actExpired, cause: CauseFunctionLimit}}},
			wantStop: StopExpired},
		{name: "a 503 is retried after the worst backoff", pol: pol(3, 100*time.Millisecond), budget: budget(10*time.Second, time.Second),
			steps: []loopStep{
				{ev: "begin", want: start(0)},
				{ev: "ended", at: 50 * time.Millisecond, end: endStatus(503), want: slot},
				{ev: "slot", at: 50 * time.Millisecond, ok: true, want: wait(100 * time.Millisecond)},
				{ev: "waited", at: 150 * time.Millisecond, want: start(1)},
				{ev: "ended", at: 200 * time.Millisecond, i: 1, end: endStatus(200), want: answer(1)},
			}, wantStop: StopAnswered},
		{name: "a Retry-After longer than the backoff is waited", pol: pol(3, 100*time.Millisecond), budget: budget(10*time.Second, time.Second),
			steps: []loopStep{
				{ev: "begin", want: start(0)},
				{ev: "ended", end: endStatus(429), ra: 2 * time.Second, want: slot},
				{ev: "slot", ok: true, want: wait(2 * time.Second)},
			}},
		{name: "the retry budget refuses: the last answer is the request's", pol: pol(3, 0), budget: budget(10*time.Second, time.Second),
			steps: []loopStep{
				{ev: "begin", want: start(0)},
				{ev: "ended", end: endStatus(503), want: slot},
				{ev: "slot", ok: false, want: giveUp(0)},
			}},
		{name: "a wait that would outlast the TTL is not started", pol: pol(3, 100*time.Millisecond), budget: budget(time.Second, time.Second),
			steps: []loopStep{
				{ev: "begin", want: start(0)},
				{ev: "ended", at: 950 * time.Millisecond, end: endStatus(502), want: giveUp(0)},
			}, wantStop: StopBackoff, wantNextWait: 100 * time.Millisecond, wantLeft: 50 * time.Millisecond},
		{name: "the time is over when the wait ends", pol: pol(3, 0), budget: budget(time.Second, time.Second),
			steps: []loopStep{
				{ev: "begin", want: start(0)},
				{ev: "ended", at: 900 * time.Millisecond, end: endStatus(503), want: slot},
				{ev: "slot", at: 900 * time.Millisecond, ok: true, want: wait(0)},
				{ev: "waited", at: time.Second, want: loopAction{kind: actExpired, i: 1, cause: CauseTTL}},
			}, wantStop: StopExpired},
		{name: "the last of MaxAttempts", pol: pol(2, 0), budget: budget(10*time.Second, time.Second),
			steps: []loopStep{
				{ev: "begin", want: start(0)},
				{ev: "ended", end: endTimeout(CauseTimeout), want: slot},
				{ev: "slot", ok: true, want: wait(0)},
				{ev: "waited", want: start(1)},
				{ev: "ended", i: 1, end: endStatus(504), want: giveUp(1)},
			}, wantStop: StopMaxAttempts},
		{name: "the TTL cut the attempt", pol: pol(3, 0), budget: budget(time.Second, 2*time.Second),
			steps: []loopStep{
				{ev: "begin", want: start(0)},
				{ev: "ended", at: time.Second, end: endTimeout(CauseTTL), want: giveUp(0)},
			}, wantStop: StopDeadline},
		{name: "a POST is not sent again after a reset", pol: pol(3, 0), method: http.MethodPost, budget: budget(10*time.Second, time.Second),
			steps: []loopStep{
				{ev: "begin", want: start(0)},
				{ev: "ended", end: endReset, want: giveUp(0)},
			}, wantStop: StopNotSafe},
		{name: "a POST is sent again after a refused connection", pol: pol(3, 0), method: http.MethodPost, budget: budget(10*time.Second, time.Second),
			steps: []loopStep{
				{ev: "begin", want: start(0)},
				{ev: "ended", end: endRefused, want: slot},
			}},
		{name: "a client's shortened Timeout: the retry holds no slot", pol: pol(3, 0), budget: clientTimeout,
			steps: []loopStep{
				{ev: "begin", want: start(0)},
				{ev: "ended", at: time.Second, end: endTimeout(CauseTimeout), want: loopAction{kind: actSlot, chosen: true}},
			}},

		{name: "hedged: the first answers after the hedge started", pol: pol(3, 0), budget: budget(10*time.Second, time.Second), hedged: true,
			steps: hedgedAt1s([]loopStep{
				{ev: "ended", at: 1500 * time.Millisecond, end: endStatus(200), want: answer(0)},
			}), wantStop: StopAnswered},
		{name: "hedged: a client's shortened Timeout hedges without holding a slot", pol: pol(3, 0), budget: clientTimeout, hedged: true,
			steps: []loopStep{
				{ev: "begin", want: start(0)},
				{ev: "timedOut", at: time.Second, want: loopAction{kind: actSlot, hedge: true, chosen: true, timedOut: true}},
			}},
		{name: "hedged: the latest's Timeout with no attempt left ends the request", pol: pol(2, 0), budget: budget(10*time.Second, time.Second), hedged: true,
			steps: hedgedAt1s([]loopStep{
				{ev: "timedOut", at: 2 * time.Second, want: loopAction{kind: actTimeout, i: 1, timedOut: true}},
			}), wantStop: StopMaxAttempts},
		{name: "hedged: the retry budget refuses the hedge", pol: pol(3, 0), budget: budget(10*time.Second, time.Second), hedged: true,
			steps: []loopStep{
				{ev: "begin", want: start(0)},
				{ev: "timedOut", at: time.Second, want: hedgeSlot},
				{ev: "slot", at: time.Second, ok: false, want: loopAction{kind: actTimeout}},
			}, wantStop: StopMaxAttempts},
		{name: "hedged: the latest failed, the older runs until it fails too", pol: pol(2, 0), budget: budget(10*time.Second, time.Second), hedged: true,
			steps: hedgedAt1s([]loopStep{
				{ev: "ended", at: 1200 * time.Millisecond, i: 1, end: endStatus(503), want: none},
				{ev: "ended", at: 1500 * time.Millisecond, i: 0, end: endStatus(502), want: giveUp(1)},
			}), wantStop: StopMaxAttempts},
		{name: "hedged: the latest failed, its Timeout ends the older", pol: pol(2, 0), budget: budget(10*time.Second, time.Second), hedged: true,
			steps: hedgedAt1s([]loopStep{
				{ev: "ended", at: 1200 * time.Millisecond, i: 1, end: endStatus(503), want: none},
				{ev: "timedOut", at: 2 * time.Second, want: giveUp(1)},
			}), wantStop: StopMaxAttempts},
		{name: "hedged: an older attempt answers after the latest failed", pol: pol(2, 0), budget: budget(10*time.Second, time.Second), hedged: true,
			steps: hedgedAt1s([]loopStep{
				{ev: "ended", at: 1200 * time.Millisecond, i: 1, end: endStatus(503), want: none},
				{ev: "ended", at: 1500 * time.Millisecond, i: 0, end: endStatus(200), want: answer(0)},
			}), wantStop: StopAnswered},
		{name: "hedged: a fast failure is retried, its Timeout stopped during the wait", pol: pol(3, 100*time.Millisecond), budget: budget(10*time.Second, time.Second), hedged: true,
			steps: []loopStep{
				{ev: "begin", want: start(0)},
				{ev: "ended", at: 200 * time.Millisecond, end: endStatus(503), want: slot},
				{ev: "slot", at: 200 * time.Millisecond, ok: true, want: wait(100 * time.Millisecond)},
				{ev: "timedOut", at: time.Second, want: none},
				{ev: "waited", at: 300 * time.Millisecond, want: start(1)},
				{ev: "timedOut", at: 1300 * time.Millisecond, want: hedgeSlot},
			}},
		{name: "hedged: a Timeout at the TTL starts nothing", pol: pol(3, 0), budget: budget(time.Second, time.Second), hedged: true,
			steps: []loopStep{
				{ev: "begin", want: start(0)},
				{ev: "timedOut", at: time.Second, want: none},
				{ev: "ended", at: time.Second, end: endTimeout(CauseTTL), want: giveUp(0)},
			}, wantStop: StopDeadline},
		{name: "hedged: an older attempt's failure while the retry waits ends nothing", pol: pol(3, 100*time.Millisecond), budget: budget(10*time.Second, time.Second), hedged: true,
			steps: hedgedAt1s([]loopStep{
				{ev: "ended", at: 1100 * time.Millisecond, i: 1, end: endStatus(503), want: slot},
				{ev: "slot", at: 1100 * time.Millisecond, ok: true, want: wait(200 * time.Millisecond)},
				{ev: "ended", at: 1200 * time.Millisecond, i: 0, end: endStatus(503), want: none},
				{ev: "waited", at: 1300 * time.Millisecond, want: start(2)},
			})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := tt.method
			if method == "" {
				method = http.MethodGet
			}
			l := newLoop(tt.pol, method, tt.key, tt.budget, tt.hedged)
			for k, s := range tt.steps {
				now := arrival.Add(s.at)
				var got loopAction
				switch s.ev {
				case "begin":
					got = l.begin(now)
				case "ended":
					got = l.ended(now, s.i, s.end, s.ra)
				case "slot":
					got = l.slot(now, s.ok)
				case "waited":
					got = l.waited(now)
				case "timedOut":
					got = l.timedOut(now)
				default:
					t.Fatalf("step %d: unknown event %q", k, s.ev)
				}
				if got != s.want {
					t.Fatalf("step %d (%s at %v): got %+v, want %+v", k, s.ev, s.at, got, s.want)
				}
			}
			if l.stop != tt.wantStop || l.nextWait != tt.wantNextWait || l.left != tt.wantLeft {
				t.Errorf("stop %v, next wait %v, left %v; want %v, %v, %v", l.stop, l.nextWait, l.left, tt.wantStop, tt.wantNextWait, tt.wantLeft)
			}
		})
	}
}

// FuzzExplainLoop drives the attempt loop through Explain, hedged or not,
// with any budget and replies, and checks what any run must keep: it ends,
// no more than MaxAttempts attempts start, none starts before the queue
// wait, after the request's end or before the one it follows, each ends
// within its window when not hedged, and the answer comes no earlier than
// an attempt's end and no later than the end of the request's time.
func FuzzExplainLoop(f *testing.F) {
	f.Add(int64(10000), int64(1000), int64(0), int64(0), int64(0), int64(100), uint8(3), false, false, true, uint64(0x0102030405060708))
	f.Add(int64(2500), int64(1000), int64(0), int64(0), int64(0), int64(0), uint8(3), false, false, true, uint64(0))
	f.Add(int64(60000), int64(1000), int64(200), int64(3000), int64(500), int64(10), uint8(7), true, true, false, uint64(0xfff1f2f3))
	f.Fuzz(func(t *testing.T, ttl, timeout, queue, limit, margin, base int64, maxAttempts uint8, post, key, hedge bool, replies uint64) {
		ms := func(v int64) time.Duration { return time.Duration(v%(1<<20)) * time.Millisecond }
		p := ExplainParams{TTL: ms(ttl), Timeout: ms(timeout), QueueWait: max(ms(queue), 0), FunctionTimeout: ms(limit), Margin: ms(margin),
			BackoffBase: max(ms(base), 0), MaxAttempts: int(maxAttempts % 9), ClientKey: key, Hedge: hedge}
		if post {
			p.Method = http.MethodPost
		}
		// Up to four replies, a byte each: a kind, a status and a delay.
		for i := range 4 {
			b := byte(replies >> (16 * i))
			r := Reply{Kind: ReplyKind(b % 4), After: time.Duration(replies>>(16*i+8)&0xff) * 10 * time.Millisecond}
			if r.Kind == ReplyStatus {
				r.Status = []int{200, 404, 429, 500, 502, 503, 504}[int(b/4)%7]
			}
			p.Replies = append(p.Replies, r)
		}
		tl := Explain(p)
		maxN := max(tl.Params.MaxAttempts, 1)
		if len(tl.Attempts) > maxN {
			t.Fatalf("%d attempts; at most %d", len(tl.Attempts), maxN)
		}
		end := p.TTL
		if tl.HasLimit {
			end = min(end, tl.Limit)
		}
		for i, a := range tl.Attempts {
			if a.Start < p.QueueWait || a.Start >= end || a.End < a.Start || a.End > tl.At {
				t.Fatalf("attempt %d: %v-%v; queue wait %v, end %v, answer at %v", a.N, a.Start, a.End, p.QueueWait, end, tl.At)
			}
			if i > 0 && a.Start < tl.Attempts[i-1].Start {
				t.Fatalf("attempt %d starts at %v, before the one it follows (%v)", a.N, a.Start, tl.Attempts[i-1].Start)
			}
			if !tl.Hedged && a.End > a.Start+a.Window {
				t.Fatalf("attempt %d ends at %v, after its window %v", a.N, a.End, a.Start+a.Window)
			}
		}
		if tl.At > max(end, p.QueueWait) {
			t.Fatalf("answer at %v; the request's time ends at %v", tl.At, end)
		}
		if tl.Status == 0 {
			t.Fatalf("no status: %+v", tl)
		}
	})
}

package core

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// This file explains a request's budget on paper: Explain replays the
// attempt loop of Forwarder.Forward with arithmetic instead of a network, so
// a user can see which deadline bounded each attempt and why the request
// ended as it did. It uses Budget.Attempt, Budget.End and Backoff, the
// functions the engine itself uses, so the two cannot drift apart.

// ReplyKind says what a backend does with one explained attempt.
type ReplyKind uint8

// The kinds of reply, as written in a reply list (see ParseReply).
const (
	// ReplySilent never answers: a deadline ends the attempt ("timeout").
	ReplySilent ReplyKind = iota
	// ReplyStatus answers with Status after After ("503@2s", "ok@3s").
	ReplyStatus
	// ReplyRefused refuses the connection after After ("refused"): the
	// request never left, so a retry is always safe.
	ReplyRefused
	// ReplyReset drops the connection after After, the request sent
	// ("reset@1s"): a POST or PATCH is retried only with a client
	// Idempotency-Key.
	ReplyReset
)

// Reply is what a backend does with one attempt of an explained request.
// The zero value is a backend that never answers.
type Reply struct {
	Kind   ReplyKind
	Status int           // for ReplyStatus: 100–599
	After  time.Duration // from the attempt's start
}

// String returns r in the form ParseReply reads: "timeout", "503@2s",
// "refused", "reset@1.5s".
func (r Reply) String() string {
	var s string
	switch r.Kind {
	case ReplyStatus:
		s = strconv.Itoa(r.Status)
	case ReplyRefused:
		s = "refused"
	case ReplyReset:
		s = "reset"
	default:
		return "timeout"
	}
	if r.After > 0 {
		s += "@" + r.After.String()
	}
	return s
}

// ErrInvalidReply is returned by ParseReply for a value it cannot read.
var ErrInvalidReply = errors.New("want timeout, refused[@d], reset[@d], ok[@d] or a status such as 503@2s, with d a duration such as 2s or 250ms")

// ParseReply reads one reply: "timeout" (no answer: the attempt's deadline
// ends it), "refused" (connection refused), "reset" (connection lost after
// the request was sent), "ok" (200) or a status code from 100 to 599. All
// but "timeout" may carry "@d", the time the reply takes as a Go duration
// ("503@2s", "ok@250ms"); without it the reply is immediate.
func ParseReply(s string) (Reply, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	word, after, hasAfter := strings.Cut(s, "@")
	var r Reply
	switch word {
	case "timeout":
		if hasAfter {
			return Reply{}, ErrInvalidReply
		}
		return r, nil
	case "refused":
		r.Kind = ReplyRefused
	case "reset":
		r.Kind = ReplyReset
	case "ok":
		r.Kind, r.Status = ReplyStatus, http.StatusOK
	default:
		n, err := strconv.Atoi(word)
		if err != nil || n < 100 || n > 599 || len(word) != 3 {
			return Reply{}, ErrInvalidReply
		}
		r.Kind, r.Status = ReplyStatus, n
	}
	if hasAfter {
		d, err := time.ParseDuration(after)
		if err != nil || d < 0 || d > maxSeconds*time.Second {
			return Reply{}, ErrInvalidReply
		}
		r.After = d
	}
	return r, nil
}

// ParseReplies reads a comma-separated list of replies (see ParseReply),
// one per attempt in order. An empty list is nil.
func ParseReplies(s string) ([]Reply, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []Reply
	for i, part := range strings.Split(s, ",") {
		r, err := ParseReply(part)
		if err != nil {
			return nil, fmt.Errorf("attempt %d %q: %w", i+1, strings.TrimSpace(part), err)
		}
		out = append(out, r)
	}
	return out, nil
}

// ExplainParams describes the request to explain. Every instant is an
// offset from the request's arrival, when the TTL clock starts. The zero
// value is a request with no time at all (answered 412).
type ExplainParams struct {
	// TTL is the whole request's budget from arrival. Zero or negative
	// means it expired on arrival (S7PTTL: 0).
	TTL time.Duration
	// TTLFrom says where TTL came from, for the table: "DefaultTTLSecs=60",
	// "S7PTTL=2.5". Empty shows nothing.
	TTLFrom string
	// Timeout is one attempt's window, fresh for every attempt. Zero means
	// none.
	Timeout time.Duration
	// QueueWait is the time between arrival and the first attempt: the
	// request sat in a queue (the host's or the gateway's) while the TTL
	// clock and the execution limit already ran.
	QueueWait time.Duration
	// FunctionTimeout is the host's execution limit, counted from arrival.
	// Zero means none; Margin is kept free before it.
	FunctionTimeout time.Duration
	Margin          time.Duration
	// BackoffBase is RetryBackoffMs. Explain waits the worst case before
	// retry n, min(10 × base, base × 2ⁿ⁻¹), the top of the engine's
	// jittered range. Zero means no wait.
	BackoffBase time.Duration
	// MaxAttempts bounds the attempts. Zero means one per reply (at least
	// one).
	MaxAttempts int
	// Method is the request's method; empty means GET. With ClientKey (the
	// client sent an Idempotency-Key) a POST or PATCH is retried after a
	// timeout or a lost response.
	Method    string
	ClientKey bool
	// Replies are the backend's replies, one per attempt in order; attempts
	// beyond the list repeat its last reply, and an empty list is all
	// "timeout".
	Replies []Reply
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
	// Why is one line saying why the request ended so.
	Why string
	// Hints point out settings that cannot nest.
	Hints []string
}

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
// and code (CONTRACT §4, §5). It is pure and safe for concurrent use.
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
		t.HasLimit = true
		t.Limit = p.FunctionTimeout - p.Margin
		b.Limit = explainEpoch.Add(t.Limit)
	}
	t.Hints = explainHints(p, t)
	end, endCause := b.End()
	endAt := end.Sub(explainEpoch)
	now, wait := p.QueueWait, time.Duration(0)
	for n := 1; ; n++ {
		if now >= endAt {
			t.expired(endCause, now, n)
			return t
		}
		deadline, bound := b.Attempt(explainEpoch.Add(now))
		a := ExplainedAttempt{N: n, Wait: wait, Start: now, Window: deadline.Sub(explainEpoch) - now, Bound: bound, Reply: p.reply(n)}
		a.run()
		t.Attempts = append(t.Attempts, a)
		rec := a.Record
		if rec.Outcome == OutcomeStatus && !retryableStatus(rec.Status) {
			t.Status, t.At = rec.Status, a.End
			t.Why = fmt.Sprintf("attempt %d answered %d after %s s", n, rec.Status, secs(a.End-a.Start))
			if rec.Status >= 400 {
				t.Why += ", a status that is not retried"
			}
			return t
		}
		stop := p.stopAfter(a)
		if stop == "" {
			wait = Backoff(p.BackoffBase, n, 1)
			if wait >= endAt-a.End {
				stop = fmt.Sprintf("the next backoff wait (%s s, worst case) would outlast the %s, %s s away", secs(wait), deadlineName(endCause), secs(endAt-a.End))
			}
		}
		if stop != "" {
			t.finish(a, stop)
			return t
		}
		now = a.End + wait
	}
}

// reply returns the backend's reply to attempt n.
func (p *ExplainParams) reply(n int) Reply {
	if len(p.Replies) == 0 {
		return Reply{}
	}
	return p.Replies[min(n, len(p.Replies))-1]
}

// run works out how the attempt ends, as Forwarder.attempt records it: a
// reply that would come at or after the deadline is cut by it.
func (a *ExplainedAttempt) run() {
	if a.Reply.Kind == ReplySilent || a.Reply.After >= a.Window {
		a.End = a.Start + a.Window
		a.Record.Outcome, a.Record.Cause = OutcomeTimeout, a.Bound
		if a.Bound == CauseFunctionLimit {
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

// stopAfter returns why no attempt follows a, or "" when the retry rules of
// Forwarder.nextWait allow one (the backoff wait still has to fit).
func (p *ExplainParams) stopAfter(a ExplainedAttempt) string {
	rec := a.Record
	switch {
	case rec.Outcome == OutcomeFunctionLimit || rec.Cause == CauseTTL:
		return "its deadline ended the request" // finish says which
	case a.N >= p.MaxAttempts:
		return fmt.Sprintf("it was the last of MaxAttempts=%d", p.MaxAttempts)
	}
	safe := a.Reply.Kind == ReplyRefused || idempotent(p.Method) || p.ClientKey
	if rec.Outcome == OutcomeStatus && (rec.Status == http.StatusTooManyRequests || rec.Status == http.StatusServiceUnavailable) {
		safe = true
	}
	if safe {
		return ""
	}
	after := "a lost response"
	switch rec.Outcome {
	case OutcomeTimeout:
		after = "a timeout"
	case OutcomeStatus:
		after = fmt.Sprintf("a %d", rec.Status)
	}
	return fmt.Sprintf("a %s without a client Idempotency-Key is not retried after %s", p.Method, after)
}

// finish ends t after its last attempt a, which no attempt follows.
func (t *Timeline) finish(a ExplainedAttempt, stop string) {
	rec := a.Record
	t.At = a.End
	if rec.Outcome == OutcomeStatus {
		t.Status = rec.Status
		t.Why = fmt.Sprintf("attempt %d answered %d after %s s and %s", a.N, rec.Status, secs(a.End-a.Start), stop)
		return
	}
	switch {
	case rec.Outcome == OutcomeFunctionLimit:
		t.Reason = ReasonFunctionLimit
		t.Why = fmt.Sprintf("the execution limit (less the margin) cut attempt %d at %s s", a.N, secs(a.End))
	case rec.Outcome == OutcomeTimeout && rec.Cause == CauseTTL:
		t.Reason = ReasonTTLExpired
		t.Why = fmt.Sprintf("the TTL ran out during attempt %d", a.N)
	case rec.Outcome == OutcomeTimeout:
		t.Reason = ReasonAttemptTimeout
		t.Why = fmt.Sprintf("attempt %d ran out of its Timeout (%s s) and %s", a.N, secs(a.Window), stop)
	case a.Reply.Kind == ReplyRefused:
		t.Reason = ReasonBackendUnavailable
		t.Why = fmt.Sprintf("attempt %d was refused a connection and %s", a.N, stop)
	default:
		t.Reason = ReasonBackendUnavailable
		t.Why = fmt.Sprintf("attempt %d lost its connection after %s s and %s", a.N, secs(a.End-a.Start), stop)
	}
	t.Status = t.Reason.Status(true)
}

// expired ends t because its time was over before attempt n could start.
func (t *Timeline) expired(c Cause, now time.Duration, n int) {
	t.At = now
	attempted := n > 1
	before := "before any attempt started"
	if attempted {
		before = fmt.Sprintf("before attempt %d could start", n)
	}
	if c == CauseFunctionLimit {
		t.Reason = ReasonFunctionLimit
		t.Why = fmt.Sprintf("the execution limit less the margin (at %s s) was reached %s", secs(t.Limit), before)
	} else {
		t.Reason = ReasonTTLExpired
		t.Why = fmt.Sprintf("the TTL (%s s) was over %s", secs(t.Params.TTL), before)
		if !attempted && t.Params.QueueWait > 0 && t.Params.TTL > 0 {
			t.Why += fmt.Sprintf(": the request waited %s s in the queue", secs(t.Params.QueueWait))
		}
	}
	t.Status = t.Reason.Status(attempted)
}

// explainHints flags budgets that do not nest.
func explainHints(p ExplainParams, t Timeline) []string {
	var hints []string
	left := p.TTL - p.QueueWait
	switch {
	case p.Timeout <= 0 || p.TTL <= 0:
	case p.TTL < p.Timeout:
		hints = append(hints, fmt.Sprintf("the TTL (%s s) is shorter than Timeout (%s s): no attempt can use its whole Timeout, and the TTL, not Timeout, ends a slow request", secs(p.TTL), secs(p.Timeout)))
	case p.MaxAttempts > 1 && p.Timeout*time.Duration(p.MaxAttempts) > left:
		in := fmt.Sprintf("the TTL (%s s)", secs(p.TTL))
		if p.QueueWait > 0 {
			in = fmt.Sprintf("the %s s the TTL leaves after the %s s queue wait", secs(left), secs(p.QueueWait))
		}
		hints = append(hints, fmt.Sprintf("budgets do not nest: %d attempts × Timeout %s s = %s s do not fit in %s, so a later attempt gets only what is left", p.MaxAttempts, secs(p.Timeout), secs(p.Timeout*time.Duration(p.MaxAttempts)), in))
	}
	if t.HasLimit && p.Timeout > t.Limit {
		hints = append(hints, fmt.Sprintf("Timeout (%s s) is longer than the execution limit less the margin (%s s): the gateway refuses to start with such a Timeout set explicitly", secs(p.Timeout), secs(t.Limit)))
	}
	if t.HasLimit && p.TTL > t.Limit && p.TTL > 0 {
		hints = append(hints, fmt.Sprintf("the TTL (%s s) outlasts the execution limit less the margin (%s s): without async the request ends at the execution limit", secs(p.TTL), secs(t.Limit)))
	}
	return hints
}

// WriteTable writes t as a plain-text table of events, one row each, with
// the time in seconds from arrival, followed by its hints.
func (t *Timeline) WriteTable(w io.Writer) error {
	p := &t.Params
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(at time.Duration, format string, args ...any) {
		fmt.Fprintf(tw, "%s\t%s\n", secs(at), fmt.Sprintf(format, args...))
	}
	fmt.Fprintf(tw, "t(s)\tevent\n")
	from := ""
	if p.TTLFrom != "" {
		from = " (" + p.TTLFrom + ")"
	}
	row(0, "request arrives; TTL deadline at %s%s", secs(p.TTL), from)
	if t.HasLimit {
		row(0, "execution limit at %s (function timeout %s s less the %s s margin)", secs(t.Limit), secs(p.FunctionTimeout), secs(p.Margin))
	}
	if p.QueueWait > 0 {
		row(p.QueueWait, "queue wait over (%s s)", secs(p.QueueWait))
	}
	for _, a := range t.Attempts {
		if a.Wait > 0 {
			row(a.Start-a.Wait, "backoff wait %s s (worst case for retry %d)", secs(a.Wait), a.N-1)
		}
		row(a.Start, "attempt %d starts; window %s s (bounded by %s)", a.N, secs(a.Window), boundName(a.Bound))
		row(a.End, "attempt %d ends: %s", a.N, a.ending())
	}
	answer := strconv.Itoa(t.Status) + " " + t.Code()
	if t.Reason == ReasonNone {
		answer = strconv.Itoa(t.Status) + " from the backend, passed through"
	}
	row(t.At, "answer: %s — %s", answer, t.Why)
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, h := range t.Hints {
		if _, err := fmt.Fprintf(w, "hint: %s\n", h); err != nil {
			return err
		}
	}
	return nil
}

// ending describes how a ended, for the table.
func (a *ExplainedAttempt) ending() string {
	switch a.Record.Outcome {
	case OutcomeStatus:
		return fmt.Sprintf("answered %d", a.Record.Status)
	case OutcomeConnectError:
		if a.Reply.Kind == ReplyRefused {
			return "connection refused"
		}
		return "connection lost"
	}
	s := string(a.Record.Outcome) + " (" + firedName(a.Record.Cause) + " fired"
	if a.Reply.Kind != ReplySilent {
		s += fmt.Sprintf(" before the backend's %s at %s s", a.Reply, secs(a.Start+a.Reply.After))
	}
	return s + ")"
}

func boundName(c Cause) string {
	switch c {
	case CauseTTL:
		return "TTL"
	case CauseTimeout:
		return "Timeout"
	case CauseFunctionLimit:
		return "the execution limit"
	}
	return c.String()
}

func firedName(c Cause) string {
	switch c {
	case CauseTTL:
		return "the TTL"
	case CauseTimeout:
		return "its Timeout"
	case CauseFunctionLimit:
		return "the execution limit"
	}
	return c.String()
}

func deadlineName(c Cause) string {
	if c == CauseFunctionLimit {
		return "execution limit"
	}
	return "TTL"
}

// secs formats d as seconds with exactly three decimals, truncating below
// the millisecond: 60s is "60.000", 300ms is "0.300".
func secs(d time.Duration) string {
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	ms := d / time.Millisecond
	return fmt.Sprintf("%s%d.%03d", sign, ms/1000, ms%1000)
}

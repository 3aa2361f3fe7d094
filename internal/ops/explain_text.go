package ops

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"fngateway/core"
)

// This file is the presentation of `gateway explain`: the reply syntax of
// --attempts, and the table and prose that show a core.Timeline.

// errInvalidReply is returned by parseReply for a value it cannot read.
var errInvalidReply = errors.New("want timeout, refused[@d], reset[@d], ok[@d] or a status such as 503@2s, with d a duration such as 2s or 250ms")

// maxReplyAfter bounds a reply's delay: ten years, as every duration.
const maxReplyAfter = 10 * 365 * 24 * time.Hour

// parseReply reads one reply: "timeout" (no answer: the attempt's deadline
// ends it), "refused" (connection refused), "reset" (connection lost after
// the request was sent), "ok" (200) or a status code from 100 to 599. All
// but "timeout" may carry "@d", the time the reply takes as a Go duration
// ("503@2s", "ok@250ms"); without it the reply is immediate.
func parseReply(s string) (core.Reply, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	word, after, hasAfter := strings.Cut(s, "@")
	var r core.Reply
	switch word {
	case "timeout":
		if hasAfter {
			return core.Reply{}, errInvalidReply
		}
		return r, nil
	case "refused":
		r.Kind = core.ReplyRefused
	case "reset":
		r.Kind = core.ReplyReset
	case "ok":
		r.Kind, r.Status = core.ReplyStatus, http.StatusOK
	default:
		n, err := strconv.Atoi(word)
		if err != nil || n < 100 || n > 599 || len(word) != 3 {
			return core.Reply{}, errInvalidReply
		}
		r.Kind, r.Status = core.ReplyStatus, n
	}
	if hasAfter {
		d, err := time.ParseDuration(after)
		if err != nil || d < 0 || d > maxReplyAfter {
			return core.Reply{}, errInvalidReply
		}
		r.After = d
	}
	return r, nil
}

// parseReplies reads a comma-separated list of replies (see parseReply),
// one per attempt in order. An empty list is nil.
func parseReplies(s string) ([]core.Reply, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []core.Reply
	for i, part := range strings.Split(s, ",") {
		r, err := parseReply(part)
		if err != nil {
			return nil, fmt.Errorf("attempt %d %q: %w", i+1, strings.TrimSpace(part), err)
		}
		out = append(out, r)
	}
	return out, nil
}

// replyText writes r in the form parseReply reads: "timeout", "503@2s",
// "refused", "reset@1.5s".
func replyText(r core.Reply) string {
	var s string
	switch r.Kind {
	case core.ReplyStatus:
		s = strconv.Itoa(r.Status)
	case core.ReplyRefused:
		s = "refused"
	case core.ReplyReset:
		s = "reset"
	default:
		return "timeout"
	}
	if r.After > 0 {
		s += "@" + r.After.String()
	}
	return s
}

// writeTable writes t as a plain-text table of events, one row each, with
// the time in seconds from arrival, followed by its hints. ttlFrom says
// where the TTL came from ("DefaultTTLSecs=60"); empty shows nothing.
func writeTable(w io.Writer, t *core.Timeline, ttlFrom string) error {
	p := &t.Params
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(at time.Duration, format string, args ...any) {
		fmt.Fprintf(tw, "%s\t%s\n", secs(at), fmt.Sprintf(format, args...))
	}
	fmt.Fprintf(tw, "t(s)\tevent\n")
	from := ""
	if ttlFrom != "" {
		from = " (" + ttlFrom + ")"
	}
	row(0, "request arrives; TTL deadline at %s%s", secs(p.TTL), from)
	if t.HasLimit {
		row(0, "execution limit at %s (function timeout %s s less the %s s margin)", secs(t.Limit), secs(p.FunctionTimeout), secs(p.Margin))
	}
	if p.QueueWait > 0 {
		row(p.QueueWait, "queue wait over (%s s)", secs(p.QueueWait))
	}
	for _, r := range attemptRows(t) {
		row(r.at, "%s", r.text)
	}
	answer := strconv.Itoa(t.Status) + " " + t.Code()
	if t.Reason == core.ReasonNone {
		answer = strconv.Itoa(t.Status) + " from the backend, passed through"
	}
	row(t.At, "answer: %s — %s", answer, why(t))
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, h := range t.Hints {
		if _, err := fmt.Fprintf(w, "hint: %s\n", hintText(t, h)); err != nil {
			return err
		}
	}
	return nil
}

// why says in one line why the request ended as it did.
func why(t *core.Timeline) string {
	p := &t.Params
	if t.Stop == core.StopExpired {
		n := len(t.Attempts) + 1
		before := "before any attempt started"
		if n > 1 {
			before = fmt.Sprintf("before attempt %d could start", n)
		}
		if t.EndCause == core.CauseFunctionLimit {
			return fmt.Sprintf("the execution limit less the margin (at %s s) was reached %s", secs(t.Limit), before)
		}
		s := fmt.Sprintf("the TTL (%s s) was over %s", secs(p.TTL), before)
		if n == 1 && p.QueueWait > 0 && p.TTL > 0 {
			s += fmt.Sprintf(": the request waited %s s in the queue", secs(p.QueueWait))
		}
		return s
	}
	if len(t.Attempts) == 0 {
		return ""
	}
	a := t.Attempts[len(t.Attempts)-1]
	if t.Hedged {
		a = t.Attempts[t.Decider]
		if t.Reason == core.ReasonAttemptTimeout {
			return fmt.Sprintf("attempt %d ran out of its Timeout (%s s) with no attempt left to start beside it (MaxAttempts=%d); every attempt still running is cancelled", a.N, secs(a.Window), t.Params.MaxAttempts)
		}
	}
	rec := a.Record
	if t.Stop == core.StopAnswered {
		s := fmt.Sprintf("attempt %d answered %d after %s s", a.N, rec.Status, secs(a.End-a.Start))
		if rec.Status >= 400 {
			s += ", a status that is not retried"
		}
		return s
	}
	stop := stopText(t, a)
	switch {
	case rec.Outcome == core.OutcomeStatus:
		return fmt.Sprintf("attempt %d answered %d after %s s and %s", a.N, rec.Status, secs(a.End-a.Start), stop)
	case rec.Outcome == core.OutcomeFunctionLimit:
		return fmt.Sprintf("the execution limit (less the margin) cut attempt %d at %s s", a.N, secs(a.End))
	case rec.Outcome == core.OutcomeTimeout && rec.Cause == core.CauseTTL:
		return fmt.Sprintf("the TTL ran out during attempt %d", a.N)
	case rec.Outcome == core.OutcomeTimeout:
		return fmt.Sprintf("attempt %d ran out of its Timeout (%s s) and %s", a.N, secs(a.Window), stop)
	case a.Reply.Kind == core.ReplyRefused:
		return fmt.Sprintf("attempt %d was refused a connection and %s", a.N, stop)
	}
	return fmt.Sprintf("attempt %d lost its connection after %s s and %s", a.N, secs(a.End-a.Start), stop)
}

// stopText says why no attempt followed a, the last.
func stopText(t *core.Timeline, a core.ExplainedAttempt) string {
	switch t.Stop {
	case core.StopDeadline:
		return "its deadline ended the request"
	case core.StopMaxAttempts:
		return fmt.Sprintf("it was the last of MaxAttempts=%d", t.Params.MaxAttempts)
	case core.StopBackoff:
		return fmt.Sprintf("the next backoff wait (%s s, worst case) would outlast the %s, %s s away", secs(t.NextWait), deadlineName(t.EndCause), secs(t.Left))
	case core.StopNotSafe:
		after := "a lost response"
		switch a.Record.Outcome {
		case core.OutcomeTimeout:
			after = "a timeout"
		case core.OutcomeStatus:
			after = fmt.Sprintf("a %d", a.Record.Status)
		}
		return fmt.Sprintf("a %s without a client Idempotency-Key is not retried after %s", t.Params.Method, after)
	}
	return "no attempt followed"
}

// hintText words a hint.
func hintText(t *core.Timeline, h core.Hint) string {
	p := &t.Params
	switch h {
	case core.HintTTLUnderTimeout:
		return fmt.Sprintf("the TTL (%s s) is shorter than Timeout (%s s): no attempt can use its whole Timeout, and the TTL, not Timeout, ends a slow request", secs(p.TTL), secs(p.Timeout))
	case core.HintAttemptsDoNotFit:
		in := fmt.Sprintf("the TTL (%s s)", secs(p.TTL))
		if p.QueueWait > 0 {
			in = fmt.Sprintf("the %s s the TTL leaves after the %s s queue wait", secs(p.TTL-p.QueueWait), secs(p.QueueWait))
		}
		total := p.Timeout * time.Duration(p.MaxAttempts)
		return fmt.Sprintf("budgets do not nest: %d attempts × Timeout %s s = %s s do not fit in %s, so a later attempt gets only what is left", p.MaxAttempts, secs(p.Timeout), secs(total), in)
	case core.HintTimeoutOverLimit:
		return fmt.Sprintf("Timeout (%s s) is longer than the execution limit less the margin (%s s): the gateway refuses to start with such a Timeout set explicitly", secs(p.Timeout), secs(t.Limit))
	case core.HintTTLOverLimit:
		return fmt.Sprintf("the TTL (%s s) outlasts the execution limit less the margin (%s s): without async the request ends at the execution limit", secs(p.TTL), secs(t.Limit))
	}
	return fmt.Sprintf("hint %d", h)
}

// explainRow is one row of the table's attempts.
type explainRow struct {
	at   time.Duration
	text string
}

// attemptRows lists the attempts' events; those of a hedged timeline,
// whose attempts overlap, in time order.
func attemptRows(t *core.Timeline) []explainRow {
	var rows []explainRow
	for _, a := range t.Attempts {
		if a.Wait > 0 {
			rows = append(rows, explainRow{a.Start - a.Wait, fmt.Sprintf("backoff wait %s s (worst case for retry %d)", secs(a.Wait), a.N-1)})
		}
		beside := ""
		if a.Beside > 0 {
			beside = fmt.Sprintf(" beside attempt %d, whose Timeout fired (hedge)", a.Beside)
		}
		rows = append(rows, explainRow{a.Start, fmt.Sprintf("attempt %d starts%s; window %s s (bounded by %s)", a.N, beside, secs(a.Window), boundName(a.Bound))})
		rows = append(rows, explainRow{a.End, fmt.Sprintf("attempt %d ends: %s", a.N, ending(a))})
	}
	if t.Hedged {
		slices.SortStableFunc(rows, func(x, y explainRow) int { return cmp.Compare(x.at, y.at) })
	}
	return rows
}

// ending describes how a ended, for the table.
func ending(a core.ExplainedAttempt) string {
	if a.Cancelled {
		s := "cancelled, still running when the request ended (its backend sees the connection closed)"
		if a.Record.Outcome == core.OutcomeTimeout {
			s = "cancelled past its Timeout, still running when the request ended (its backend sees the connection closed)"
		}
		return s
	}
	switch a.Record.Outcome {
	case core.OutcomeStatus:
		return fmt.Sprintf("answered %d", a.Record.Status)
	case core.OutcomeConnectError:
		if a.Reply.Kind == core.ReplyRefused {
			return "connection refused"
		}
		return "connection lost"
	}
	s := string(a.Record.Outcome) + " (" + firedName(a.Record.Cause) + " fired"
	if a.Reply.Kind != core.ReplySilent {
		s += fmt.Sprintf(" before the backend's %s at %s s", replyText(a.Reply), secs(a.Start+a.Reply.After))
	}
	return s + ")"
}

func boundName(c core.Cause) string {
	switch c {
	case core.CauseTTL:
		return "TTL"
	case core.CauseTimeout:
		return "Timeout"
	case core.CauseFunctionLimit:
		return "the execution limit"
	}
	return c.String()
}

func firedName(c core.Cause) string {
	switch c {
	case core.CauseTTL:
		return "the TTL"
	case core.CauseTimeout:
		return "its Timeout"
	case core.CauseFunctionLimit:
		return "the execution limit"
	}
	return c.String()
}

func deadlineName(c core.Cause) string {
	if c == core.CauseFunctionLimit {
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

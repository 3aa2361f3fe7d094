package core

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// span is the part of an explained attempt the tests pin down.
type span struct {
	Start, Window, End time.Duration
	Bound              Cause
	Outcome            Outcome
	Status             int
}

func spansOf(t Timeline) []span {
	var out []span
	for _, a := range t.Attempts {
		out = append(out, span{a.Start, a.Window, a.End, a.Bound, a.Record.Outcome, a.Record.Status})
	}
	return out
}

// mustReplies reads the test cases' short reply lists: timeout, refused,
// reset, ok or a status, each with an optional @duration. (The command's
// own parser, with its error messages, is in functions/.)
func mustReplies(tb testing.TB, s string) []Reply {
	tb.Helper()
	if s == "" {
		return nil
	}
	var out []Reply
	for _, part := range strings.Split(s, ",") {
		word, after, _ := strings.Cut(part, "@")
		var r Reply
		switch word {
		case "timeout":
		case "refused":
			r.Kind = ReplyRefused
		case "reset":
			r.Kind = ReplyReset
		case "ok":
			r.Kind, r.Status = ReplyStatus, 200
		default:
			n, err := strconv.Atoi(word)
			if err != nil {
				tb.Fatalf("reply %q", part)
			}
			r.Kind, r.Status = ReplyStatus, n
		}
		if after != "" {
			d, err := time.ParseDuration(after)
			if err != nil {
				tb.Fatalf("reply %q: %v", part, err)
			}
			r.After = d
		}
		out = append(out, r)
	}
	return out
}

// explainCase is a request to explain and what must come of it.
type explainCase struct {
	name    string
	p       ExplainParams
	replies string
	spans   []span
	status  int
	code    string
	at      time.Duration
	stop    Stop // why no attempt followed; 0: not checked
}

// explainCases are shared by TestExplain and TestExplainMatchesForwarder.
func explainCases() []explainCase {
	const ms, s = time.Millisecond, time.Second
	return []explainCase{
		{
			// The seed's worked example: the second attempt's window is what
			// the TTL leaves, 10 s, and the TTL fires at 60 s.
			name:    "seed example",
			p:       ExplainParams{TTL: 60 * s, Timeout: 45 * s, QueueWait: 5 * s, MaxAttempts: 2},
			replies: "timeout,timeout",
			spans: []span{
				{5 * s, 45 * s, 50 * s, CauseTimeout, OutcomeTimeout, 0},
				{50 * s, 10 * s, 60 * s, CauseTTL, OutcomeTimeout, 0},
			},
			status: 504, code: "TTLExpired", at: 60 * s,
			stop: StopDeadline,
		},
		{
			// Envoy's documented case: route timeout 2 s, per-try 500 ms, 1.7 s
			// used before the third try, which gets 0.3 s.
			name:    "envoy route timeout caps the third try",
			p:       ExplainParams{TTL: 2 * s, Timeout: 500 * ms, QueueWait: 700 * ms, MaxAttempts: 3},
			replies: "timeout",
			spans: []span{
				{700 * ms, 500 * ms, 1200 * ms, CauseTimeout, OutcomeTimeout, 0},
				{1200 * ms, 500 * ms, 1700 * ms, CauseTimeout, OutcomeTimeout, 0},
				{1700 * ms, 300 * ms, 2 * s, CauseTTL, OutcomeTimeout, 0},
			},
			status: 504, code: "TTLExpired", at: 2 * s,
			stop: StopDeadline,
		},
		{
			// The same 1.7 s, partly spent in worst-case backoff waits of
			// 100 ms and 200 ms.
			name:    "envoy case with backoff",
			p:       ExplainParams{TTL: 2 * s, Timeout: 500 * ms, QueueWait: 400 * ms, MaxAttempts: 3, BackoffBase: 100 * ms},
			replies: "timeout",
			spans: []span{
				{400 * ms, 500 * ms, 900 * ms, CauseTimeout, OutcomeTimeout, 0},
				{1000 * ms, 500 * ms, 1500 * ms, CauseTimeout, OutcomeTimeout, 0},
				{1700 * ms, 300 * ms, 2 * s, CauseTTL, OutcomeTimeout, 0},
			},
			status: 504, code: "TTLExpired", at: 2 * s,
		},
		{
			name:    "TTL over in the queue",
			p:       ExplainParams{TTL: 3 * s, Timeout: 45 * s, QueueWait: 5 * s},
			replies: "ok",
			status:  412, code: "TTLExpired", at: 5 * s,
			stop: StopExpired,
		},
		{
			name:   "S7PTTL 0 expires on arrival",
			p:      ExplainParams{TTL: 0, Timeout: 45 * s},
			status: 412, code: "TTLExpired", at: 0,
		},
		{
			name:    "attempts exhausted by their Timeout",
			p:       ExplainParams{TTL: 300 * s, Timeout: 10 * s, MaxAttempts: 2},
			replies: "timeout",
			spans: []span{
				{0, 10 * s, 10 * s, CauseTimeout, OutcomeTimeout, 0},
				{10 * s, 10 * s, 20 * s, CauseTimeout, OutcomeTimeout, 0},
			},
			status: 504, code: "AttemptTimeout", at: 20 * s,
			stop: StopMaxAttempts,
		},
		{
			name:    "last 503 passed through",
			p:       ExplainParams{TTL: 60 * s, Timeout: 45 * s},
			replies: "503@2s,503@2s",
			spans: []span{
				{0, 45 * s, 2 * s, CauseTimeout, OutcomeStatus, 503},
				{2 * s, 45 * s, 4 * s, CauseTimeout, OutcomeStatus, 503},
			},
			status: 503, code: "", at: 4 * s,
			stop: StopMaxAttempts,
		},
		{
			name:    "retry succeeds",
			p:       ExplainParams{TTL: 60 * s, Timeout: 45 * s},
			replies: "503@2s,ok@3s",
			spans: []span{
				{0, 45 * s, 2 * s, CauseTimeout, OutcomeStatus, 503},
				{2 * s, 45 * s, 5 * s, CauseTimeout, OutcomeStatus, 200},
			},
			status: 200, code: "", at: 5 * s,
		},
		{
			name:    "404 is not retried",
			p:       ExplainParams{TTL: 60 * s, Timeout: 45 * s, MaxAttempts: 3},
			replies: "404@1s",
			spans:   []span{{0, 45 * s, 1 * s, CauseTimeout, OutcomeStatus, 404}},
			status:  404, code: "", at: 1 * s,
			stop: StopAnswered,
		},
		{
			name:    "every connection refused",
			p:       ExplainParams{TTL: 60 * s, Timeout: 45 * s, MaxAttempts: 2},
			replies: "refused",
			spans: []span{
				{0, 45 * s, 0, CauseTimeout, OutcomeConnectError, 0},
				{0, 45 * s, 0, CauseTimeout, OutcomeConnectError, 0},
			},
			status: 502, code: "BackendUnavailable", at: 0,
		},
		{
			name:    "execution limit cuts the attempt",
			p:       ExplainParams{TTL: 60 * s, Timeout: 45 * s, FunctionTimeout: 30 * s, Margin: 1 * s, MaxAttempts: 2},
			replies: "timeout",
			spans:   []span{{0, 29 * s, 29 * s, CauseFunctionLimit, OutcomeFunctionLimit, 0}},
			status:  504, code: "FunctionLimit", at: 29 * s,
		},
		{
			name:   "execution limit reached in the queue",
			p:      ExplainParams{TTL: 60 * s, Timeout: 45 * s, QueueWait: 4 * s, FunctionTimeout: 5 * s, Margin: 1 * s},
			status: 504, code: "FunctionLimit", at: 4 * s,
			stop: StopExpired,
		},
		{
			name:    "POST without Idempotency-Key is not retried after a timeout",
			p:       ExplainParams{TTL: 60 * s, Timeout: 10 * s, MaxAttempts: 3, Method: "POST"},
			replies: "timeout",
			spans:   []span{{0, 10 * s, 10 * s, CauseTimeout, OutcomeTimeout, 0}},
			status:  504, code: "AttemptTimeout", at: 10 * s,
			stop: StopNotSafe,
		},
		{
			name:    "POST with Idempotency-Key is retried",
			p:       ExplainParams{TTL: 60 * s, Timeout: 10 * s, MaxAttempts: 2, Method: "POST", ClientKey: true},
			replies: "timeout,ok@1s",
			spans: []span{
				{0, 10 * s, 10 * s, CauseTimeout, OutcomeTimeout, 0},
				{10 * s, 10 * s, 11 * s, CauseTimeout, OutcomeStatus, 200},
			},
			status: 200, code: "", at: 11 * s,
		},
		{
			name:    "POST refused is retried",
			p:       ExplainParams{TTL: 60 * s, Timeout: 10 * s, Method: "POST"},
			replies: "refused,ok@1s",
			spans: []span{
				{0, 10 * s, 0, CauseTimeout, OutcomeConnectError, 0},
				{0, 10 * s, 1 * s, CauseTimeout, OutcomeStatus, 200},
			},
			status: 200, code: "", at: 1 * s,
		},
		{
			name:    "POST lost response is not retried",
			p:       ExplainParams{TTL: 60 * s, Timeout: 10 * s, Method: "POST"},
			replies: "reset@2s,ok",
			spans:   []span{{0, 10 * s, 2 * s, CauseTimeout, OutcomeConnectError, 0}},
			status:  502, code: "BackendUnavailable", at: 2 * s,
			stop: StopNotSafe,
		},
		{
			name:    "backoff wait that cannot fit is not started",
			p:       ExplainParams{TTL: 1 * s, Timeout: 600 * ms, BackoffBase: 500 * ms, MaxAttempts: 2},
			replies: "timeout",
			spans:   []span{{0, 600 * ms, 600 * ms, CauseTimeout, OutcomeTimeout, 0}},
			status:  504, code: "AttemptTimeout", at: 600 * ms,
			stop: StopBackoff,
		},
		{
			name:    "answer later than the Timeout is cut",
			p:       ExplainParams{TTL: 300 * s, Timeout: 45 * s},
			replies: "503@50s",
			spans:   []span{{0, 45 * s, 45 * s, CauseTimeout, OutcomeTimeout, 0}},
			status:  504, code: "AttemptTimeout", at: 45 * s,
		},
		{
			name:    "last reply repeats",
			p:       ExplainParams{TTL: 60 * s, Timeout: 45 * s, MaxAttempts: 3},
			replies: "503@1s",
			spans: []span{
				{0, 45 * s, 1 * s, CauseTimeout, OutcomeStatus, 503},
				{1 * s, 45 * s, 2 * s, CauseTimeout, OutcomeStatus, 503},
				{2 * s, 45 * s, 3 * s, CauseTimeout, OutcomeStatus, 503},
			},
			status: 503, code: "", at: 3 * s,
		},
		{
			name:    "Timeout and TTL ending together: the TTL is reported",
			p:       ExplainParams{TTL: 90 * s, Timeout: 45 * s, MaxAttempts: 3},
			replies: "timeout",
			spans: []span{
				{0, 45 * s, 45 * s, CauseTimeout, OutcomeTimeout, 0},
				{45 * s, 45 * s, 90 * s, CauseTTL, OutcomeTimeout, 0},
			},
			status: 504, code: "TTLExpired", at: 90 * s,
		},
		{
			// 503 says the request was not processed: a POST is retried,
			// after worst-case waits of 200 ms and 400 ms.
			name:    "POST retried after 503 waits its backoff",
			p:       ExplainParams{TTL: 10 * s, Timeout: 1 * s, MaxAttempts: 3, BackoffBase: 200 * ms, Method: http.MethodPost},
			replies: "503@100ms,503@100ms,ok@100ms",
			spans: []span{
				{0, 1 * s, 100 * ms, CauseTimeout, OutcomeStatus, 503},
				{300 * ms, 1 * s, 400 * ms, CauseTimeout, OutcomeStatus, 503},
				{800 * ms, 1 * s, 900 * ms, CauseTimeout, OutcomeStatus, 200},
			},
			status: 200, code: "", at: 900 * ms,
			stop: StopAnswered,
		},
		{
			// The second wait, 1.2 s, does not fit in the 400 ms the
			// execution limit (3 s less the 1 s margin) leaves.
			name:    "backoff wait that outlasts the execution limit",
			p:       ExplainParams{TTL: 60 * s, Timeout: 500 * ms, FunctionTimeout: 3 * s, Margin: 1 * s, MaxAttempts: 4, BackoffBase: 600 * ms},
			replies: "timeout",
			spans: []span{
				{0, 500 * ms, 500 * ms, CauseTimeout, OutcomeTimeout, 0},
				{1100 * ms, 500 * ms, 1600 * ms, CauseTimeout, OutcomeTimeout, 0},
			},
			status: 504, code: "AttemptTimeout", at: 1600 * ms,
			stop: StopBackoff,
		},
		{
			// Waits of 10, 20, 40, 80 ms, then ten times the base.
			name:    "backoff capped at ten times the base",
			p:       ExplainParams{TTL: 60 * s, Timeout: 1 * s, MaxAttempts: 7, BackoffBase: 10 * ms},
			replies: "502@10ms",
			spans: []span{
				{0, 1 * s, 10 * ms, CauseTimeout, OutcomeStatus, 502},
				{20 * ms, 1 * s, 30 * ms, CauseTimeout, OutcomeStatus, 502},
				{50 * ms, 1 * s, 60 * ms, CauseTimeout, OutcomeStatus, 502},
				{100 * ms, 1 * s, 110 * ms, CauseTimeout, OutcomeStatus, 502},
				{190 * ms, 1 * s, 200 * ms, CauseTimeout, OutcomeStatus, 502},
				{300 * ms, 1 * s, 310 * ms, CauseTimeout, OutcomeStatus, 502},
				{410 * ms, 1 * s, 420 * ms, CauseTimeout, OutcomeStatus, 502},
			},
			status: 502, code: "", at: 420 * ms,
			stop: StopMaxAttempts,
		},
	}
}

func TestExplain(t *testing.T) {
	for _, tc := range explainCases() {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			p.Replies = mustReplies(t, tc.replies)
			got := Explain(p)
			if g, w := spansOf(got), tc.spans; !equalSpans(g, w) {
				t.Errorf("attempts:\n got %+v\nwant %+v", g, w)
			}
			if got.Status != tc.status || got.Code() != tc.code || got.At != tc.at {
				t.Errorf("answer = %d %q at %v, want %d %q at %v", got.Status, got.Code(), got.At, tc.status, tc.code, tc.at)
			}
			if tc.stop != 0 && got.Stop != tc.stop {
				t.Errorf("stop = %d, want %d", got.Stop, tc.stop)
			}
		})
	}
}

func equalSpans(a, b []span) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestExplainMatchesForwarder runs every case through the real Forwarder,
// in a synctest bubble with a scripted transport and the backoff jitter
// fixed at Explain's worst case, and checks that it records the same
// attempts and gives the same answer at the same instant.
func TestExplainMatchesForwarder(t *testing.T) {
	for _, tc := range explainCases() {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := tc.p
				p.Replies = mustReplies(t, tc.replies)
				want := Explain(p)

				arrival := time.Now()
				b := Budget{Arrival: arrival, TTL: arrival.Add(p.TTL), Timeout: p.Timeout}
				if p.FunctionTimeout > 0 {
					b.Limit = arrival.Add(p.FunctionTimeout - p.Margin)
				}
				host, _ := url.Parse("http://backend.test")
				maxAttempts := p.MaxAttempts
				if maxAttempts == 0 {
					maxAttempts = max(len(p.Replies), 1)
				}
				req := &Request{
					Method: want.Params.Method, Path: "/", Header: http.Header{}, ClientKey: p.ClientKey,
					Route:  &Route{Prefix: "/", Hosts: HostList{host}, MaxAttempts: maxAttempts},
					Budget: b,
				}
				f := &Forwarder{Transport: &scriptedTransport{p: &p}, BackoffBase: p.BackoffBase, Jitter: func() float64 { return 1 }}
				time.Sleep(p.QueueWait)
				res, err := f.Forward(t.Context(), req)
				at := time.Since(arrival)

				var status int
				var code string
				var attempts []Attempt
				var ge *Error
				switch {
				case errors.As(err, &ge):
					status, code, attempts = ge.HTTPStatus(), ge.Reason.Code(), ge.Attempts
				case err != nil:
					t.Fatalf("Forward: %v", err)
				default:
					status, attempts = res.Response.StatusCode, res.Attempts
					res.Response.Body.Close()
				}
				if status != want.Status || code != want.Code() || at != want.At {
					t.Errorf("engine answer = %d %q at %v, Explain says %d %q at %v", status, code, at, want.Status, want.Code(), want.At)
				}
				var wantRecs []Attempt
				for _, a := range want.Attempts {
					r := a.Record
					r.Host, r.Label = host.Host, "0" // the engine names the host by its position
					wantRecs = append(wantRecs, r)
				}
				if len(attempts) != len(wantRecs) {
					t.Fatalf("engine attempts = %+v, Explain says %+v", attempts, wantRecs)
				}
				for i := range attempts {
					// Explain draws the budget, not the network: the cause
					// and phase of a failure are the engine's alone.
					attempts[i].Failure, attempts[i].Phase = "", ""
					if attempts[i] != wantRecs[i] {
						t.Errorf("engine attempt %d = %+v, Explain says %+v", i+1, attempts[i], wantRecs[i])
					}
				}
			})
		})
	}
}

// scriptedTransport answers attempt n with p's reply n, waiting in fake time
// and giving up when the attempt's context ends, as a real connection would.
type scriptedTransport struct {
	p *ExplainParams
	n int
}

func (st *scriptedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	st.n++
	reply := st.p.reply(st.n)
	ctx := r.Context()
	if reply.Kind == ReplySilent {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	timer := time.NewTimer(reply.After)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-timer.C:
	}
	switch reply.Kind {
	case ReplyRefused:
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	case ReplyReset:
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	}
	return &http.Response{StatusCode: reply.Status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
}

var _ http.RoundTripper = (*scriptedTransport)(nil)

func TestExplainHints(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name string
		p    ExplainParams
		want []Hint
	}{
		{"nested", ExplainParams{TTL: 300 * s, Timeout: 10 * s, MaxAttempts: 3}, nil},
		{"TTL shorter than Timeout", ExplainParams{TTL: 30 * s, Timeout: 45 * s, MaxAttempts: 3}, []Hint{HintTTLUnderTimeout}},
		{"attempts do not fit", ExplainParams{TTL: 60 * s, Timeout: 45 * s, MaxAttempts: 2}, []Hint{HintAttemptsDoNotFit}},
		{"attempts do not fit after the queue", ExplainParams{TTL: 60 * s, Timeout: 29 * s, QueueWait: 5 * s, MaxAttempts: 2}, []Hint{HintAttemptsDoNotFit}},
		{"Timeout beyond the execution limit", ExplainParams{TTL: 20 * s, Timeout: 15 * s, FunctionTimeout: 10 * s, Margin: 1 * s},
			[]Hint{HintTimeoutOverLimit, HintTTLOverLimit}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Explain(tc.p).Hints; !slices.Equal(got, tc.want) {
				t.Errorf("hints = %v, want %v", got, tc.want)
			}
		})
	}
}

func BenchmarkExplain(b *testing.B) {
	const ms, s = time.Millisecond, time.Second
	p := ExplainParams{TTL: 60 * s, Timeout: 45 * s, QueueWait: 5 * s, MaxAttempts: 2}
	b.ReportAllocs()
	for b.Loop() {
		Explain(p)
	}
}

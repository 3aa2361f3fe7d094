package core

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
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

func mustReplies(tb testing.TB, s string) []Reply {
	tb.Helper()
	r, err := ParseReplies(s)
	if err != nil {
		tb.Fatalf("ParseReplies(%q): %v", s, err)
	}
	return r
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
	why     string // a substring of Timeline.Why
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
			why: "the TTL ran out during attempt 2",
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
			why: "the TTL ran out during attempt 3",
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
			why: "before any attempt started: the request waited 5.000 s in the queue",
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
			why: "attempt 2 ran out of its Timeout (10.000 s) and it was the last of MaxAttempts=2",
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
			why: "attempt 2 answered 503 after 2.000 s and it was the last of MaxAttempts=2",
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
			why: "a status that is not retried",
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
			why: "before any attempt started",
		},
		{
			name:    "POST without Idempotency-Key is not retried after a timeout",
			p:       ExplainParams{TTL: 60 * s, Timeout: 10 * s, MaxAttempts: 3, Method: "POST"},
			replies: "timeout",
			spans:   []span{{0, 10 * s, 10 * s, CauseTimeout, OutcomeTimeout, 0}},
			status:  504, code: "AttemptTimeout", at: 10 * s,
			why: "a POST without a client Idempotency-Key is not retried after a timeout",
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
			why: "attempt 1 lost its connection after 2.000 s and a POST without a client Idempotency-Key is not retried after a lost response",
		},
		{
			name:    "backoff wait that cannot fit is not started",
			p:       ExplainParams{TTL: 1 * s, Timeout: 600 * ms, BackoffBase: 500 * ms, MaxAttempts: 2},
			replies: "timeout",
			spans:   []span{{0, 600 * ms, 600 * ms, CauseTimeout, OutcomeTimeout, 0}},
			status:  504, code: "AttemptTimeout", at: 600 * ms,
			why: "the next backoff wait (0.500 s, worst case) would outlast the TTL, 0.400 s away",
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
			if !strings.Contains(got.Why, tc.why) {
				t.Errorf("why = %q, want it to contain %q", got.Why, tc.why)
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

// TestExplainMatchesForwarder runs every backoff-free case through the real
// Forwarder, in a synctest bubble with a scripted transport, and checks that
// it records the same attempts and gives the same answer at the same instant.
func TestExplainMatchesForwarder(t *testing.T) {
	for _, tc := range explainCases() {
		if tc.p.BackoffBase != 0 {
			continue // the engine's waits are random
		}
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
				f := &Forwarder{Transport: &scriptedTransport{p: &p}}
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
					r.Host = host.Host
					wantRecs = append(wantRecs, r)
				}
				if len(attempts) != len(wantRecs) {
					t.Fatalf("engine attempts = %+v, Explain says %+v", attempts, wantRecs)
				}
				for i := range attempts {
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

func TestParseReply(t *testing.T) {
	const ms, s = time.Millisecond, time.Second
	tests := []struct {
		in   string
		want Reply
		str  string
	}{
		{"timeout", Reply{}, "timeout"},
		{" Timeout ", Reply{}, "timeout"},
		{"refused", Reply{Kind: ReplyRefused}, "refused"},
		{"refused@3s", Reply{Kind: ReplyRefused, After: 3 * s}, "refused@3s"},
		{"reset@1.5s", Reply{Kind: ReplyReset, After: 1500 * ms}, "reset@1.5s"},
		{"ok@3s", Reply{Kind: ReplyStatus, Status: 200, After: 3 * s}, "200@3s"},
		{"ok", Reply{Kind: ReplyStatus, Status: 200}, "200"},
		{"503@2s", Reply{Kind: ReplyStatus, Status: 503, After: 2 * s}, "503@2s"},
		{"429@250ms", Reply{Kind: ReplyStatus, Status: 429, After: 250 * ms}, "429@250ms"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseReply(tc.in)
			if err != nil {
				t.Fatalf("ParseReply(%q): %v", tc.in, err)
			}
			if got != tc.want {
				t.Errorf("ParseReply(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
			if g := got.String(); g != tc.str {
				t.Errorf("String() = %q, want %q", g, tc.str)
			}
		})
	}
	for _, in := range []string{"", "timeout@2s", "503@", "503@2", "503@-1s", "99", "600", "0503", "+503", "ok@x", "refusedd", "@1s", "5O3"} {
		t.Run("bad "+in, func(t *testing.T) {
			if got, err := ParseReply(in); !errors.Is(err, ErrInvalidReply) {
				t.Errorf("ParseReply(%q) = %+v, %v; want ErrInvalidReply", in, got, err)
			}
		})
	}
}

func TestParseReplies(t *testing.T) {
	const ms, s = time.Millisecond, time.Second
	got, err := ParseReplies("timeout, 503@2s,refused")
	if err != nil {
		t.Fatal(err)
	}
	want := []Reply{{}, {Kind: ReplyStatus, Status: 503, After: 2 * s}, {Kind: ReplyRefused}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if got, err := ParseReplies(" "); got != nil || err != nil {
		t.Errorf("ParseReplies(blank) = %v, %v; want nil, nil", got, err)
	}
	_, err = ParseReplies("timeout,5x3")
	if !errors.Is(err, ErrInvalidReply) || !strings.Contains(err.Error(), `attempt 2 "5x3"`) {
		t.Errorf("ParseReplies(bad) error = %v; want ErrInvalidReply naming attempt 2", err)
	}
}

func FuzzParseReply(f *testing.F) {
	for _, s := range []string{"timeout", "503@2s", "ok@3s", "refused", "reset@1.5s", "200@1h2m3.5s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		r, err := ParseReply(in)
		if err != nil {
			return
		}
		again, err := ParseReply(r.String())
		if err != nil || again != r {
			t.Fatalf("ParseReply(%q) = %+v; its String %q reads back as %+v, %v", in, r, r.String(), again, err)
		}
	})
}

func TestTimelineWriteTable(t *testing.T) {
	const ms, s = time.Millisecond, time.Second
	p := ExplainParams{TTL: 60 * s, TTLFrom: "DefaultTTLSecs=60", Timeout: 45 * s, QueueWait: 5 * s, MaxAttempts: 2}
	tl := Explain(p)
	var b strings.Builder
	if err := tl.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	want := `t(s)    event
0.000   request arrives; TTL deadline at 60.000 (DefaultTTLSecs=60)
5.000   queue wait over (5.000 s)
5.000   attempt 1 starts; window 45.000 s (bounded by Timeout)
50.000  attempt 1 ends: timeout (its Timeout fired)
50.000  attempt 2 starts; window 10.000 s (bounded by TTL)
60.000  attempt 2 ends: timeout (the TTL fired)
60.000  answer: 504 TTLExpired — the TTL ran out during attempt 2
hint: budgets do not nest: 2 attempts × Timeout 45.000 s = 90.000 s do not fit in the 55.000 s the TTL leaves after the 5.000 s queue wait, so a later attempt gets only what is left
`
	if got := b.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

func TestExplainHints(t *testing.T) {
	const ms, s = time.Millisecond, time.Second
	tests := []struct {
		name string
		p    ExplainParams
		want []string // substrings, one per hint
	}{
		{"nested", ExplainParams{TTL: 300 * s, Timeout: 10 * s, MaxAttempts: 3}, nil},
		{"TTL shorter than Timeout", ExplainParams{TTL: 30 * s, Timeout: 45 * s, MaxAttempts: 3}, []string{"shorter than Timeout"}},
		{"attempts do not fit", ExplainParams{TTL: 60 * s, Timeout: 45 * s, MaxAttempts: 2}, []string{"2 attempts × Timeout 45.000 s = 90.000 s do not fit in the TTL (60.000 s)"}},
		{"Timeout beyond the execution limit", ExplainParams{TTL: 20 * s, Timeout: 15 * s, FunctionTimeout: 10 * s, Margin: 1 * s},
			[]string{"Timeout (15.000 s) is longer than the execution limit less the margin (9.000 s)", "the TTL (20.000 s) outlasts"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Explain(tc.p).Hints
			if len(got) != len(tc.want) {
				t.Fatalf("hints = %q, want %d matching %q", got, len(tc.want), tc.want)
			}
			for i := range got {
				if !strings.Contains(got[i], tc.want[i]) {
					t.Errorf("hint %d = %q, want it to contain %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestSecs(t *testing.T) {
	const ms, s = time.Millisecond, time.Second
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0.000"}, {300 * ms, "0.300"}, {60 * s, "60.000"}, {1500*ms + 999*time.Microsecond, "1.500"}, {-2 * s, "-2.000"},
	}
	for _, tc := range tests {
		if got := secs(tc.d); got != tc.want {
			t.Errorf("secs(%v) = %q, want %q", tc.d, got, tc.want)
		}
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

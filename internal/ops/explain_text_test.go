package ops

import (
	"errors"
	"strings"
	"testing"
	"time"

	"fngateway/core"
)

// TestExplainWhy: the one-line reason of each way a request ends.
func TestExplainWhy(t *testing.T) {
	const ms, s = time.Millisecond, time.Second
	tests := []struct {
		name    string
		p       core.ExplainParams
		replies string
		want    string
	}{
		{"TTL during an attempt", core.ExplainParams{TTL: 60 * s, Timeout: 45 * s, QueueWait: 5 * s, MaxAttempts: 2}, "timeout,timeout", "the TTL ran out during attempt 2"},
		{"TTL over in the queue", core.ExplainParams{TTL: 3 * s, Timeout: 45 * s, QueueWait: 5 * s}, "ok", "the TTL (3.000 s) was over before any attempt started: the request waited 5.000 s in the queue"},
		{"attempts exhausted", core.ExplainParams{TTL: 300 * s, Timeout: 10 * s, MaxAttempts: 2}, "timeout", "attempt 2 ran out of its Timeout (10.000 s) and it was the last of MaxAttempts=2"},
		{"last 503", core.ExplainParams{TTL: 60 * s, Timeout: 45 * s}, "503@2s,503@2s", "attempt 2 answered 503 after 2.000 s and it was the last of MaxAttempts=2"},
		{"404", core.ExplainParams{TTL: 60 * s, Timeout: 45 * s, MaxAttempts: 3}, "404@1s", "attempt 1 answered 404 after 1.000 s, a status that is not retried"},
		{"200", core.ExplainParams{TTL: 60 * s, Timeout: 45 * s}, "ok@1s", "attempt 1 answered 200 after 1.000 s"},
		{"refused", core.ExplainParams{TTL: 60 * s, Timeout: 45 * s, MaxAttempts: 2}, "refused", "attempt 2 was refused a connection and it was the last of MaxAttempts=2"},
		{"execution limit cut", core.ExplainParams{TTL: 60 * s, Timeout: 45 * s, FunctionTimeout: 30 * s, Margin: s, MaxAttempts: 2}, "timeout", "the execution limit (less the margin) cut attempt 1 at 29.000 s"},
		{"execution limit in the queue", core.ExplainParams{TTL: 60 * s, Timeout: 45 * s, QueueWait: 4 * s, FunctionTimeout: 5 * s, Margin: s}, "", "the execution limit less the margin (at 4.000 s) was reached before any attempt started"},
		{"POST timeout", core.ExplainParams{TTL: 60 * s, Timeout: 10 * s, MaxAttempts: 3, Method: "POST"}, "timeout", "attempt 1 ran out of its Timeout (10.000 s) and a POST without a client Idempotency-Key is not retried after a timeout"},
		{"POST lost response", core.ExplainParams{TTL: 60 * s, Timeout: 10 * s, Method: "POST"}, "reset@2s,ok", "attempt 1 lost its connection after 2.000 s and a POST without a client Idempotency-Key is not retried after a lost response"},
		{"backoff cannot fit", core.ExplainParams{TTL: 1 * s, Timeout: 600 * ms, BackoffBase: 500 * ms, MaxAttempts: 2}, "timeout", "attempt 1 ran out of its Timeout (0.600 s) and the next backoff wait (0.500 s, worst case) would outlast the TTL, 0.400 s away"},
		{"S7PTTL 0", core.ExplainParams{TTL: 0, Timeout: 45 * s}, "", "the TTL (0.000 s) was over before any attempt started"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			r, err := parseReplies(tc.replies)
			if err != nil {
				t.Fatal(err)
			}
			p.Replies = r
			tl := core.Explain(p)
			if got := why(&tl); got != tc.want {
				t.Errorf("why = %q\nwant  %q", got, tc.want)
			}
		})
	}
}

func TestExplainParseReply(t *testing.T) {
	const ms, s = time.Millisecond, time.Second
	tests := []struct {
		in   string
		want core.Reply
		str  string
	}{
		{"timeout", core.Reply{}, "timeout"},
		{" Timeout ", core.Reply{}, "timeout"},
		{"refused", core.Reply{Kind: core.ReplyRefused}, "refused"},
		{"refused@3s", core.Reply{Kind: core.ReplyRefused, After: 3 * s}, "refused@3s"},
		{"reset@1.5s", core.Reply{Kind: core.ReplyReset, After: 1500 * ms}, "reset@1.5s"},
		{"ok@3s", core.Reply{Kind: core.ReplyStatus, Status: 200, After: 3 * s}, "200@3s"},
		{"ok", core.Reply{Kind: core.ReplyStatus, Status: 200}, "200"},
		{"503@2s", core.Reply{Kind: core.ReplyStatus, Status: 503, After: 2 * s}, "503@2s"},
		{"429@250ms", core.Reply{Kind: core.ReplyStatus, Status: 429, After: 250 * ms}, "429@250ms"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseReply(tc.in)
			if err != nil {
				t.Fatalf("parseReply(%q): %v", tc.in, err)
			}
			if got != tc.want {
				t.Errorf("parseReply(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
			if g := replyText(got); g != tc.str {
				t.Errorf("replyText = %q, want %q", g, tc.str)
			}
		})
	}
	for _, in := range []string{"", "timeout@2s", "503@", "503@2", "503@-1s", "99", "600", "0503", "+503", "ok@x", "refusedd", "@1s", "5O3"} {
		t.Run("bad "+in, func(t *testing.T) {
			if got, err := parseReply(in); !errors.Is(err, errInvalidReply) {
				t.Errorf("parseReply(%q) = %+v, %v; want errInvalidReply", in, got, err)
			}
		})
	}
}

func TestExplainParseReplies(t *testing.T) {
	const ms, s = time.Millisecond, time.Second
	got, err := parseReplies("timeout, 503@2s,refused")
	if err != nil {
		t.Fatal(err)
	}
	want := []core.Reply{{}, {Kind: core.ReplyStatus, Status: 503, After: 2 * s}, {Kind: core.ReplyRefused}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if got, err := parseReplies(" "); got != nil || err != nil {
		t.Errorf("parseReplies(blank) = %v, %v; want nil, nil", got, err)
	}
	_, err = parseReplies("timeout,5x3")
	if !errors.Is(err, errInvalidReply) || !strings.Contains(err.Error(), `attempt 2 "5x3"`) {
		t.Errorf("parseReplies(bad) error = %v; want errInvalidReply naming attempt 2", err)
	}
}

func FuzzExplainParseReply(f *testing.F) {
	for _, s := range []string{"timeout", "503@2s", "ok@3s", "refused", "reset@1.5s", "200@1h2m3.5s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		r, err := parseReply(in)
		if err != nil {
			return
		}
		again, err := parseReply(replyText(r))
		if err != nil || again != r {
			t.Fatalf("parseReply(%q) = %+v; its text %q reads back as %+v, %v", in, r, replyText(r), again, err)
		}
	})
}

func TestExplainWriteTable(t *testing.T) {
	const ms, s = time.Millisecond, time.Second
	p := core.ExplainParams{TTL: 60 * s, Timeout: 45 * s, QueueWait: 5 * s, MaxAttempts: 2}
	tl := core.Explain(p)
	var b strings.Builder
	if err := writeTable(&b, &tl, "DefaultTTLSecs=60"); err != nil {
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
		p    core.ExplainParams
		want []string // substrings, one per hint
	}{
		{"nested", core.ExplainParams{TTL: 300 * s, Timeout: 10 * s, MaxAttempts: 3}, nil},
		{"TTL shorter than Timeout", core.ExplainParams{TTL: 30 * s, Timeout: 45 * s, MaxAttempts: 3}, []string{"shorter than Timeout"}},
		{"attempts do not fit", core.ExplainParams{TTL: 60 * s, Timeout: 45 * s, MaxAttempts: 2}, []string{"2 attempts × Timeout 45.000 s = 90.000 s do not fit in the TTL (60.000 s)"}},
		{"Timeout beyond the execution limit", core.ExplainParams{TTL: 20 * s, Timeout: 15 * s, FunctionTimeout: 10 * s, Margin: 1 * s},
			[]string{"Timeout (15.000 s) is longer than the execution limit less the margin (9.000 s)", "the TTL (20.000 s) outlasts"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tl := core.Explain(tc.p)
			var got []string
			for _, h := range tl.Hints {
				got = append(got, hintText(&tl, h))
			}
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

func TestExplainSecs(t *testing.T) {
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

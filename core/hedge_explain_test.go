package core

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestExplainHedgedMatchesForward runs hedged scenarios through the engine
// (under synctest, one host per attempt) and through Explain, and checks
// that both tell the same timeline: the answer, its time, and each
// attempt's start, end and outcome.
func TestExplainHedgedMatchesForward(t *testing.T) {
	tests := []struct {
		name    string
		ttl     time.Duration
		method  string
		key     bool
		replies []Reply
		want    string // Explain's summary, checked too
	}{
		{"first answers after its Timeout", 10 * time.Second, "", false,
			[]Reply{{Kind: ReplyStatus, Status: 200, After: 1500 * time.Millisecond}, {}, {}},
			"200 at 1.5s: 1 0s-1.5s status; 2 1s-1.5s cancelled"},
		{"the hedge answers first", 10 * time.Second, "", false,
			[]Reply{{}, {Kind: ReplyStatus, Status: 200, After: 200 * time.Millisecond}, {}},
			"200 at 1.2s: 1 0s-1.2s timeout; 2 1s-1.2s status"},
		{"all hang", 10 * time.Second, "", false, nil,
			"AttemptTimeout at 3s: 1 0s-3s timeout; 2 1s-3s timeout; 3 2s-3s timeout"},
		{"the TTL cuts them all", 2500 * time.Millisecond, "", false, nil,
			"TTLExpired at 2.5s: 1 0s-2.5s timeout; 2 1s-2.5s timeout; 3 2s-2.5s timeout"},
		{"a fast failure is retried at once", 10 * time.Second, "", false,
			[]Reply{{Kind: ReplyStatus, Status: 503, After: 200 * time.Millisecond}, {Kind: ReplyStatus, Status: 200, After: 300 * time.Millisecond}},
			"200 at 500ms: 1 0s-200ms status; 2 200ms-500ms status"},
		{"the latest fails, an older one answers", 10 * time.Second, "", false,
			[]Reply{{Kind: ReplyStatus, Status: 200, After: 1800 * time.Millisecond}, {Kind: ReplyStatus, Status: 503, After: 200 * time.Millisecond}, {}},
			"200 at 1.8s: 1 0s-1.8s status; 2 1s-1.2s status; 3 1.2s-1.8s cancelled"},
		{"POST with a key hedges", 10 * time.Second, "POST", true,
			[]Reply{{Kind: ReplyStatus, Status: 201, After: 1500 * time.Millisecond}, {}},
			"201 at 1.5s: 1 0s-1.5s status; 2 1s-1.5s cancelled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := tt.method
			if method == "" {
				method = "GET"
			}
			tl := Explain(ExplainParams{TTL: tt.ttl, Timeout: time.Second, MaxAttempts: 3, Method: method, ClientKey: tt.key, Replies: tt.replies, Hedge: true})
			if !tl.Hedged {
				t.Fatal("the timeline is not hedged")
			}
			if got := summary(tl.Code(), tl.Status, tl.At, explainedRecords(tl)); got != tt.want {
				t.Errorf("Explain: %s\n want %s", got, tt.want)
			}
			synctest.Test(t, func(t *testing.T) {
				hosts := []string{"h1", "h2", "h3"}
				stub := &stubRT{fn: func(h string, r *http.Request) (*http.Response, error) {
					n := int(h[1] - '0')
					rep := Reply{}
					if len(tt.replies) > 0 {
						rep = tt.replies[min(n, len(tt.replies))-1]
					}
					if rep.Kind == ReplySilent {
						return hang(h, r)
					}
					select {
					case <-time.After(rep.After):
						return answer(rep.Status, h), nil
					case <-r.Context().Done():
						return nil, r.Context().Err()
					}
				}}
				f := &Forwarder{Transport: stub}
				now := time.Now()
				req := &Request{Method: method, Path: "/", Header: http.Header{}, ClientKey: tt.key, Body: []byte("b"),
					Route:  &Route{Hosts: mustHosts(t, hosts...), MaxAttempts: 3, HedgeOnPerTryTimeout: true},
					Budget: Budget{Arrival: now, TTL: now.Add(tt.ttl), Timeout: time.Second}}
				res, err := f.Forward(context.Background(), req)
				var code string
				var status int
				var attempts []Attempt
				if err != nil {
					var ge *Error
					if !errors.As(err, &ge) {
						t.Fatal(err)
					}
					code, status, attempts = ge.Reason.Code(), ge.HTTPStatus(), ge.Attempts
				} else {
					status, attempts = res.Response.StatusCode, res.Attempts
					res.Response.Body.Close()
				}
				// The engine's records, with the starts the engine used.
				var recs []string
				for i, a := range attempts {
					recs = append(recs, recText(i+1, tl.Attempts[i].Start, tl.Attempts[i].Start+time.Duration(a.DurationMs)*time.Millisecond, a.Outcome))
				}
				if got := summary(code, status, time.Since(now), recs); got != tt.want {
					t.Errorf("Forward: %s\n want %s", got, tt.want)
				}
			})
		})
	}
}

func recText(n int, start, end time.Duration, o Outcome) string {
	return strings.Join([]string{string(rune('0' + n)), start.String() + "-" + end.String(), string(o)}, " ")
}

func explainedRecords(tl Timeline) []string {
	var out []string
	for _, a := range tl.Attempts {
		out = append(out, recText(a.N, a.Start, a.End, a.Record.Outcome))
	}
	return out
}

func summary(code string, status int, at time.Duration, recs []string) string {
	head := code
	if head == "" {
		head = strconv.Itoa(status)
	}
	return head + " at " + at.String() + ": " + strings.Join(recs, "; ")
}

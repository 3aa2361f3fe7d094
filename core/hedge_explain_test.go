package core

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"fngateway/internal/testutil"
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
					return play(rep, h, r)
				}}
				f := &Forwarder{Transport: stub}
				now := time.Now()
				req := &Request{Method: method, Path: "/", Header: http.Header{}, ClientKey: tt.key, Body: []byte("b"),
					Route:  &Route{Hosts: testutil.Hosts(t, hosts...), MaxAttempts: 3, HedgeOnPerTryTimeout: true},
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

// TestExplainHedgedBackoffMatchesForward is TestExplainHedgedMatchesForward
// for hedged requests whose retries wait a backoff, with the engine's
// jitter fixed at Explain's worst case.
func TestExplainHedgedBackoffMatchesForward(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name    string
		replies []Reply
		want    string
	}{
		{"a fast failure is retried after its wait",
			[]Reply{{Kind: ReplyStatus, Status: 503, After: 200 * ms}, {Kind: ReplyStatus, Status: 200, After: 300 * ms}},
			"200 at 800ms: 1 0s-200ms status; 2 500ms-800ms status"},
		{"an older attempt answers during the wait",
			[]Reply{{Kind: ReplyStatus, Status: 200, After: 1500 * ms}, {Kind: ReplyStatus, Status: 503, After: 100 * ms}, {}},
			"200 at 1.5s: 1 0s-1.5s status; 2 1s-1.1s status"},
		{"every attempt fails fast",
			[]Reply{{Kind: ReplyStatus, Status: 502, After: 100 * ms}},
			"502 at 1.2s: 1 0s-100ms status; 2 400ms-500ms status; 3 1.1s-1.2s status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := ExplainParams{TTL: 10 * time.Second, Timeout: time.Second, MaxAttempts: 3, BackoffBase: 300 * ms, Replies: tt.replies, Hedge: true}
			tl := Explain(p)
			if !tl.Hedged {
				t.Fatal("the timeline is not hedged")
			}
			if got := summary(tl.Code(), tl.Status, tl.At, explainedRecords(tl)); got != tt.want {
				t.Errorf("Explain: %s\n want %s", got, tt.want)
			}
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				var mu sync.Mutex
				starts := map[string]time.Duration{}
				stub := &stubRT{fn: func(h string, r *http.Request) (*http.Response, error) {
					mu.Lock()
					starts[h] = time.Since(start)
					mu.Unlock()
					rep := tt.replies[min(int(h[1]-'0'), len(tt.replies))-1]
					return play(rep, h, r)
				}}
				f := &Forwarder{Transport: stub, BackoffBase: p.BackoffBase, Jitter: func() float64 { return 1 }}
				req := &Request{Method: http.MethodGet, Path: "/", Header: http.Header{}, Body: []byte("b"),
					Route:  &Route{Hosts: testutil.Hosts(t, "h1", "h2", "h3"), MaxAttempts: p.MaxAttempts, HedgeOnPerTryTimeout: true},
					Budget: Budget{Arrival: start, TTL: start.Add(p.TTL), Timeout: p.Timeout}}
				res, err := f.Forward(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				res.Response.Body.Close()
				var recs []string
				for i, a := range res.Attempts {
					s := starts["h"+strconv.Itoa(i+1)]
					recs = append(recs, recText(i+1, s, s+time.Duration(a.DurationMs)*ms, a.Outcome))
				}
				if got := summary("", res.Response.StatusCode, time.Since(start), recs); got != tt.want {
					t.Errorf("Forward: %s\n want %s", got, tt.want)
				}
			})
		})
	}
}

// play answers r from host h as rep says: never (a silent host), or with
// rep.Status after rep.After unless the attempt is cancelled first.
func play(rep Reply, h string, r *http.Request) (*http.Response, error) {
	if rep.Kind == ReplySilent {
		return hang(h, r)
	}
	select {
	case <-time.After(rep.After):
		return answer(rep.Status, h), nil
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
}

package core

import (
	"cmp"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"fngateway/internal/testutil"
)

// backendLog records, per host, when each attempt started and ended.
type backendLog struct {
	mu     sync.Mutex
	start  time.Time
	events []backendEvent
	bodies []string
}

type backendEvent struct {
	at   time.Duration
	text string
}

func (l *backendLog) add(what string, host string, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, backendEvent{d, host + " " + what + " " + d.String()})
}

// String lists the events in time order, those at one instant by text.
func (l *backendLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ev := slices.Clone(l.events)
	slices.SortStableFunc(ev, func(a, b backendEvent) int {
		if a.at != b.at {
			return cmp.Compare(a.at, b.at)
		}
		return strings.Compare(a.text, b.text)
	})
	var out []string
	for _, e := range ev {
		out = append(out, e.text)
	}
	return strings.Join(out, "|")
}

// script gives each host a reply: after d, a status, or hang (status 0)
// until the attempt's context ends.
type script map[string]struct {
	after  time.Duration
	status int
}

func (sc script) rt(l *backendLog) func(string, *http.Request) (*http.Response, error) {
	return func(host string, r *http.Request) (*http.Response, error) {
		if r.Body != nil {
			b, _ := io.ReadAll(r.Body)
			l.mu.Lock()
			l.bodies = append(l.bodies, host+":"+string(b)+":"+r.Header.Get("X-Envoy-Expected-Rq-Timeout-Ms"))
			l.mu.Unlock()
		} else {
			l.mu.Lock()
			l.bodies = append(l.bodies, host+"::"+r.Header.Get("X-Envoy-Expected-Rq-Timeout-Ms"))
			l.mu.Unlock()
		}
		l.add("start", host, time.Since(l.start))
		s := sc[host]
		if s.status != 0 {
			t := time.NewTimer(s.after)
			select {
			case <-t.C:
				l.add("answer", host, time.Since(l.start))
				return answer(s.status, host), nil
			case <-r.Context().Done():
			}
		} else {
			<-r.Context().Done()
		}
		l.add("closed", host, time.Since(l.start))
		return nil, r.Context().Err()
	}
}

func TestForwardHedged(t *testing.T) {
	type rep = struct {
		after  time.Duration
		status int
	}
	tests := []struct {
		name        string
		method      string
		clientKey   bool
		hosts       string
		maxAttempts int
		ttl         time.Duration
		budget      *RetryBudget
		sc          script

		wantStatus   int
		wantReason   Reason
		wantElapsed  time.Duration
		wantOutcomes string
		wantEvents   string
		wantHedges   int64
		wantBodies   string
	}{
		{name: "the first attempt answers after its Timeout, beside the second", hosts: "a,b,c", ttl: 10 * time.Second,
			sc:         script{"a": rep{1500 * time.Millisecond, 200}},
			wantStatus: 200, wantElapsed: 1500 * time.Millisecond, wantOutcomes: "status,cancelled",
			wantEvents: "a start 0s|b start 1s|a answer 1.5s|b closed 1.5s", wantHedges: 1,
			wantBodies: "a::1000|b::1000"},
		{name: "the hedge answers first; the first attempt is cancelled", hosts: "a,b", ttl: 10 * time.Second,
			sc:         script{"b": rep{200 * time.Millisecond, 200}},
			wantStatus: 200, wantElapsed: 1200 * time.Millisecond, wantOutcomes: "timeout,status",
			wantEvents: "a start 0s|b start 1s|a closed 1.2s|b answer 1.2s", wantHedges: 1},
		{name: "all hang: 504 AttemptTimeout at the last Timeout, all cancelled then", hosts: "a,b,c", ttl: 10 * time.Second,
			sc:         script{},
			wantReason: ReasonAttemptTimeout, wantElapsed: 3 * time.Second, wantOutcomes: "timeout,timeout,timeout",
			wantEvents: "a start 0s|b start 1s|c start 2s|a closed 3s|b closed 3s|c closed 3s", wantHedges: 2},
		{name: "the TTL cuts every attempt", hosts: "a,b,c", ttl: 2500 * time.Millisecond,
			sc:         script{},
			wantReason: ReasonTTLExpired, wantElapsed: 2500 * time.Millisecond, wantOutcomes: "timeout,timeout,timeout",
			wantEvents: "a start 0s|b start 1s|c start 2s|a closed 2.5s|b closed 2.5s|c closed 2.5s", wantHedges: 2,
			wantBodies: "a::1000|b::1000|c::500"},
		{name: "a fast failure is retried at once, as without hedging", hosts: "a,b", ttl: 10 * time.Second,
			sc:         script{"a": rep{200 * time.Millisecond, 503}, "b": rep{300 * time.Millisecond, 200}},
			wantStatus: 200, wantElapsed: 500 * time.Millisecond, wantOutcomes: "status,status",
			wantEvents: "a start 0s|a answer 200ms|b start 200ms|b answer 500ms", wantHedges: 0},
		{name: "the last attempt fails; an older one still answers within its Timeout", hosts: "a,b", ttl: 10 * time.Second,
			sc:         script{"a": rep{1800 * time.Millisecond, 200}, "b": rep{200 * time.Millisecond, 503}},
			wantStatus: 200, wantElapsed: 1800 * time.Millisecond, wantOutcomes: "status,status",
			wantEvents: "a start 0s|b start 1s|b answer 1.2s|a answer 1.8s", wantHedges: 1},
		{name: "POST without a client key does not hedge", method: "POST", hosts: "a,b", ttl: 10 * time.Second,
			sc:         script{"a": rep{1500 * time.Millisecond, 200}},
			wantReason: ReasonAttemptTimeout, wantElapsed: time.Second, wantOutcomes: "timeout",
			wantEvents: "a start 0s|a closed 1s", wantHedges: 0},
		{name: "POST with a client key hedges, the body sent to each", method: "POST", clientKey: true, hosts: "a,b", ttl: 10 * time.Second,
			sc:         script{"a": rep{1500 * time.Millisecond, 201}},
			wantStatus: 201, wantElapsed: 1500 * time.Millisecond, wantOutcomes: "status,cancelled",
			wantEvents: "a start 0s|b start 1s|a answer 1.5s|b closed 1.5s", wantHedges: 1,
			wantBodies: "a:payload:1000|b:payload:1000"},
		{name: "the retry budget refuses the hedge", hosts: "a,b", ttl: 10 * time.Second, budget: NewRetryBudget(20, 0),
			sc:         script{"a": rep{1500 * time.Millisecond, 200}},
			wantReason: ReasonAttemptTimeout, wantElapsed: time.Second, wantOutcomes: "timeout",
			wantEvents: "a start 0s|a closed 1s", wantHedges: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				log := &backendLog{start: time.Now()}
				stub := &stubRT{fn: tt.sc.rt(log)}
				stats := &Stats{}
				f := &Forwarder{Transport: stub, Stats: stats, RetryBudget: tt.budget}
				hosts := testutil.Hosts(t, strings.Split(tt.hosts, ",")...)
				route := &Route{Prefix: "/", Hosts: hosts, MaxAttempts: len(hosts), HedgeOnPerTryTimeout: true}
				now := time.Now()
				method := tt.method
				if method == "" {
					method = "GET"
				}
				req := &Request{Method: method, Path: "/x", Header: http.Header{}, Route: route,
					Budget: Budget{Arrival: now, TTL: now.Add(tt.ttl), Timeout: time.Second}, IdempotencyKey: "k", ClientKey: tt.clientKey}
				if method == "POST" {
					req.Body = []byte("payload")
				}
				res, err := f.Forward(context.Background(), req)
				elapsed := time.Since(now)
				var attempts []Attempt
				if tt.wantReason != ReasonNone {
					var ge *Error
					if !errors.As(err, &ge) || ge.Reason != tt.wantReason {
						t.Fatalf("Forward = %v, %v; want %v", res, err, tt.wantReason.Code())
					}
					attempts = ge.Attempts
				} else {
					if err != nil {
						t.Fatalf("Forward: %v", err)
					}
					if res.Response.StatusCode != tt.wantStatus {
						t.Errorf("status = %d; want %d", res.Response.StatusCode, tt.wantStatus)
					}
					res.Response.Body.Close()
					attempts = res.Attempts
				}
				if elapsed != tt.wantElapsed {
					t.Errorf("elapsed = %v; want %v", elapsed, tt.wantElapsed)
				}
				synctest.Wait() // the losers' backends see their cancellation
				var outcomes []string
				for _, a := range attempts {
					outcomes = append(outcomes, string(a.Outcome))
				}
				if got := strings.Join(outcomes, ","); got != tt.wantOutcomes {
					t.Errorf("outcomes = %s; want %s", got, tt.wantOutcomes)
				}
				if got := log.String(); got != tt.wantEvents {
					t.Errorf("backend events = %s\n want %s", got, tt.wantEvents)
				}
				if got := stats.Attempts.Load(); got != int64(len(attempts)) {
					t.Errorf("stats attempts = %d; want %d, every attempt started", got, len(attempts))
				}
				if got := stats.Hedges.Load(); got != tt.wantHedges {
					t.Errorf("stats hedges = %d; want %d", got, tt.wantHedges)
				}
				var marked int64
				for _, a := range attempts {
					if a.Hedge {
						marked++
					}
				}
				if marked != tt.wantHedges {
					t.Errorf("attempts marked Hedge = %d; want %d (the hedges)", marked, tt.wantHedges)
				}
				if tt.wantBodies != "" {
					if got := strings.Join(log.bodies, "|"); got != tt.wantBodies {
						t.Errorf("backends got %s; want %s", got, tt.wantBodies)
					}
				}
				if tt.budget != nil {
					if got := stats.RetryBudgetExhausted.Load(); got != 1 {
						t.Errorf("retry_budget_exhausted = %d; want 1", got)
					}
					if _, r := tt.budget.InFlight(); r != 0 {
						t.Errorf("retries in flight after the request = %d; want 0", r)
					}
				}
			})
		})
	}
}

// TestForwardHedgedStreamedBody: a streamed body goes to one attempt only.
func TestForwardHedgedStreamedBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stub := &stubRT{fn: hang}
		f := &Forwarder{Transport: stub}
		now := time.Now()
		req := &Request{Method: "PUT", Path: "/x", Header: http.Header{}, ClientKey: true, BodyStream: strings.NewReader("big"),
			Route:  &Route{Hosts: testutil.Hosts(t, "a", "b"), MaxAttempts: 2, HedgeOnPerTryTimeout: true},
			Budget: Budget{Arrival: now, TTL: now.Add(10 * time.Second), Timeout: time.Second}}
		_, err := f.Forward(context.Background(), req)
		if ReasonOf(err) != ReasonAttemptTimeout || time.Since(now) != time.Second {
			t.Fatalf("err = %v after %v; want AttemptTimeout after 1s", err, time.Since(now))
		}
		if got := stub.hosts(); len(got) != 1 {
			t.Errorf("hosts tried = %v; a streamed body cannot hedge", got)
		}
	})
}

// backoffObserver is an Observer that records the backoff waits it is told
// of, as "after attempt n at <offset>: <wait>".
type backoffObserver struct {
	mu    sync.Mutex
	start time.Time
	waits []string
}

var _ Observer = (*backoffObserver)(nil)

func (o *backoffObserver) Backoff(_ context.Context, n int, start time.Time, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.waits = append(o.waits, "after attempt "+strconv.Itoa(n)+" at "+start.Sub(o.start).String()+": "+d.String())
}

func (*backoffObserver) EndRequest(context.Context, RequestEnd) {}
func (*backoffObserver) StartAttempt(context.Context, AttemptStart, http.Header) func(Attempt) {
	return func(Attempt) {}
}
func (*backoffObserver) TraceContext(context.Context) string { return "" }
func (*backoffObserver) StartHandoff(ctx context.Context) (context.Context, func(string, error)) {
	return ctx, func(string, error) {}
}
func (*backoffObserver) StartContinuation(ctx context.Context, _, _ string, _ int) (context.Context, func()) {
	return ctx, func() {}
}
func (*backoffObserver) StartResultWrite(context.Context, string) func(error) { return func(error) {} }

// TestForwardReportsBackoff: the sequential and the hedged loop both tell
// the Observer of each backoff wait they start (a span in infra/otel), and
// of none when there is no wait.
func TestForwardReportsBackoff(t *testing.T) {
	type rep = struct {
		after  time.Duration
		status int
	}
	tests := []struct {
		name        string
		hedge       bool
		backoff     time.Duration
		wantWaits   string
		wantElapsed time.Duration
	}{
		{"sequential", false, 100 * time.Millisecond, "after attempt 1 at 200ms: 100ms", 600 * time.Millisecond},
		{"hedged", true, 100 * time.Millisecond, "after attempt 1 at 200ms: 100ms", 600 * time.Millisecond},
		{"sequential, no wait", false, 0, "", 500 * time.Millisecond},
		{"hedged, no wait", true, 0, "", 500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				now := time.Now()
				log := &backendLog{start: now}
				sc := script{"a": rep{200 * time.Millisecond, 503}, "b": rep{300 * time.Millisecond, 200}}
				obs := &backoffObserver{start: now}
				f := &Forwarder{Transport: &stubRT{fn: sc.rt(log)}, BackoffBase: tt.backoff, Jitter: worstJitter, Observer: obs}
				req := &Request{Method: "GET", Path: "/x", Header: http.Header{},
					Route:  &Route{Hosts: testutil.Hosts(t, "a", "b"), MaxAttempts: 2, HedgeOnPerTryTimeout: tt.hedge},
					Budget: Budget{Arrival: now, TTL: now.Add(10 * time.Second), Timeout: time.Second}}
				res, err := f.Forward(context.Background(), req)
				if err != nil {
					t.Fatalf("Forward: %v", err)
				}
				res.Response.Body.Close()
				if res.Response.StatusCode != 200 || time.Since(now) != tt.wantElapsed {
					t.Errorf("answer %d after %v; want 200 after %v", res.Response.StatusCode, time.Since(now), tt.wantElapsed)
				}
				if got := strings.Join(obs.waits, "|"); got != tt.wantWaits {
					t.Errorf("backoff waits reported = %q; want %q", got, tt.wantWaits)
				}
			})
		})
	}
}

// TestForwardHedgedAnswerDuringRetryWait: the latest attempt fails and its
// retry waits out its backoff when an older attempt answers. The request
// ends with that answer, and the retry that never started gives its
// RetryBudget slot back.
func TestForwardHedgedAnswerDuringRetryWait(t *testing.T) {
	type rep = struct {
		after  time.Duration
		status int
	}
	synctest.Test(t, func(t *testing.T) {
		log := &backendLog{start: time.Now()}
		sc := script{"a": rep{1500 * time.Millisecond, 200}, "b": rep{100 * time.Millisecond, 503}}
		budget := NewRetryBudget(100, 10)
		f := &Forwarder{Transport: &stubRT{fn: sc.rt(log)}, RetryBudget: budget, BackoffBase: 500 * time.Millisecond, Jitter: worstJitter}
		route := &Route{Prefix: "/", Hosts: testutil.Hosts(t, "a", "b", "c"), MaxAttempts: 3, HedgeOnPerTryTimeout: true}
		now := time.Now()
		req := &Request{Method: "GET", Path: "/x", Header: http.Header{}, Route: route,
			Budget: Budget{Arrival: now, TTL: now.Add(10 * time.Second), Timeout: time.Second}}
		res, err := f.Forward(context.Background(), req)
		if err != nil {
			t.Fatalf("Forward: %v", err)
		}
		res.Response.Body.Close()
		if got, want := res.Response.StatusCode, 200; got != want {
			t.Errorf("status = %d; want %d", got, want)
		}
		if got, want := time.Since(now), 1500*time.Millisecond; got != want {
			t.Errorf("elapsed = %v; want %v (a's answer, during the 1s wait after b)", got, want)
		}
		synctest.Wait()
		if got, want := log.String(), "a start 0s|b start 1s|b answer 1.1s|a answer 1.5s"; got != want {
			t.Errorf("backend events = %s\n want %s", got, want)
		}
		if _, r := budget.InFlight(); r != 0 {
			t.Errorf("retries in flight after the request = %d; want 0", r)
		}
	})
}

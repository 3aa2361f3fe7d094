package core

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"fngateway/internal/testutil"
)

// answerAfter answers 200 after d, or fails when the attempt is cut first.
func answerAfter(d time.Duration) func(string, *http.Request) (*http.Response, error) {
	return func(h string, r *http.Request) (*http.Response, error) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return answer(200, h), nil
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
}

// TestHealthIgnoresClientChosenDeadlines: attempts cut by a Timeout or TTL
// the client shortened below the route's own (S7PTimeout, S7PTTL) eject no
// host, while the same cuts by the route's own Timeout do (docs/security.md#host-health-and-client-chosen-budgets).
func TestHealthIgnoresClientChosenDeadlines(t *testing.T) {
	cases := []struct {
		name        string
		budget      func(now time.Time) Budget
		wantEjected string
	}{
		{"client Timeout below the route's", func(now time.Time) Budget {
			return Budget{Arrival: now, TTL: now.Add(time.Minute), Timeout: time.Millisecond, ClientTimeout: true}
		}, ""},
		{"client TTL below the route's", func(now time.Time) Budget {
			return Budget{Arrival: now, TTL: now.Add(time.Millisecond), Timeout: time.Second, ClientTTL: true}
		}, ""},
		{"the route's own Timeout", func(now time.Time) Budget {
			return Budget{Arrival: now, TTL: now.Add(time.Minute), Timeout: time.Millisecond}
		}, "a"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				stub := &stubRT{fn: answerAfter(10 * time.Millisecond)} // healthy: answers in 10ms
				stats := &Stats{}
				ej := &Ejector{}
				f := &Forwarder{Transport: stub, Stats: stats, Ejector: ej}
				route := &Route{Prefix: "/", Hosts: testutil.Hosts(t, "a", "b"), MaxAttempts: 1, EjectAfterFailures: 5, EjectFor: 30 * time.Second}
				for range 5 {
					now := time.Now()
					_, err := f.Forward(context.Background(), &Request{Method: "GET", Path: "/", Header: http.Header{}, Route: route, Budget: c.budget(now)})
					if ReasonOf(err) == ReasonNone {
						t.Fatalf("Forward = %v; want a deadline error", err)
					}
				}
				var ejected []string
				for _, e := range ej.Ejected(time.Now()) {
					ejected = append(ejected, e.Host)
				}
				if got := strings.Join(ejected, ","); got != c.wantEjected {
					t.Errorf("ejected = %q; want %q", got, c.wantEjected)
				}
				if got, want := stats.Ejections.Load(), int64(len(ejected)); got != want {
					t.Errorf("stats ejections = %d; want %d", got, want)
				}
				// A sixth request with the route's own budget goes to a
				// first unless a was ejected.
				stub.mu.Lock()
				stub.seen = nil
				stub.mu.Unlock()
				now := time.Now()
				start := now
				res, err := f.Forward(context.Background(), &Request{Method: "GET", Path: "/", Header: http.Header{}, Route: route,
					Budget: Budget{Arrival: now, TTL: now.Add(time.Minute), Timeout: time.Second}})
				if err != nil {
					t.Fatalf("sixth Forward: %v", err)
				}
				res.Response.Body.Close()
				wantFirst := "a"
				if c.wantEjected != "" {
					wantFirst = "b"
				}
				if got := stub.hosts(); len(got) != 1 || got[0] != wantFirst {
					t.Errorf("sixth request went to %v; want [%s]", got, wantFirst)
				}
				if got, want := time.Since(start), 10*time.Millisecond; got != want {
					t.Errorf("sixth request took %v; want %v", got, want)
				}
			})
		})
	}
}

// TestRetryBudgetIgnoresClientChosenTimeouts: a retry after an attempt cut
// by the client's shortened Timeout holds no RetryBudget slot, so another
// client's retry after a real failure still finds one; it starts only while
// the budget has room.
func TestRetryBudgetIgnoresClientChosenTimeouts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		refused := errors.New("connection refused")
		stub := &stubRT{fn: func(h string, r *http.Request) (*http.Response, error) {
			if r.URL.Path == "/down" && h == "a" {
				return nil, refused
			}
			return answerAfter(100*time.Millisecond)(h, r)
		}}
		stats := &Stats{}
		budget := NewRetryBudget(0, 1) // one retry in flight on the instance
		f := &Forwarder{Transport: stub, Stats: stats, RetryBudget: budget}
		route := &Route{Prefix: "/", Hosts: testutil.Hosts(t, "a", "b"), MaxAttempts: 2, EjectAfterFailures: -1}
		send := func(path string, b Budget) (*Result, error) {
			return f.Forward(context.Background(), &Request{Method: "GET", Path: path, Header: http.Header{}, Route: route, Budget: b})
		}
		now := time.Now()
		var wg sync.WaitGroup
		var chosenErr error
		wg.Go(func() {
			// Its first attempt is cut at 1ms by the client's Timeout; its
			// retry runs at b until 1ms later, cut again.
			_, chosenErr = send("/slow", Budget{Arrival: now, TTL: now.Add(time.Minute), Timeout: time.Millisecond, ClientTimeout: true})
		})
		time.Sleep(time.Millisecond)
		synctest.Wait() // the client-chosen retry is in flight now
		if _, retries := budget.InFlight(); retries != 0 {
			t.Errorf("retries in flight during a client-chosen retry = %d; want 0", retries)
		}
		res, err := send("/down", Budget{Arrival: time.Now(), TTL: time.Now().Add(time.Minute), Timeout: time.Second})
		if err != nil {
			t.Errorf("Forward /down: %v; want its retry to find the budget's slot", err)
		} else {
			res.Response.Body.Close()
			if got := len(res.Attempts); got != 2 {
				t.Errorf("/down made %d attempts; want 2 (its retry found the budget's slot)", got)
			}
		}
		wg.Wait()
		if ReasonOf(chosenErr) != ReasonAttemptTimeout {
			t.Errorf("client-chosen request: %v; want AttemptTimeout", chosenErr)
		}
		if got := stats.RetryBudgetExhausted.Load(); got != 0 {
			t.Errorf("retry_budget_exhausted = %d; want 0", got)
		}
		if got := stats.Retries.Load(); got != 2 {
			t.Errorf("retries = %d; want 2", got)
		}

		// With the budget spent by a real retry, a client-chosen retry
		// does not start.
		wg.Go(func() {
			res, err := send("/down", Budget{Arrival: time.Now(), TTL: time.Now().Add(time.Minute), Timeout: time.Second})
			if err == nil {
				res.Response.Body.Close()
			}
		})
		synctest.Wait() // /down's retry holds the slot
		now = time.Now()
		_, err = send("/slow", Budget{Arrival: now, TTL: now.Add(time.Minute), Timeout: time.Millisecond, ClientTimeout: true})
		var ge *Error
		if !errors.As(err, &ge) || len(ge.Attempts) != 1 {
			t.Errorf("client-chosen request with the budget spent: %v; want one attempt", err)
		}
		if got := stats.RetryBudgetExhausted.Load(); got != 1 {
			t.Errorf("retry_budget_exhausted = %d; want 1", got)
		}
		wg.Wait()
	})
}

// TestBudgetChosen is the rule's table.
func TestBudgetChosen(t *testing.T) {
	cases := []struct {
		b    Budget
		c    Cause
		want bool
	}{
		{Budget{ClientTimeout: true}, CauseTimeout, true},
		{Budget{ClientTimeout: true}, CauseTTL, false},
		{Budget{ClientTTL: true}, CauseTTL, true},
		{Budget{ClientTTL: true}, CauseTimeout, false},
		{Budget{ClientTimeout: true, ClientTTL: true}, CauseFunctionLimit, false},
		{Budget{}, CauseTimeout, false},
		{Budget{}, CauseNone, false},
	}
	for _, c := range cases {
		if got := c.b.Chosen(c.c); got != c.want {
			t.Errorf("%+v.Chosen(%v) = %v; want %v", c.b, c.c, got, c.want)
		}
	}
}

// TestHedgeIgnoresClientChosenTimeouts: a hedge started by the client's
// shortened Timeout holds no RetryBudget slot; one started by the route's
// own Timeout does.
func TestHedgeIgnoresClientChosenTimeouts(t *testing.T) {
	for _, c := range []struct {
		name        string
		chosen      bool
		wantRetries int64
	}{
		{"client Timeout", true, 0},
		{"route Timeout", false, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				stub := &stubRT{fn: answerAfter(100 * time.Millisecond)}
				stats := &Stats{}
				budget := NewRetryBudget(0, 1)
				f := &Forwarder{Transport: stub, Stats: stats, RetryBudget: budget}
				route := &Route{Prefix: "/", Hosts: testutil.Hosts(t, "a", "b"), MaxAttempts: 2, HedgeOnPerTryTimeout: true, EjectAfterFailures: -1}
				now := time.Now()
				var wg sync.WaitGroup
				wg.Go(func() {
					// Both attempts run past the second Timeout: it ends
					// the request at 2ms.
					_, err := f.Forward(context.Background(), &Request{Method: "GET", Path: "/", Header: http.Header{}, Route: route,
						Budget: Budget{Arrival: now, TTL: now.Add(time.Minute), Timeout: time.Millisecond, ClientTimeout: c.chosen}})
					if ReasonOf(err) != ReasonAttemptTimeout {
						t.Errorf("Forward: %v; want AttemptTimeout", err)
					}
				})
				time.Sleep(time.Millisecond)
				synctest.Wait() // the hedge runs beside the first attempt
				if got := stats.Hedges.Load(); got != 1 {
					t.Errorf("hedges = %d; want 1", got)
				}
				if _, retries := budget.InFlight(); retries != c.wantRetries {
					t.Errorf("retries in flight during the hedge = %d; want %d", retries, c.wantRetries)
				}
				wg.Wait()
			})
		})
	}
}

package core

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"fngateway/internal/testutil"
)

// TestEjection walks an ejection timeline with exact times: three hosts,
// the first hanging; after ejectAfterFailures timeouts it is tried last,
// comes back after ejectForMs, and is ejected for twice as long on a
// repeat.
func TestEjection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stub := &stubRT{fn: func(h string, r *http.Request) (*http.Response, error) {
			if h == "a" {
				return hang(h, r)
			}
			return answer(200, h), nil
		}}
		stats := &Stats{}
		ej := &Ejector{}
		f := &Forwarder{Transport: stub, Stats: stats, Ejector: ej}
		route := &Route{Prefix: "/", Hosts: testutil.Hosts(t, "a", "b", "c"), MaxAttempts: 3, EjectAfterFailures: 2, EjectFor: 10 * time.Second}
		do := func() (time.Duration, string, string) {
			t.Helper()
			now := time.Now()
			stub.mu.Lock()
			stub.seen = nil
			stub.mu.Unlock()
			req := &Request{Method: "GET", Path: "/", Header: http.Header{}, Route: route,
				Budget: Budget{Arrival: now, TTL: now.Add(time.Minute), Timeout: time.Second}}
			res, err := f.Forward(context.Background(), req)
			if err != nil {
				t.Fatalf("Forward: %v", err)
			}
			res.Response.Body.Close()
			var marked []string // the attempts whose failure ejected their host
			for _, a := range res.Attempts {
				if a.Ejected {
					marked = append(marked, a.Host)
				}
			}
			return time.Since(now), strings.Join(stub.hosts(), ","), strings.Join(marked, ",")
		}
		steps := []struct {
			name        string
			before      time.Duration // slept before the request
			wantElapsed time.Duration
			wantHosts   string
			wantEjected string // ejected hosts after it, with the time left
			wantMarked  string // its attempts marked Ejected (the request line's ejections)
		}{
			{"first timeout", 0, time.Second, "a,b", "", ""},
			{"second timeout ejects a", 0, time.Second, "a,b", "a 10s", "a"},
			{"a is tried last", 0, 0, "b", "a 10s", ""},
			{"still out just before its time", 10*time.Second - 1, 0, "b", "a 1ns", ""},
			{"back after ejectForMs", 1, time.Second, "a,b", "", ""},
			{"a repeat ejection doubles", 0, time.Second, "a,b", "a 20s", "a"},
			{"tried last again", 19 * time.Second, 0, "b", "a 1s", ""},
		}
		for _, s := range steps {
			time.Sleep(s.before)
			elapsed, hosts, marked := do()
			if elapsed != s.wantElapsed || hosts != s.wantHosts {
				t.Errorf("%s: took %v via %s; want %v via %s", s.name, elapsed, hosts, s.wantElapsed, s.wantHosts)
			}
			if marked != s.wantMarked {
				t.Errorf("%s: attempts marked Ejected: %q; want %q", s.name, marked, s.wantMarked)
			}
			var ejected []string
			for _, e := range ej.Ejected(time.Now()) {
				ejected = append(ejected, e.Host+" "+time.Until(e.Until).String())
			}
			if got := strings.Join(ejected, ","); got != s.wantEjected {
				t.Errorf("%s: ejected = %q; want %q", s.name, got, s.wantEjected)
			}
		}
		if got := stats.Ejections.Load(); got != 2 {
			t.Errorf("stats ejections = %d; want 2", got)
		}
	})
}

// TestEjectionOnlyHost: an ejected host that is the only one left is still
// tried, and its success restores it.
func TestEjectionOnlyHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		healthy := false
		stub := &stubRT{fn: func(h string, r *http.Request) (*http.Response, error) {
			if !healthy {
				return nil, refused()
			}
			return answer(200, "ok"), nil
		}}
		ej := &Ejector{}
		f := &Forwarder{Transport: stub, Ejector: ej}
		route := &Route{Prefix: "/only", Hosts: testutil.Hosts(t, "a"), MaxAttempts: 1, EjectAfterFailures: 2, EjectFor: time.Minute}
		do := func() Reason {
			now := time.Now()
			res, err := f.Forward(context.Background(), &Request{Method: "GET", Path: "/", Header: http.Header{}, Route: route,
				Budget: Budget{Arrival: now, TTL: now.Add(time.Minute), Timeout: time.Second}})
			if err == nil {
				res.Response.Body.Close()
			}
			return ReasonOf(err)
		}
		do()
		do()
		if got := ej.Ejected(time.Now()); len(got) != 1 || got[0].Route != "/only" || got[0].Host != "a" {
			t.Fatalf("ejected = %v; want a on /only", got)
		}
		healthy = true
		if r := do(); r != ReasonNone {
			t.Fatalf("the only host, ejected, was not tried: %v", r.Code())
		}
		if got := ej.Ejected(time.Now()); len(got) != 0 {
			t.Errorf("ejected after a success = %v; want none", got)
		}
		if n := len(stub.hosts()); n != 3 {
			t.Errorf("attempts = %d; want 3", n)
		}
	})
}

// TestEjectionOff: ejectAfterFailures 0 (stored as -1) never ejects.
func TestEjectionOff(t *testing.T) {
	ej := &Ejector{}
	route := &Route{Prefix: "/", Hosts: testutil.Hosts(t, "a", "b"), EjectAfterFailures: -1}
	for range 10 {
		ej.record(route, route.Hosts[0], &Attempt{Outcome: OutcomeConnectError}, time.Now())
	}
	if got := ej.order(route, route.Hosts, time.Now()); got[0].Host != "a" {
		t.Errorf("order = %v; want a first: ejection is off", got)
	}
}

// TestRetryBudgetFlood floods a failing backend: the retries in flight
// stay within max(min, percent × requests in flight), and every refused
// retry is counted.
func TestRetryBudgetFlood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 40
		var mu sync.Mutex
		seen := map[string]int{}
		retrying, maxRetrying, total := 0, 0, 0
		stub := &stubRT{fn: func(h string, r *http.Request) (*http.Response, error) {
			key := r.Header.Get("Idempotency-Key")
			mu.Lock()
			total++
			seen[key]++
			retry := seen[key] > 1
			if retry {
				retrying++
				maxRetrying = max(maxRetrying, retrying)
			}
			mu.Unlock()
			time.Sleep(100 * time.Millisecond)
			mu.Lock()
			if retry {
				retrying--
			}
			mu.Unlock()
			return answer(503, "failing"), nil
		}}
		stats := &Stats{}
		budget := NewRetryBudget(20, 3)
		f := &Forwarder{Transport: stub, Stats: stats, RetryBudget: budget}
		route := &Route{Prefix: "/", Hosts: testutil.Hosts(t, "a", "b"), MaxAttempts: 2}
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				now := time.Now()
				res, err := f.Forward(context.Background(), &Request{Method: "GET", Path: "/", Header: http.Header{}, Route: route,
					IdempotencyKey: strings.Repeat("k", i+1), Budget: Budget{Arrival: now, TTL: now.Add(time.Minute), Timeout: time.Second}})
				if err != nil {
					t.Errorf("Forward: %v", err)
					return
				}
				if res.Response.StatusCode != 503 {
					t.Errorf("status = %d; want the last attempt's 503", res.Response.StatusCode)
				}
				res.Response.Body.Close()
			})
		}
		wg.Wait()
		// 40 requests in flight allow max(3, 20% × 40) = 8 retries.
		if maxRetrying > 8 {
			t.Errorf("retries in flight at once = %d; want at most 8", maxRetrying)
		}
		if total > n+8 {
			t.Errorf("backend saw %d requests; want at most %d", total, n+8)
		}
		retries, refused := stats.Retries.Load(), stats.RetryBudgetExhausted.Load()
		if retries+refused != n || refused == 0 {
			t.Errorf("retries %d + retry_budget_exhausted %d; want %d, some refused", retries, refused, n)
		}
		if r, rr := budget.InFlight(); r != 0 || rr != 0 {
			t.Errorf("in flight after the flood: %d requests, %d retries; want 0", r, rr)
		}
	})
}

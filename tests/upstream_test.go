package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recordingBackend answers as answer says and records, per request, the
// expected-timeout header it got and when its connection closed.
type recordingBackend struct {
	*httptest.Server
	mu      sync.Mutex
	seen    []string // x-envoy-expected-rq-timeout-ms of each request
	closed  chan time.Time
	started chan time.Time
}

// newRecordingBackend starts a backend that answers 200 "name" after
// delay, or, with delay hang, never: it waits until the client closes the
// connection. A connection closed before the answer is reported on closed.
func newRecordingBackend(tb testing.TB, name string, delay time.Duration) *recordingBackend {
	tb.Helper()
	return newBackendAfter(tb, name, delay, nil)
}

// newBackendAfter is newRecordingBackend whose answer, after delay, also
// waits for a value on after (nil: no wait), such as another backend's
// started: an order of events, not a race between two clocks.
func newBackendAfter(tb testing.TB, name string, delay time.Duration, after <-chan time.Time) *recordingBackend {
	tb.Helper()
	b := &recordingBackend{closed: make(chan time.Time, 100), started: make(chan time.Time, 100)}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // so that the server notices a closed connection
		b.mu.Lock()
		b.seen = append(b.seen, r.Header.Get("X-Envoy-Expected-Rq-Timeout-Ms")+" "+r.Header.Get("Authorization"))
		b.mu.Unlock()
		b.started <- time.Now()
		if delay == hang {
			<-r.Context().Done()
			b.closed <- time.Now()
			return
		}
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			b.closed <- time.Now()
			return
		}
		if after != nil {
			select {
			case <-after:
			case <-r.Context().Done():
				b.closed <- time.Now()
				return
			}
		}
		w.Write([]byte(name))
	}))
	tb.Cleanup(b.Close)
	return b
}

// hang is the delay of a backend that never answers.
const hang = time.Duration(-1)

func (b *recordingBackend) requests() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.seen...)
}

func getStats(tb testing.TB, gw *Gateway) map[string]any {
	tb.Helper()
	_, body, _ := Do(tb, "GET", gw.URL+"/_gateway/stats", nil, "")
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		tb.Fatalf("stats %s: %v", body, err)
	}
	return m
}

// hedgeTimeout is the per-try Timeout of the hedging tests' routes. Their
// first backend answers once the hedge's request has reached the second
// (newHedgedBackends): after the first attempt's Timeout, and with the
// hedge's whole Timeout as room for the answer to arrive before the hedge
// ends the request, room a loaded machine does not use up.
const hedgeTimeout = 2 * time.Second

// newHedgedBackends starts the two backends of a hedged route: the second
// never answers, the first answers "first" once the second has received
// the hedge's request. Without hedging the first attempt is cut at its
// Timeout and the second's at its own: 504.
func newHedgedBackends(tb testing.TB) (first, second *recordingBackend) {
	second = newRecordingBackend(tb, "second", hang)
	return newBackendAfter(tb, "first", 0, second.started), second
}

// TestHedgeOnPerTryTimeout: on a hedged route the first attempt keeps
// running past its Timeout beside the second, and answers while the hedge
// runs; the second's backend sees its connection closed then. A POST
// without a client Idempotency-Key is not hedged.
func TestHedgeOnPerTryTimeout(t *testing.T) {
	t.Parallel()
	const timeout = hedgeTimeout
	first, second := newHedgedBackends(t)
	routes := fmt.Sprintf(`[{"prefix":"/h","hosts":[%q,%q],"timeoutMs":%d,"hedgeOnPerTryTimeout":true}]`, first.URL, second.URL, timeout.Milliseconds())
	gw := StartGateway(t, map[string]string{"Hosts": second.URL, "Routes": routes})

	start := time.Now()
	resp, body, took := Do(t, "GET", gw.URL+"/h/x", nil, "")
	if resp.StatusCode != 200 || string(body) != "first" {
		t.Fatalf("got %d %q; want 200 from the first attempt, still running beside the hedge", resp.StatusCode, body)
	}
	if took < timeout {
		t.Errorf("answered after %v; want after the first attempt's Timeout (%v), when the hedge has started", took, timeout)
	}
	if got := resp.Header.Get("X-Attempts"); got != "2" {
		t.Errorf("x-Attempts = %q; want 2, every attempt started", got)
	}
	select {
	case at := <-second.closed:
		if d := at.Sub(start); !within(d, took, took, loadMargin) {
			t.Errorf("the hedge's connection closed %v after the request; want when the first attempt answered (%v)", d, took)
		}
	case <-time.After(loadMargin):
		t.Fatal("the hedge's backend never saw its connection closed")
	}
	for _, b := range []*recordingBackend{first, second} {
		for _, r := range b.requests() {
			if ms, _ := strconv.Atoi(strings.Fields(r + " x")[0]); ms != int(timeout.Milliseconds()) {
				t.Errorf("backend got x-envoy-expected-rq-timeout-ms %q; want its own attempt's %d", r, timeout.Milliseconds())
			}
		}
	}

	slow := newRecordingBackend(t, "slow", hang)
	fast := newRecordingBackend(t, "fast", 0)
	routes = fmt.Sprintf(`[{"prefix":"/h","hosts":[%q,%q],"timeoutMs":%d,"hedgeOnPerTryTimeout":true}]`, slow.URL, fast.URL, timeout.Milliseconds())
	gw = StartGateway(t, map[string]string{"Hosts": fast.URL, "Routes": routes})

	// A POST without a client key may not be sent twice.
	resp, body, took = Do(t, "POST", gw.URL+"/h/x", nil, "data")
	if ed := decodeError(t, resp, body); resp.StatusCode != 504 || ed.Error.Code != "AttemptTimeout" || len(ed.Error.Attempts) != 1 {
		t.Errorf("POST without a key: %d %s; want 504 AttemptTimeout after one attempt", resp.StatusCode, body)
	}
	if !within(took, timeout, 20*time.Millisecond, loadMargin) {
		t.Errorf("POST without a key ended after %v; want one Timeout", took)
	}
	// With one, it is.
	resp, body, _ = Do(t, "POST", gw.URL+"/h/x", map[string]string{"Idempotency-Key": "k-1"}, "data")
	if resp.StatusCode != 200 || string(body) != "fast" || resp.Header.Get("X-Attempts") != "2" {
		t.Errorf("POST with a key: %d %q x-Attempts %s; want 200 fast after a hedge", resp.StatusCode, body, resp.Header.Get("X-Attempts"))
	}
	if got := getStats(t, gw)["hedges"]; got != float64(1) {
		t.Errorf("stats hedges = %v; want 1, the POST with a key", got)
	}
}

// TestEjectDeadHost: with the first of three hosts hanging, every request
// waits out its Timeout until ejectAfterFailures of them eject it; then it
// is tried last, and /_gateway/stats names it.
func TestEjectDeadHost(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	dead := newRecordingBackend(t, "dead", hang)
	b := newRecordingBackend(t, "b", 0)
	c := newRecordingBackend(t, "c", 0)
	routes := fmt.Sprintf(`[{"prefix":"/e","hosts":[%q,%q,%q],"timeoutMs":%d,"ejectAfterFailures":2,"ejectForMs":60000}]`,
		dead.URL, b.URL, c.URL, timeout.Milliseconds())
	gw := StartGateway(t, map[string]string{"Hosts": b.URL, "Routes": routes})
	for i := range 2 {
		resp, body, took := Do(t, "GET", gw.URL+"/e/x", nil, "")
		if resp.StatusCode != 200 || string(body) != "b" || took < timeout {
			t.Errorf("request %d: %d %q after %v; want 200 from b after the dead host's Timeout", i+1, resp.StatusCode, body, took)
		}
	}
	resp, body, took := Do(t, "GET", gw.URL+"/e/x", nil, "")
	// One attempt shows the dead host was not tried first (its Timeout
	// would have been waited out); no real-time bound needed.
	if resp.StatusCode != 200 || string(body) != "b" || resp.Header.Get("X-Attempts") != "1" {
		t.Errorf("after ejection: %d %q x-Attempts %s after %v; want 200 from b, one attempt",
			resp.StatusCode, body, resp.Header.Get("X-Attempts"), took)
	}
	st := getStats(t, gw)
	ej, _ := json.Marshal(st["ejected_hosts"])
	if host := strings.TrimPrefix(dead.URL, "http://"); !strings.Contains(string(ej), `"host":"`+host+`"`) || !strings.Contains(string(ej), `"route":"/e"`) {
		t.Errorf("stats ejected_hosts = %s; want the dead host %s on /e", ej, host)
	}
	if st["ejections"] != float64(1) {
		t.Errorf("stats ejections = %v; want 1", st["ejections"])
	}
}

// TestRetryBudgetFlood floods a failing backend through the real binary:
// the retries the backend sees in flight at once stay within
// max(RetryBudgetMinConcurrency, RetryBudgetPercent × requests in flight),
// and the refused ones are counted.
func TestRetryBudgetFlood(t *testing.T) {
	t.Parallel()
	const clients = 30
	var mu sync.Mutex
	seen := map[string]int{}
	var retrying, maxRetrying, total atomic.Int64
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		total.Add(1)
		mu.Lock()
		seen[r.Header.Get("Idempotency-Key")]++
		retry := seen[r.Header.Get("Idempotency-Key")] > 1
		mu.Unlock()
		if retry {
			n := retrying.Add(1)
			for m := maxRetrying.Load(); n > m && !maxRetrying.CompareAndSwap(m, n); m = maxRetrying.Load() {
			}
			defer retrying.Add(-1)
		}
		time.Sleep(300 * time.Millisecond) // a backend in trouble: slow, then failing
		w.WriteHeader(503)
	}))
	defer failing.Close()
	gw := StartGateway(t, map[string]string{"Hosts": failing.URL, "MaxAttempts": "3", "RetryBackoffMs": "1",
		"RetryBudgetPercent": "20", "RetryBudgetMinConcurrency": "2"})
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			resp, _, _ := Do(t, "GET", gw.URL+"/flood", nil, "")
			if resp.StatusCode != 503 {
				t.Errorf("status %d; want the last attempt's 503", resp.StatusCode)
			}
		})
	}
	wg.Wait()
	// 30 requests in flight allow max(2, 20% × 30) = 6 retries at once.
	if m := maxRetrying.Load(); m > 6 {
		t.Errorf("the backend saw %d retries at once; want at most 6", m)
	}
	st := getStats(t, gw)
	if st["retry_budget_exhausted"] == float64(0) {
		t.Errorf("stats retry_budget_exhausted = 0; want the refused retries counted (%v)", st)
	}
	if got, max := total.Load(), int64(clients*3); got >= max {
		t.Errorf("backend saw %d requests; want fewer than the %d an unbounded retry sends", got, max)
	}
}

package tests

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// throttlingBackend answers its first n requests 429 with Retry-After:
// 1, and every later one 200 "done"; it notes when each request came.
type throttlingBackend struct {
	*httptest.Server
	mu    sync.Mutex
	times []time.Time
}

func newThrottlingBackend(tb testing.TB, n int) *throttlingBackend {
	b := &throttlingBackend{}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.times = append(b.times, time.Now())
		call := len(b.times)
		b.mu.Unlock()
		if call <= n {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Write([]byte("done"))
	}))
	tb.Cleanup(b.Close)
	return b
}

func (b *throttlingBackend) calls() []time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]time.Time(nil), b.times...)
}

// TestAsyncRequeue: every host answers 429 with Retry-After: 1; an
// async-eligible request is handed to a continuation (202, x-Async-Reason:
// requeued) that runs it again no sooner than the Retry-After after the
// last 429, and its result arrives through the status URI. A request
// that may not go async gets the 429, as before.
func TestAsyncRequeue(t *testing.T) {
	t.Parallel()
	be := newThrottlingBackend(t, 2)
	// Two hosts, one backend: both attempts answer 429, the second one
	// Retry-After later. The trigger is far beyond both.
	env := asyncEnv(be.URL+","+be.URL, t.TempDir())
	env["AsyncTriggerTimeout"] = strconv.FormatInt(loadMargin.Milliseconds(), 10)
	gw := StartGateway(t, env)
	resp, acc, _ := submitAsync(t, gw.URL, "/job", nil)
	if r := resp.Header.Get("X-Async-Reason"); r != "requeued" {
		t.Errorf("x-Async-Reason = %q; want requeued", r)
	}
	res, body, _ := waitResult(t, acc.StatusURI, loadMargin)
	if res.StatusCode != 200 || string(body) != "done" {
		t.Fatalf("result %d %q; want 200 done", res.StatusCode, body)
	}
	calls := be.calls()
	if len(calls) != 3 {
		t.Fatalf("backend saw %d requests; want 3 (two 429s, then the continuation)", len(calls))
	}
	if gap := calls[2].Sub(calls[1]); gap < time.Second {
		t.Errorf("the continuation came %v after the last 429; want at least its Retry-After, 1s", gap)
	}
	gw.WaitLog(t, loadMargin, func(m map[string]any) bool { return m["asyncReason"] == "requeued" && m["status"] == 202.0 })

	// Sync only: the 429 itself.
	sync := newThrottlingBackend(t, 2)
	gw2 := StartGateway(t, asyncEnv(sync.URL+","+sync.URL, t.TempDir()))
	resp, _, _ = Do(t, "POST", gw2.URL+"/job", map[string]string{"S7PAsyncMode": "true", "X-UserProfile": "sync-only"}, "p")
	if resp.StatusCode != 429 || resp.Header.Get("X-Backend-Host") != "1" {
		t.Errorf("sync-only: %d x-Backend-Host %q; want the second host's 429 passed through", resp.StatusCode, resp.Header.Get("X-Backend-Host"))
	}
}

// TestAsyncPredictive: with AsyncPredictWindow=2, once a route's last two
// async-eligible requests both outlasted the trigger, the next one is
// handed off at once: its 202 says x-Async-Reason: predicted (the first two
// say trigger), and the line of that request says so too.
func TestAsyncPredictive(t *testing.T) {
	t.Parallel()
	slow := newSlowBackend(t, 2*time.Second)
	env := asyncEnv(slow.URL, t.TempDir())
	env["AsyncPredictWindow"] = "2"
	gw := StartGateway(t, env)
	for i, want := range []string{"trigger", "trigger", "predicted"} {
		resp, _, _ := submitAsync(t, gw.URL, "/p"+strconv.Itoa(i), nil)
		if got := resp.Header.Get("X-Async-Reason"); got != want {
			t.Errorf("request %d: x-Async-Reason %q; want %q", i+1, got, want)
		}
	}
	gw.WaitLog(t, loadMargin, func(m map[string]any) bool { return m["asyncReason"] == "predicted" && m["path"] == "/p2" })
}

package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"fngateway/infra/filestore"
)

// hangingBackend holds every request open until its client goes, or for
// hold when set; it counts the requests open right now, the most ever open,
// and those it saw cancelled.
type hangingBackend struct {
	*httptest.Server
	hold                        func(n int64) time.Duration // by call number, from 1
	calls, open, peak, canceled atomic.Int64
}

func newHangingBackend(tb testing.TB, hold func(n int64) time.Duration) *hangingBackend {
	b := &hangingBackend{hold: hold}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := b.calls.Add(1)
		open := b.open.Add(1)
		defer b.open.Add(-1)
		for p := b.peak.Load(); open > p && !b.peak.CompareAndSwap(p, open); p = b.peak.Load() {
		}
		body, _ := io.ReadAll(r.Body)
		t := time.NewTimer(b.hold(n))
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			b.canceled.Add(1)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(201)
		fmt.Fprintf(w, "report for %s: %s", r.URL.Path, body)
	}))
	tb.Cleanup(b.Server.Close)
	return b
}

func forever(int64) time.Duration { return time.Hour }

// waitFor polls cond every 10 ms until it holds, or fails after within.
func waitFor(tb testing.TB, within time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
}

// TestAsyncBoundedWorkAfterAnswer: 300 hand-offs to a backend that never
// answers all get 202, and the work left running after the answers is
// bounded by MaxContinuations (default 16): the other attempts are
// cancelled and their continuations wait on the queue.
func TestAsyncBoundedWorkAfterAnswer(t *testing.T) {
	t.Parallel()
	be := newHangingBackend(t, forever)
	gw := StartGateway(t, asyncEnv(be.URL, t.TempDir()))
	const n, maxContinuations = 300, 16
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	var wg sync.WaitGroup
	statuses := make(chan int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", gw.URL+fmt.Sprintf("/hang/%d", i), strings.NewReader("p"))
			req.Header.Set("S7PAsyncMode", "true")
			req.Header.Set("X-UserProfile", "u1")
			resp, err := client.Do(req)
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				statuses <- 0
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses <- resp.StatusCode
		}()
	}
	wg.Wait()
	close(statuses)
	accepted := 0
	for s := range statuses {
		if s == 202 {
			accepted++
		}
	}
	if accepted != n {
		t.Fatalf("202 answers = %d of %d", accepted, n)
	}
	peak := be.peak.Load()
	// The cancelled attempts close within moments of their 202s.
	waitFor(t, loadMargin, "backend requests still open drop to MaxContinuations", func() bool { return be.open.Load() <= maxContinuations })
	// And they stay there, whatever the worker receives: the backend's
	// high-water mark, restarted now, counts every request opened, not
	// only those a sample would see, over ten of the worker's 100 ms polls.
	be.peak.Store(0)
	time.Sleep(10 * 100 * time.Millisecond) // ten worker polls
	most := max(be.peak.Load(), be.open.Load())
	t.Logf("%d hand-offs: %d reached the backend, peak %d open before the 202s, %d after (most over 1 s: %d); %d cancelled",
		n, be.calls.Load(), peak, be.open.Load(), most, be.canceled.Load())
	if most > maxContinuations {
		t.Errorf("backend requests open after the 202s = %d; want at most MaxContinuations=%d", most, maxContinuations)
	}
	// Every other attempt that reached the backend was cancelled.
	if calls, open, canceled := be.calls.Load(), be.open.Load(), be.canceled.Load(); calls != open+canceled {
		t.Errorf("backend calls %d = %d open + %d cancelled? want every call not open cancelled", calls, open, canceled)
	}
}

// TestAsyncResumesWithinLease: killed (SIGKILL) 1 s after its 202 and
// restarted, a request finishes within 30 s at the default lease and
// visibility settings.
func TestAsyncResumesWithinLease(t *testing.T) {
	t.Parallel()
	be := newHangingBackend(t, func(int64) time.Duration { return 2 * time.Second })
	dir := t.TempDir()
	env := asyncEnv(be.URL, dir)
	gw := StartGateway(t, env)
	_, acc, _ := submitAsync(t, gw.URL, "/crash", nil)
	// The kill comes 1 s after the 202, with the attempt at the backend
	// (on a loaded machine the trigger can fire before it gets there).
	time.Sleep(time.Second)
	waitFor(t, loadMargin, "the attempt at the backend", func() bool { return be.calls.Load() >= 1 })
	n := be.calls.Load()
	gw.Kill()
	if n != 1 {
		t.Fatalf("backend calls before the kill = %d; want 1", n)
	}
	restart := time.Now()
	gw2 := StartGateway(t, env)
	status := strings.Replace(acc.StatusURI, gw.URL, gw2.URL, 1)
	resp, data, _ := waitResult(t, status, 30*time.Second)
	took := time.Since(restart)
	t.Logf("result %v after the restart", took)
	if resp.StatusCode != 201 || string(data) != "report for /crash: payload-123" {
		t.Errorf("result = %d %q", resp.StatusCode, data)
	}
	if n := countFiles(t, dir, "headers.json"); n != 1 {
		t.Errorf("header blobs = %d; want exactly 1", n)
	}
}

// terminate sends SIGTERM and waits for the process to exit.
func (g *Gateway) terminate(tb testing.TB, within time.Duration) time.Duration {
	tb.Helper()
	start := time.Now()
	g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
	case <-time.After(within):
		tb.Fatalf("the gateway did not exit within %v of SIGTERM:\n%s", within, strings.Join(g.logs.Lines(), "\n"))
	}
	return time.Since(start)
}

// storedRecord reads the record of id from the embedded store in dir,
// once no gateway runs on it.
func storedRecord(tb testing.TB, dir, id string) (state string, claimed bool, nextVisible time.Duration) {
	tb.Helper()
	fs, err := filestore.Open(dir)
	if err != nil {
		tb.Fatal(err)
	}
	data, _, err := fs.Get(context.Background(), "gateway/records/"+id+".json")
	if err != nil {
		tb.Fatalf("record of %s: %v", id, err)
	}
	var rec struct {
		State string          `json:"state"`
		Claim json.RawMessage `json:"claim"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		tb.Fatalf("record %s: %v", data, err)
	}
	next, ok := fs.NextVisible()
	if !ok {
		return rec.State, len(rec.Claim) > 0 && string(rec.Claim) != "null", -1
	}
	return rec.State, len(rec.Claim) > 0 && string(rec.Claim) != "null", time.Until(next)
}

// TestAsyncSIGTERMDrains: on SIGTERM a continuation in progress finishes
// within the grace period, and one that cannot is stopped, its claim
// released and its message visible at once, so that the next process
// resumes it without waiting for a lease.
func TestAsyncSIGTERMDrains(t *testing.T) {
	t.Parallel()
	t.Run("finishes within the grace", func(t *testing.T) {
		be := newHangingBackend(t, func(int64) time.Duration { return 2 * time.Second })
		dir := t.TempDir()
		gw := StartGateway(t, asyncEnv(be.URL, dir))
		_, acc, _ := submitAsync(t, gw.URL, "/drain", nil)
		took := gw.terminate(t, 20*time.Second)
		t.Logf("exited %v after SIGTERM", took)
		if state, claimed, _ := storedRecord(t, dir, acc.ID); state != "succeeded" || claimed {
			t.Errorf("record after exit: %s, claimed %v; want succeeded, released", state, claimed)
		}
		if be.calls.Load() != 1 || be.canceled.Load() != 0 {
			t.Errorf("backend calls %d, cancelled %d; want 1, 0", be.calls.Load(), be.canceled.Load())
		}
		if !gw.hasLog("stopped") {
			t.Errorf("no clean stop logged")
		}
	})
	t.Run("stopped after the grace, resumed at once", func(t *testing.T) {
		be := newHangingBackend(t, func(n int64) time.Duration {
			if n == 1 {
				return time.Hour
			}
			return 0
		})
		dir := t.TempDir()
		env := asyncEnv(be.URL, dir)
		gw := StartGateway(t, env)
		_, acc, _ := submitAsync(t, gw.URL, "/drain", nil)
		took := gw.terminate(t, 25*time.Second)
		t.Logf("exited %v after SIGTERM", took)
		if took < 10*time.Second {
			t.Errorf("exited %v after SIGTERM; want after the 10 s grace", took)
		}
		state, claimed, visible := storedRecord(t, dir, acc.ID)
		if state != "running" || claimed || visible > 0 {
			t.Errorf("record after exit: %s, claimed %v, next message visible in %v; want running, released, now", state, claimed, visible)
		}
		if be.canceled.Load() != 1 {
			t.Errorf("backend saw %d cancelled requests; want 1", be.canceled.Load())
		}
		restart := time.Now()
		gw2 := StartGateway(t, env)
		waitResult(t, strings.Replace(acc.StatusURI, gw.URL, gw2.URL, 1), 5*time.Second)
		t.Logf("result %v after the restart", time.Since(restart))
		if be.calls.Load() != 2 {
			t.Errorf("backend calls = %d; want 2", be.calls.Load())
		}
	})
}

// hasLog reports whether the gateway logged msg.
func (g *Gateway) hasLog(msg string) bool {
	for _, m := range g.Logs() {
		if m["msg"] == msg {
			return true
		}
	}
	return false
}

package async

import (
	"context"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"fngateway/core"
)

const runTestTrigger = 10 * time.Second

// openCount is a backend that counts its open requests and those that saw
// their request cancelled.
type openCount struct {
	open, cancelled atomic.Int64
}

// after answers with then after d, unless the request is cancelled first.
func (o *openCount) after(d time.Duration, then backendFunc) backendFunc {
	return func(r *http.Request) (*http.Response, error) {
		o.open.Add(1)
		defer o.open.Add(-1)
		select {
		case <-time.After(d):
			return then(r)
		case <-r.Context().Done():
			o.cancelled.Add(1)
			return nil, r.Context().Err()
		}
	}
}

// newRunEnv is an asyncEnv whose engine runs the trigger race on a host
// that may (or may not) work after answering, with slots continuations.
func newRunEnv(tb testing.TB, fn backendFunc, workAfterAnswer bool, slots int) *asyncEnv {
	tb.Helper()
	e := newAsyncEnv(tb, fn)
	e.a.TriggerTimeout = runTestTrigger
	e.a.Host = core.HostCaps{Name: "test", WorkAfterAnswer: workAfterAnswer}
	e.a.Continuations = NewContinuations(slots)
	return e
}

// runRequest is asyncRequest routed, with a key of its own.
func (e *asyncEnv) runRequest(key string) *core.Request {
	req := asyncRequest()
	req.Route = e.a.Router.Match(req.Path)
	req.IdempotencyKey = key
	req.Header.Set("Idempotency-Key", key)
	return req
}

// TestRunTriggerRace: the answer in line when the backend answers first;
// otherwise 202 at AsyncTriggerTimeout, or earlier at the execution limit
// less the margin; and what becomes of the in-flight attempt on each host.
func TestRunTriggerRace(t *testing.T) {
	tests := []struct {
		name       string
		backend    time.Duration // the backend answers after this long
		limit      time.Duration // req.Budget.Limit after arrival; 0: none
		workAfter  bool
		busy       bool // every slot is taken
		wantAt     time.Duration
		wantInLine bool
		wantInProc bool // the in-flight attempt goes on and finishes in-process
	}{
		{"backend answers first", 3 * time.Second, 0, true, false, 3 * time.Second, true, false},
		{"backend answers first, limit later", 3 * time.Second, 5 * time.Second, false, false, 3 * time.Second, true, false},
		{"202 at the trigger, finished in-process", 20 * time.Second, 0, true, false, runTestTrigger, false, true},
		{"202 at the trigger, host frozen after answering", 20 * time.Second, 0, false, false, runTestTrigger, false, false},
		{"202 at the trigger, no free slot", 20 * time.Second, 0, true, true, runTestTrigger, false, false},
		{"202 earlier at the limit less the margin", 20 * time.Second, 4 * time.Second, true, false, 4 * time.Second, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var oc openCount
				e := newRunEnv(t, oc.after(tt.backend, asyncOK), tt.workAfter, 1)
				if tt.busy {
					_, done, _ := e.a.Continuations.TryStart()
					defer done()
				}
				req := e.runRequest("key-1")
				start := time.Now()
				if tt.limit > 0 {
					req.Budget.Limit = start.Add(tt.limit)
				}
				res, acc, err := e.a.Run(context.Background(), req, e.profile)
				if got := time.Since(start); got != tt.wantAt {
					t.Errorf("Run returned after %v; want %v", got, tt.wantAt)
				}
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				if tt.wantInLine {
					if res == nil || acc != nil {
						t.Fatalf("Run = %v, %v; want the answer in line", res, acc)
					}
					body, _ := io.ReadAll(res.Response.Body)
					res.Response.Body.Close()
					if res.Response.StatusCode != 200 || string(body) != "done:hello" {
						t.Errorf("in line: %d %q", res.Response.StatusCode, body)
					}
					if n := len(e.store.keys(".json")); n != 0 {
						t.Errorf("records written for an answer in line: %d", n)
					}
					return
				}
				if res != nil || acc == nil {
					t.Fatalf("Run = %v, %v; want a hand-off", res, acc)
				}
				rec := e.store.record(t, acc.ID)
				msgs := e.queue.take()
				if len(msgs) != 1 {
					t.Fatalf("queued messages = %d; want 1", len(msgs))
				}
				if tt.wantInProc {
					// Claimed by this process, its message delayed to the
					// lease's end, the attempt still at the backend.
					if rec.Claim == nil || !rec.Claim.Inflight || msgs[0].delay != asyncTestLease {
						t.Errorf("record claim %+v, message delay %v; want an inflight claim and %v", rec.Claim, msgs[0].delay, asyncTestLease)
					}
					if oc.open.Load() != 1 || e.a.Continuations.Free() != 0 {
						t.Errorf("open backend requests %d, free slots %d; want 1 and 0", oc.open.Load(), e.a.Continuations.Free())
					}
					time.Sleep(tt.backend) // the backend answers; the process finishes
					synctest.Wait()
					if e.backend.count() != 1 || e.a.Continuations.Free() != 1 {
						t.Errorf("backend calls %d, free slots %d; want 1 and 1", e.backend.count(), e.a.Continuations.Free())
					}
				} else {
					// Everything the hand-off needs happened before the
					// answer, and the backend saw its attempt cancelled.
					if rec.State != StateQueued || rec.Claim != nil || msgs[0].delay != 0 {
						t.Errorf("record %s claim %+v, message delay %v; want queued, unclaimed, 0", rec.State, rec.Claim, msgs[0].delay)
					}
					if oc.open.Load() != 0 || oc.cancelled.Load() != 1 {
						t.Errorf("open backend requests %d, cancelled %d; want 0 and 1", oc.open.Load(), oc.cancelled.Load())
					}
					if !tt.workAfter {
						if got := e.notes.statuses(acc.ID); !reflect.DeepEqual(got, []string{"Queued"}) {
							t.Errorf("notifications before the answer = %v; want [Queued]", got)
						}
					}
					if err := e.a.Process(context.Background(), msgs[0].body); err != nil {
						t.Fatal(err)
					}
					if e.backend.count() != 2 {
						t.Errorf("backend calls = %d; want 2 (the continuation sends it again)", e.backend.count())
					}
				}
				if h, data := e.result(t, acc.ID); h.Status != 200 || data != "done:hello" {
					t.Errorf("result %d %q", h.Status, data)
				}
			})
		})
	}
}

// TestRunClientGone: a client that leaves before the trigger cancels the
// attempt; nothing is stored.
func TestRunClientGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var oc openCount
		e := newRunEnv(t, oc.after(time.Hour, asyncOK), true, 4)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(2*time.Second, cancel)
		start := time.Now()
		_, acc, err := e.a.Run(ctx, e.runRequest("key-1"), e.profile)
		var ge *core.Error
		if !errors.As(err, &ge) || ge.Reason != core.ReasonClientGone || acc != nil {
			t.Fatalf("Run = %v, %v; want ReasonClientGone", acc, err)
		}
		if got := time.Since(start); got != 2*time.Second {
			t.Errorf("Run returned after %v; want 2s", got)
		}
		if oc.cancelled.Load() != 1 || e.queue.size() != 0 || len(e.store.keys(".json")) != 0 {
			t.Errorf("cancelled %d, messages %d, records %v; want 1, 0, none", oc.cancelled.Load(), e.queue.size(), e.store.keys(".json"))
		}
	})
}

// TestRunReplay: a resubmission with a known key is answered from the
// index at once, without reaching the backend.
func TestRunReplay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newRunEnv(t, asyncAfter(time.Minute, asyncOK), false, 4)
		_, first, err := e.a.Run(context.Background(), e.runRequest("key-1"), e.profile)
		if err != nil || first == nil {
			t.Fatalf("first Run = %v, %v", first, err)
		}
		start := time.Now()
		_, again, err := e.a.Run(context.Background(), e.runRequest("key-1"), e.profile)
		if err != nil || again == nil || again.ID != first.ID {
			t.Fatalf("second Run = %+v, %v; want the first's %s", again, err, first.ID)
		}
		if got := time.Since(start); got != 0 {
			t.Errorf("replay took %v; want 0", got)
		}
		if e.backend.count() != 1 {
			t.Errorf("backend calls = %d; want 1", e.backend.count())
		}
	})
}

// TestRunBounded: hand-offs beyond MaxContinuations leave no work behind:
// their attempts are cancelled and they wait on the queue.
func TestRunBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var oc openCount
		const slots, n = 4, 30
		e := newRunEnv(t, oc.after(time.Hour, asyncOK), true, slots)
		for i := range n {
			go func() {
				_, acc, err := e.a.Run(context.Background(), e.runRequest("key-"+string(rune('A'+i))), e.profile)
				if err != nil || acc == nil {
					t.Errorf("Run %d = %v, %v; want a hand-off", i, acc, err)
				}
			}()
		}
		time.Sleep(runTestTrigger)
		synctest.Wait()
		if got := oc.open.Load(); got != slots {
			t.Errorf("open backend requests after %d hand-offs = %d; want %d (MaxContinuations)", n, got, slots)
		}
		if got := oc.cancelled.Load(); got != n-slots {
			t.Errorf("cancelled attempts = %d; want %d", got, n-slots)
		}
		var delayed int
		for _, m := range e.queue.take() {
			if m.delay > 0 {
				delayed++
			}
		}
		if delayed != slots {
			t.Errorf("messages delayed to a lease's end = %d; want %d", delayed, slots)
		}
		e.a.Continuations.Shutdown(context.Background()) // ends the in-process finishes
	})
}

// TestRunDrain: at shutdown an in-process finish gets the grace period;
// one that cannot finish in it is stopped, its claim released and a
// message left for another instance at once.
func TestRunDrain(t *testing.T) {
	tests := []struct {
		name     string
		backend  time.Duration
		wantAt   time.Duration // Shutdown returns after
		wantDone bool
	}{
		{"finishes within the grace", 15 * time.Second, 5 * time.Second, true},
		{"stopped after the grace", time.Hour, DrainGrace, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var oc openCount
				e := newRunEnv(t, oc.after(tt.backend, asyncOK), true, 4)
				_, acc, err := e.a.Run(context.Background(), e.runRequest("key-1"), e.profile)
				if err != nil {
					t.Fatal(err)
				}
				e.queue.take() // the message delayed to the lease's end
				start := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), DrainGrace)
				defer cancel()
				err = e.a.Continuations.Shutdown(ctx)
				if got := time.Since(start); got != tt.wantAt {
					t.Errorf("Shutdown returned after %v; want %v", got, tt.wantAt)
				}
				if _, _, ok := e.a.Continuations.TryStart(); ok {
					t.Errorf("a continuation started after Shutdown")
				}
				rec := e.store.record(t, acc.ID)
				if tt.wantDone {
					if err != nil || !rec.State.Done() || e.queue.size() != 0 {
						t.Errorf("Shutdown = %v, record %s, messages %d; want nil, done, 0", err, rec.State, e.queue.size())
					}
					return
				}
				if !errors.Is(err, ErrDraining) || rec.State.Done() || rec.Claim != nil || oc.cancelled.Load() != 1 {
					t.Errorf("Shutdown = %v, record %s claim %+v, cancelled %d; want ErrDraining, pending and released, 1", err, rec.State, rec.Claim, oc.cancelled.Load())
				}
				// The next instance resumes at once.
				msg := e.takeOne(t, 0)
				e.backend.fn = asyncOK
				if err := e.a.Process(context.Background(), msg); err != nil {
					t.Fatal(err)
				}
				if h, data := e.result(t, acc.ID); h.Status != 200 || !strings.HasPrefix(data, "done:") {
					t.Errorf("result %d %q", h.Status, data)
				}
			})
		})
	}
}

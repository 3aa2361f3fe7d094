package async

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

// TestCancelTransitions: the record's cancel transition and the question
// "must the canceller write the cancellation?", as plain transitions.
func TestCancelTransitions(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	live := &claimLease{Owner: newAsyncID(), Until: now.Add(time.Second)}
	lapsed := &claimLease{Owner: newAsyncID(), Until: now}
	tests := []struct {
		name       string
		state      State
		claim      *claimLease
		want       cancelOutcome
		wantState  State
		wantUnheld bool
	}{
		{"queued", StateQueued, nil, cancelMarked, StateCancelling, true},
		{"checkpointed", StateRunning, nil, cancelMarked, StateCancelling, true},
		{"running, holder alive", StateRunning, live, cancelMarked, StateCancelling, false},
		{"running, holder dead", StateRunning, lapsed, cancelMarked, StateCancelling, true},
		{"cancelling already, holder alive", StateCancelling, live, cancelPending, StateCancelling, false},
		{"cancelling already, nobody holds it", StateCancelling, nil, cancelPending, StateCancelling, true},
		{"succeeded", StateSucceeded, nil, cancelFinished, StateSucceeded, false},
		{"failed", StateFailed, nil, cancelFinished, StateFailed, false},
		{"expired", StateExpired, nil, cancelFinished, StateExpired, false},
		{"canceled", StateCanceled, nil, cancelFinished, StateCanceled, false},
		{"abandoned", StateAbandoned, nil, cancelFinished, StateAbandoned, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &asyncRecord{State: tt.state, Claim: tt.claim}
			if got := r.requestCancel(now); got != tt.want {
				t.Errorf("requestCancel = %v; want %v", got, tt.want)
			}
			if r.State != tt.wantState {
				t.Errorf("state = %s; want %s", r.State, tt.wantState)
			}
			if tt.want == cancelMarked && !r.CancelRequested.Equal(now) {
				t.Errorf("CancelRequested = %v; want %v", r.CancelRequested, now)
			}
			if tt.want != cancelMarked && !r.CancelRequested.IsZero() {
				t.Errorf("CancelRequested = %v; want unchanged", r.CancelRequested)
			}
			if got := r.cancelUnheld(now); got != tt.wantUnheld {
				t.Errorf("cancelUnheld = %v; want %v", got, tt.wantUnheld)
			}
			if r.Claim != tt.claim {
				t.Error("the transition changed the claim")
			}
		})
	}
}

// TestOperationStatus: the operation document's status of every state;
// Succeeded only for a 2xx result.
func TestOperationStatus(t *testing.T) {
	tests := []struct {
		state  State
		status int
		want   string
	}{
		{StateQueued, 0, OperationNotStarted},
		{StateRunning, 0, OperationRunning},
		{StateCancelling, 0, OperationRunning},
		{StateSucceeded, 200, OperationSucceeded},
		{StateSucceeded, 204, OperationSucceeded},
		{StateSucceeded, 404, OperationFailed},
		{StateSucceeded, 302, OperationFailed},
		{StateFailed, 500, OperationFailed},
		{StateFailed, 502, OperationFailed},
		{StateExpired, 504, OperationFailed},
		{StateCanceled, 409, OperationCanceled},
	}
	for _, tt := range tests {
		if got := operationStatus(tt.state, tt.status); got != tt.want {
			t.Errorf("operationStatus(%s, %d) = %s; want %s", tt.state, tt.status, got, tt.want)
		}
	}
}

// cancelled checks that request id ended with exactly one result, the
// cancellation, and that its record says so.
func (e *asyncEnv) cancelled(tb testing.TB, id string) {
	tb.Helper()
	h, data := e.result(tb, id)
	code, _ := errorCode(tb, data)
	if h.Status != http.StatusConflict || code != "Canceled" || h.Headers.Get("X-Gateway-Error") != "Canceled" {
		tb.Errorf("result = %d %s %v; want 409 Canceled", h.Status, data, h.Headers)
	}
	rec := e.store.record(tb, id)
	if rec.State != StateCanceled || rec.Claim != nil || rec.Result == nil || rec.Result.Code != "Canceled" {
		tb.Errorf("record = %s claim %+v result %+v; want canceled, no claim, code Canceled", rec.State, rec.Claim, rec.Result)
	}
}

// TestAsyncCancel: a cancel request on each state of a request.
func TestAsyncCancel(t *testing.T) {
	t.Run("queued: cancelled at once, never sent", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newAsyncEnv(t, asyncOK)
			acc := e.submit(t, asyncRequest())
			v, finished, err := e.a.Cancel(context.Background(), acc.ID, nil)
			if err != nil || finished {
				t.Fatalf("Cancel = %v, %v; want pending before", finished, err)
			}
			if v.State != StateCanceled || v.OperationStatus() != OperationCanceled || v.ResultStatus != 409 {
				t.Errorf("view = %s %s %d; want canceled at once", v.State, v.OperationStatus(), v.ResultStatus)
			}
			e.drain(t) // the queued message finds it done
			e.cancelled(t, acc.ID)
			if n := e.backend.count(); n != 0 {
				t.Errorf("backend calls = %d; want 0", n)
			}
		})
	})

	t.Run("running here: the attempt is cancelled at once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newAsyncEnv(t, asyncAfter(time.Hour, asyncOK))
			acc := e.submit(t, asyncRequest())
			msg := e.takeOne(t, 0)
			done := make(chan error, 1)
			go func() { done <- e.a.Process(context.Background(), msg) }()
			synctest.Wait() // the attempt waits at the backend
			start := time.Now()
			v, finished, err := e.a.Cancel(context.Background(), acc.ID, nil)
			if err != nil || finished {
				t.Fatalf("Cancel = %v, %v", finished, err)
			}
			if v.State != StateCancelling && v.State != StateCanceled {
				t.Errorf("view state = %s; want cancelling or canceled", v.State)
			}
			if err := <-done; err != nil {
				t.Fatalf("Process: %v", err)
			}
			if took := time.Since(start); took != 0 {
				t.Errorf("the cancellation took %v; want at once", took)
			}
			e.cancelled(t, acc.ID)
			if e.backend.count() != 1 || e.backend.call(0).Context().Err() == nil {
				t.Errorf("the backend's request was not cancelled")
			}
			if e.queue.size() != 0 {
				t.Errorf("messages left: %d; want none (nothing resumes)", e.queue.size())
			}
		})
	})

	t.Run("running on another instance: seen at its lease renewal", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newAsyncEnv(t, asyncAfter(time.Hour, asyncOK))
			// Another instance on the same store and queue.
			other := &Async{Store: e.a.Store, Queue: e.a.Queue, Forwarder: e.a.Forwarder, Router: e.a.Router,
				TTL: e.a.TTL, Timeout: e.a.Timeout, Margin: e.a.Margin, Lease: e.a.Lease}
			acc := e.submit(t, asyncRequest())
			msg := e.takeOne(t, 0)
			done := make(chan error, 1)
			go func() { done <- e.a.Process(context.Background(), msg) }()
			synctest.Wait()
			start := time.Now()
			if _, _, err := other.Cancel(context.Background(), acc.ID, nil); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatalf("Process: %v", err)
			}
			if took, beat := time.Since(start), asyncTestLease/3; took > beat {
				t.Errorf("the holder took %v to see the cancel; want at most one renewal (%v)", took, beat)
			}
			e.cancelled(t, acc.ID)
		})
	})

	t.Run("checkpointed: not resumed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newAsyncEnv(t, asyncAfter(10*time.Second, asyncOK))
			acc := e.submit(t, asyncRequest())
			msg := e.takeOne(t, 0)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := e.a.Process(ctx, msg); err != nil {
				t.Fatal(err)
			}
			cancel()
			if rec := e.store.record(t, acc.ID); rec.Checkpoints != 1 {
				t.Fatalf("checkpoints = %d; want 1", rec.Checkpoints)
			}
			if _, _, err := e.a.Cancel(context.Background(), acc.ID, nil); err != nil {
				t.Fatal(err)
			}
			e.drain(t)
			e.cancelled(t, acc.ID)
			if n := e.backend.count(); n != 1 {
				t.Errorf("backend calls = %d; want 1 (not resumed)", n)
			}
		})
	})

	t.Run("in-process finish after the 202: the attempt is cancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRunEnv(t, asyncAfter(time.Hour, asyncOK), true, 2)
			_, acc, err := e.a.Run(context.Background(), e.runRequest(asyncTestKey), e.profile)
			if err != nil || acc == nil {
				t.Fatalf("Run = %v, %v; want a 202", acc, err)
			}
			synctest.Wait()
			if _, _, err := e.a.Cancel(context.Background(), acc.ID, nil); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			e.cancelled(t, acc.ID)
			if e.backend.count() != 1 || e.backend.call(0).Context().Err() == nil {
				t.Errorf("the in-flight attempt was not cancelled")
			}
			// Its delayed message comes back and changes nothing.
			e.drain(t)
			e.cancelled(t, acc.ID)
			if e.backend.count() != 1 {
				t.Errorf("backend calls = %d; want 1", e.backend.count())
			}
		})
	})

	t.Run("in-process: a DELETE the moment the 202 is out is heard at once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRunEnv(t, asyncAfter(time.Hour, asyncOK), true, 2)
			_, acc, err := e.a.Run(context.Background(), e.runRequest(asyncTestKey), e.profile)
			if err != nil || acc == nil {
				t.Fatalf("Run = %v, %v; want a 202", acc, err)
			}
			// No wait: the client may DELETE before finishInProcess runs.
			e.a.cancels.mu.Lock()
			listening := len(e.a.cancels.byID[acc.ID])
			e.a.cancels.mu.Unlock()
			if listening != 1 {
				t.Fatalf("cancel listeners for %s when Run returns = %d; want 1", acc.ID, listening)
			}
			start := time.Now()
			if _, _, err := e.a.Cancel(context.Background(), acc.ID, nil); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			if took := time.Since(start); took != 0 {
				t.Errorf("the cancellation took %v; want at once, not at a lease renewal", took)
			}
			e.cancelled(t, acc.ID)
		})
	})

	t.Run("finished: nothing changes", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newAsyncEnv(t, asyncStatus(500))
			acc := e.submit(t, asyncRequest())
			e.drain(t)
			before := e.store.record(t, acc.ID)
			v, finished, err := e.a.Cancel(context.Background(), acc.ID, nil)
			if err != nil || !finished {
				t.Fatalf("Cancel = %v, %v; want finished", finished, err)
			}
			if v.OperationStatus() != OperationFailed || v.ResultStatus != 500 {
				t.Errorf("view = %s %d; want Failed 500", v.OperationStatus(), v.ResultStatus)
			}
			code, msg, ok := v.OperationError()
			if !ok || code != "BackendStatus" || msg == "" {
				t.Errorf("OperationError = %q %q %v", code, msg, ok)
			}
			after := e.store.record(t, acc.ID)
			if after.State != before.State || after.State != StateFailed || !after.CancelRequested.IsZero() {
				t.Errorf("record changed: %s → %s, cancel %v", before.State, after.State, after.CancelRequested)
			}
			h, _ := e.result(t, acc.ID)
			if h.Status != 500 {
				t.Errorf("result status = %d; want 500", h.Status)
			}
		})
	})

	t.Run("unknown and malformed ids", func(t *testing.T) {
		e := newAsyncEnv(t, asyncOK)
		for _, id := range []string{newAsyncID(), "../x", ""} {
			if _, _, err := e.a.Cancel(context.Background(), id, nil); !errors.Is(err, ErrNotFound) {
				t.Errorf("Cancel(%q) = %v; want ErrNotFound", id, err)
			}
		}
	})
}

// TestAsyncCancelRace: a cancel that comes while the backend's answer is
// being committed ends with exactly one result, the cancellation or the
// answer, and a record that agrees with it.
func TestAsyncCancelRace(t *testing.T) {
	for _, at := range []time.Duration{0, time.Millisecond, 999 * time.Millisecond, time.Second, 1001 * time.Millisecond, 2 * time.Second} {
		synctest.Test(t, func(t *testing.T) {
			e := newAsyncEnv(t, asyncAfter(time.Second, asyncOK))
			acc := e.submit(t, asyncRequest())
			msg := e.takeOne(t, 0)
			done := make(chan error, 1)
			go func() { done <- e.a.Process(context.Background(), msg) }()
			time.Sleep(at)
			if _, _, err := e.a.Cancel(context.Background(), acc.ID, nil); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			e.drain(t)
			h, data := e.result(t, acc.ID)
			rec := e.store.record(t, acc.ID)
			switch h.Status {
			case 200:
				if data != "done:hello" || rec.State != StateSucceeded {
					t.Errorf("cancel at %v: result 200 %q, record %s", at, data, rec.State)
				}
			case 409:
				if rec.State != StateCanceled {
					t.Errorf("cancel at %v: result 409, record %s", at, rec.State)
				}
			default:
				t.Errorf("cancel at %v: result %d %s", at, h.Status, data)
			}
		})
	}
}

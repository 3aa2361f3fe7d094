package async

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"fngateway/core"
)

// ends records what OnEnd was told.
type ends struct {
	mu  sync.Mutex
	got []End
}

func (e *ends) add(_ context.Context, end End) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, end)
}

func (e *ends) list() []End {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]End(nil), e.got...)
}

// TestOnEnd: OnEnd is told exactly once when an async request ends, in
// whichever invocation commits its result — a queue continuation, the
// DELETE that settles a queued request — with its id, final state,
// status, code and attempts; an attempt a DELETE cut is recorded as
// cancelled.
func TestOnEnd(t *testing.T) {
	t.Run("backend 500 from the queue", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newAsyncEnv(t, asyncStatus(http.StatusInternalServerError))
			var got ends
			e.a.OnEnd = got.add
			acc := e.submit(t, asyncRequest())
			e.drain(t)
			e.drain(t) // a redelivery changes nothing
			want := End{ID: acc.ID, State: StateFailed, Status: 500, Attempts: 1}
			checkEnds(t, got.list(), want)
			if st := e.a.Stats.Snapshot(); st["async_failed"] != 1 || st["async_succeeded"]+st["async_canceled"]+st["async_expired"] != 0 {
				t.Errorf("stats = %v; want async_failed 1, the other endings 0", st)
			}
		})
	})
	t.Run("queued, cancelled: the DELETE ends it", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newAsyncEnv(t, asyncOK)
			var got ends
			e.a.OnEnd = got.add
			acc := e.submit(t, asyncRequest())
			if _, _, err := e.a.Cancel(context.Background(), acc.ID, nil); err != nil {
				t.Fatal(err)
			}
			e.drain(t)
			checkEnds(t, got.list(), End{ID: acc.ID, State: StateCanceled, Status: 409, Code: "Canceled"})
			if st := e.a.Stats.Snapshot(); st["async_canceled"] != 1 || st["async_succeeded"]+st["async_failed"]+st["async_expired"] != 0 {
				t.Errorf("stats = %v; want async_canceled 1, the other endings 0", st)
			}
		})
	})
	t.Run("running, cancelled: the attempt is cancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newAsyncEnv(t, asyncAfter(time.Hour, asyncOK))
			var got ends
			e.a.OnEnd = got.add
			acc := e.submit(t, asyncRequest())
			msg := e.takeOne(t, 0)
			done := make(chan error, 1)
			go func() { done <- e.a.Process(context.Background(), msg) }()
			synctest.Wait()
			if _, _, err := e.a.Cancel(context.Background(), acc.ID, nil); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatalf("Process: %v", err)
			}
			checkEnds(t, got.list(), End{ID: acc.ID, State: StateCanceled, Status: 409, Code: "Canceled", Attempts: 1})
			h, _ := e.result(t, acc.ID)
			if len(h.Attempts) != 1 || h.Attempts[0].Outcome != core.OutcomeCancelled {
				t.Errorf("attempts = %+v; want one %q", h.Attempts, core.OutcomeCancelled)
			}
		})
	})
}

func checkEnds(tb testing.TB, got []End, want End) {
	tb.Helper()
	if len(got) != 1 {
		tb.Fatalf("OnEnd told %d times (%+v); want once", len(got), got)
	}
	g := got[0]
	if g.ID != want.ID || g.State != want.State || g.Status != want.Status || g.Code != want.Code || g.Attempts != want.Attempts ||
		g.Arrival.IsZero() || g.Completed.IsZero() {
		tb.Errorf("OnEnd = %+v; want %+v with both times", g, want)
	}
}

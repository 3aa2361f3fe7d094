package async

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"fngateway/core"
)

// TestNotificationsInOrderWhenFull: once maxPendingNotes wait for a slow
// topic, a further notification is dropped, counted and reported, and
// notify does not wait; those queued go out in the order they were made.
// Before, the overflow was sent at once by its caller, on the caller's
// context, overtaking the queued ones (and blocking the caller).
func TestNotificationsInOrderWhenFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := &blockingNotifier{delay: time.Second}
		var stats core.Stats
		var mu sync.Mutex
		var reported []string
		a := &Async{Notifier: n, Host: core.HostCaps{WorkAfterAnswer: true}, Stats: &stats,
			OnError: func(_ context.Context, id string, err error) {
				mu.Lock()
				reported = append(reported, id)
				mu.Unlock()
			}}
		const dropped = 2
		total := 1 + maxPendingNotes + dropped // one being sent, a full queue, the overflow
		id := func(i int) string { return fmt.Sprintf("%032x", i) }
		start := time.Now()
		a.engine().notes.notify(context.Background(), "events", id(0), "0")
		synctest.Wait() // the sender holds the first one
		for i := 1; i < total; i++ {
			a.engine().notes.notify(context.Background(), "events", id(i), strconv.Itoa(i))
		}
		if took := time.Since(start); took != 0 {
			t.Errorf("notify calls took %v; want 0 (never sent by the caller)", took)
		}
		if err := a.FlushNotifications(context.Background()); err != nil {
			t.Fatal(err)
		}
		n.mu.Lock()
		defer n.mu.Unlock()
		if len(n.got) != total-dropped {
			t.Errorf("%d notifications sent; want %d", len(n.got), total-dropped)
		}
		for i, s := range n.got {
			if s != strconv.Itoa(i) {
				t.Fatalf("notification %d sent was %s; want %d (in the order made)", i, s, i)
			}
		}
		if got := stats.Snapshot()["async_notifications_dropped"]; got != dropped {
			t.Errorf("async_notifications_dropped = %d; want %d", got, dropped)
		}
		mu.Lock()
		defer mu.Unlock()
		if want := []string{id(total - 2), id(total - 1)}; fmt.Sprint(reported) != fmt.Sprint(want) {
			t.Errorf("OnError for %v; want the dropped %v", reported, want)
		}
	})
}

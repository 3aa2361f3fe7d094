package filestore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"fngateway/core/async"
)

// receiveOne receives from s and expects exactly the message body want.
func receiveOne(tb testing.TB, s *Store, visibility time.Duration, want string) async.Message {
	tb.Helper()
	msgs, err := s.Receive(context.Background(), 10, visibility)
	if err != nil {
		tb.Fatalf("Receive: %v", err)
	}
	if len(msgs) != 1 || string(msgs[0].Body) != want {
		tb.Fatalf("Receive = %v, want one message %q", bodies(msgs), want)
	}
	return msgs[0]
}

func receiveNone(tb testing.TB, s *Store) {
	tb.Helper()
	msgs, err := s.Receive(context.Background(), 10, time.Minute)
	if err != nil {
		tb.Fatalf("Receive: %v", err)
	}
	if msgs == nil || len(msgs) != 0 {
		tb.Fatalf("Receive = %#v, want an empty slice", bodies(msgs))
	}
}

func bodies(msgs []async.Message) []string {
	if msgs == nil {
		return nil
	}
	out := []string{}
	for _, m := range msgs {
		out = append(out, string(m.Body))
	}
	return out
}

func TestQueueDelay(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := mustOpen(t, dir)
		if _, ok := s.NextVisible(); ok {
			t.Error("NextVisible on an empty queue: ok = true")
		}
		start := time.Now()
		if err := s.Enqueue(ctx, []byte("later"), 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := s.Enqueue(ctx, []byte("now"), 0); err != nil {
			t.Fatal(err)
		}
		m := receiveOne(t, s, time.Hour, "now")
		if err := s.Complete(ctx, m); err != nil {
			t.Fatal(err)
		}
		if next, ok := s.NextVisible(); !ok || !next.Equal(start.Add(10*time.Second)) {
			t.Errorf("NextVisible = %v, %v; want %v", next, ok, start.Add(10*time.Second))
		}
		time.Sleep(10*time.Second - time.Nanosecond)
		receiveNone(t, s)
		time.Sleep(time.Nanosecond)
		receiveOne(t, s, time.Hour, "later")
	})
}

func TestQueueVisibilityAndReceipts(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		const vis = 30 * time.Second
		s := mustOpen(t, dir)
		if err := s.Enqueue(ctx, []byte("job"), 0); err != nil {
			t.Fatal(err)
		}
		first := receiveOne(t, s, vis, "job")
		if first.DequeueCount != 1 || first.Receipt == "" || first.ID == "" {
			t.Errorf("first delivery = %+v, want DequeueCount 1 with an ID and receipt", first)
		}
		time.Sleep(vis - time.Nanosecond)
		receiveNone(t, s)
		time.Sleep(time.Nanosecond)

		second := receiveOne(t, s, vis, "job")
		if second.ID != first.ID || second.DequeueCount != 2 || second.Receipt == first.Receipt {
			t.Errorf("redelivery = %+v, want the same ID, DequeueCount 2 and a new receipt (first %+v)", second, first)
		}
		tests := []struct {
			name string
			m    async.Message
			want error
		}{
			{"stale receipt", first, async.ErrConflict},
			{"no receipt", async.Message{ID: first.ID}, async.ErrConflict},
			{"unknown id", async.Message{ID: "../../signing", Receipt: second.Receipt}, async.ErrNotFound},
			{"current receipt", second, nil},
			{"completed twice", second, async.ErrNotFound},
		}
		for _, tt := range tests {
			err := s.Complete(ctx, tt.m)
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Errorf("%s: Complete = %v, want %v", tt.name, err, tt.want)
			}
		}
		time.Sleep(vis)
		receiveNone(t, s)
	})
}

// TestQueueExtend: a heartbeat keeps a received message hidden past its
// visibility; zero shows it at once; only the latest delivery may extend;
// on disk the delivery's own visibility stays, so a restart (its worker
// gone) shows it again by then.
func TestQueueExtend(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		const vis = 15 * time.Second
		s := mustOpen(t, dir)
		if err := s.Enqueue(ctx, []byte("job"), 0); err != nil {
			t.Fatal(err)
		}
		m := receiveOne(t, s, vis, "job")
		for range 6 { // a beat every third of the visibility, for 30 s
			time.Sleep(vis / 3)
			next, err := s.Extend(ctx, m, vis)
			if err != nil || next.Receipt != m.Receipt {
				t.Fatalf("Extend = %+v, %v; want the same receipt", next, err)
			}
			receiveNone(t, s)
		}
		if next, _ := s.NextVisible(); time.Until(next) != vis {
			t.Errorf("visible in %v; want %v after the last beat", time.Until(next), vis)
		}
		// After a restart the on-disk delivery's visibility holds: 15 s
		// after the delivery, long past.
		if next, ok := mustOpen(t, dir).NextVisible(); !ok || next.After(time.Now()) {
			t.Errorf("after a reopen visible at %v (ok %v); want already", next, ok)
		}
		if _, err := s.Extend(ctx, m, 0); err != nil {
			t.Fatal(err)
		}
		again := receiveOne(t, s, vis, "job")
		if _, err := s.Extend(ctx, m, vis); !errors.Is(err, async.ErrConflict) {
			t.Errorf("Extend with the earlier delivery's receipt = %v; want ErrConflict", err)
		}
		if err := s.Complete(ctx, again); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Extend(ctx, again, vis); !errors.Is(err, async.ErrNotFound) {
			t.Errorf("Extend after Complete = %v; want ErrNotFound", err)
		}
	})
}

func TestQueueSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		const vis = time.Minute
		s := mustOpen(t, dir)
		for _, body := range []string{"a", "b"} {
			if err := s.Enqueue(ctx, []byte(body), 0); err != nil {
				t.Fatal(err)
			}
		}
		msgs, err := s.Receive(ctx, 1, vis)
		if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "a" {
			t.Fatalf("Receive(1) = %v, %v; want [a]", bodies(msgs), err)
		}
		first := msgs[0]

		// A new process: the received message stays hidden until its
		// visibility lapses, then comes back as its second delivery.
		s2 := mustOpen(t, dir)
		receiveOne(t, s2, 3*vis, "b")
		time.Sleep(vis)
		again := receiveOne(t, s2, vis, "a")
		if again.ID != first.ID || again.DequeueCount != 2 {
			t.Errorf("after reopen = %+v, want %s with DequeueCount 2", again, first.ID)
		}
		if err := s2.Complete(ctx, first); !errors.Is(err, async.ErrConflict) {
			t.Errorf("Complete with the first receipt = %v, want ErrConflict", err)
		}
		if err := s2.Complete(ctx, again); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * vis)
		receiveOne(t, mustOpen(t, dir), vis, "b") // b's 3*vis lapsed, a is gone
	})
}

func TestQueueReceiveArgs(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	tests := []struct {
		limit int
		vis   time.Duration
	}{{0, time.Second}, {-1, time.Second}, {1, -time.Second}}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.limit, tt.vis), func(t *testing.T) {
			if _, err := s.Receive(context.Background(), tt.limit, tt.vis); err == nil {
				t.Errorf("Receive(%d, %v): no error", tt.limit, tt.vis)
			}
		})
	}
}

func TestQueueConcurrentReceive(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, t.TempDir())
	const n = 40
	for i := range n {
		if err := s.Enqueue(ctx, fmt.Appendf(nil, "m%d", i), 0); err != nil {
			t.Fatal(err)
		}
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		seen = map[string]int{}
	)
	for range 10 {
		wg.Go(func() {
			for {
				msgs, err := s.Receive(ctx, 3, time.Hour)
				if err != nil {
					t.Error(err)
					return
				}
				if len(msgs) == 0 {
					return
				}
				for _, m := range msgs {
					mu.Lock()
					seen[string(m.Body)]++
					mu.Unlock()
					if err := s.Complete(ctx, m); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Errorf("%d distinct messages received, want %d", len(seen), n)
	}
	for body, c := range seen {
		if c != 1 {
			t.Errorf("%s delivered %d times, want once", body, c)
		}
	}
	if left, _ := os.ReadDir(s.queueDir); len(left) != 0 {
		t.Errorf("queue files left after completing all: %d", len(left))
	}
}

func TestQueueQuarantine(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	if err := s.Enqueue(context.Background(), []byte("good"), 0); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(s.queueDir, "0123456789abcdef0123456789abcdef"+msgSuffix)
	if err := os.WriteFile(bad, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(s.queueDir, tempPrefix+"123")
	if err := os.WriteFile(tmp, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir)
	msgs, err := s.Receive(context.Background(), 10, time.Hour)
	if len(msgs) != 1 || string(msgs[0].Body) != "good" {
		t.Fatalf("Receive = %v, want the good message", bodies(msgs))
	}
	if !errors.Is(err, errQuarantined) || !strings.Contains(err.Error(), filepath.Base(bad)) {
		t.Errorf("Receive err = %v; want errQuarantined naming %s, reported once", err, filepath.Base(bad))
	}
	receiveNone(t, s) // reported once only
	if _, err := os.Stat(filepath.Join(s.quarantine, filepath.Base(bad))); err != nil {
		t.Errorf("undecodable message not quarantined: %v", err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary file not removed: %v", err)
	}
}

// TestQueueQuarantinesWhileRunning: a message file damaged while the store
// runs (random bytes, emptied, truncated, replaced by a symlink or a
// directory) is set aside on the first Receive that meets it, reported once
// with errQuarantined, and the messages behind it are delivered by that
// same Receive. Before, it was put back first with its old visibility and
// retried on every Receive, and the messages behind it never ran.
func TestQueueQuarantinesWhileRunning(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "elsewhere.msg")
	tests := []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"random bytes", func(t *testing.T, path string) { writeFile(t, path, []byte("\x8f\x00garbage\xff")) }},
		{"emptied", func(t *testing.T, path string) { writeFile(t, path, nil) }},
		{"truncated header", func(t *testing.T, path string) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, path, b[:len(recordMagic)+5])
		}},
		{"symlink", func(t *testing.T, path string) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, outside, b) // a valid message, but never followed
			os.Remove(path)
			if err := os.Symlink(outside, path); err != nil {
				t.Fatal(err)
			}
		}},
		{"directory", func(t *testing.T, path string) {
			os.Remove(path)
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustOpen(t, t.TempDir())
			ctx := context.Background()
			if err := s.Enqueue(ctx, []byte("first"), 0); err != nil {
				t.Fatal(err)
			}
			var first string
			for id := range s.msgs {
				first = id
			}
			for _, b := range []string{"second", "third"} {
				if err := s.Enqueue(ctx, []byte(b), 0); err != nil {
					t.Fatal(err)
				}
			}
			tt.damage(t, s.msgPath(first))

			msgs, err := s.Receive(ctx, 1, time.Hour)
			if !errors.Is(err, errQuarantined) || !strings.Contains(err.Error(), first) {
				t.Fatalf("Receive err = %v; want errQuarantined naming %s", err, first)
			}
			if len(msgs) != 0 {
				t.Fatalf("Receive = %v; want nothing more than the one it asked for", bodies(msgs))
			}
			if _, err := os.Lstat(filepath.Join(s.quarantine, first+msgSuffix)); err != nil {
				t.Errorf("damaged file not in quarantine/: %v", err)
			}
			if _, err := os.Lstat(s.msgPath(first)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("damaged file still in queue/: %v", err)
			}
			// The rest run, and the damaged one is never met again.
			msgs, err = s.Receive(ctx, 10, time.Hour)
			if err != nil {
				t.Fatalf("second Receive: %v", err)
			}
			if got := strings.Join(bodies(msgs), ","); got != "second,third" {
				t.Errorf("second Receive = %s; want second,third", got)
			}
			if b, err := os.ReadFile(outside); tt.name == "symlink" && (err != nil || len(b) == 0) {
				t.Errorf("the symlink's target was touched: %v", err)
			}
		})
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestQueueQuarantineMessage: a received message set aside by its worker
// leaves queue/ for quarantine/ and is never delivered again; only its
// latest delivery may do so.
func TestQueueQuarantineMessage(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, t.TempDir())
	if err := s.Enqueue(ctx, []byte("not a continuation"), 0); err != nil {
		t.Fatal(err)
	}
	m := receiveOne(t, s, 0, "not a continuation")
	m2 := receiveOne(t, s, 0, "not a continuation")
	if err := s.Quarantine(ctx, m); !errors.Is(err, async.ErrConflict) {
		t.Errorf("Quarantine with an old receipt = %v; want ErrConflict", err)
	}
	if err := s.Quarantine(ctx, m2); err != nil {
		t.Fatalf("Quarantine: %v", err)
	}
	if err := s.Quarantine(ctx, m2); !errors.Is(err, async.ErrNotFound) {
		t.Errorf("second Quarantine = %v; want ErrNotFound", err)
	}
	receiveNone(t, s)
	b, err := os.ReadFile(filepath.Join(s.quarantine, m.ID+msgSuffix))
	if err != nil || !strings.HasSuffix(string(b), "not a continuation") {
		t.Errorf("quarantine/%s = %q, %v; want the whole message", m.ID+msgSuffix, b, err)
	}
	if s2 := mustOpen(t, s.root); len(s2.msgs) != 0 {
		t.Errorf("reopened queue holds %d messages; want none", len(s2.msgs))
	}
}

// TestQueueReceiveWhileRewritten: a delivery rewrites the message's file (a
// new one renamed over it), so a message received with no visibility by
// several pollers at once is read while it is replaced. Every read must
// get the message; before, a file renamed into place between openNoFollow's
// check and its open was taken for corrupt and the message quarantined.
func TestQueueReceiveWhileRewritten(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, t.TempDir())
	if err := s.Enqueue(ctx, []byte("busy"), 0); err != nil {
		t.Fatal(err)
	}
	const pollers, rounds = 4, 300
	var wg sync.WaitGroup
	for p := range pollers {
		wg.Go(func() {
			for i := range rounds {
				msgs, err := s.Receive(ctx, 1, 0)
				if err != nil {
					t.Errorf("poller %d, receive %d: %v", p, i, err)
					return
				}
				for _, m := range msgs {
					if string(m.Body) != "busy" {
						t.Errorf("poller %d, receive %d: body %q; want %q", p, i, m.Body, "busy")
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if q, _ := os.ReadDir(s.quarantine); len(q) != 0 {
		t.Errorf("%d files quarantined; want none", len(q))
	}
	receiveOne(t, s, time.Hour, "busy")
}

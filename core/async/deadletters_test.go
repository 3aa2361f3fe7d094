package async

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"fngateway/core"
)

// TestDecide is the redrive rule as a table.
func TestDecide(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	later, earlier := now.Add(time.Minute), now.Add(-time.Minute)
	tests := []struct {
		name   string
		found  bool
		state  State
		expiry time.Time
		want   Verdict
	}{
		{"no record", false, "", time.Time{}, VerdictUnknown},
		{"queued, time left", true, StateQueued, later, VerdictSend},
		{"running, time left", true, StateRunning, later, VerdictSend},
		{"cancelling, time left", true, StateCancelling, later, VerdictSend},
		{"queued, expired", true, StateQueued, earlier, VerdictExpired},
		{"running, expiring now", true, StateRunning, now, VerdictExpired},
		{"succeeded", true, StateSucceeded, later, VerdictFinished},
		{"failed", true, StateFailed, later, VerdictFinished},
		{"expired with its result", true, StateExpired, earlier, VerdictFinished},
		{"canceled", true, StateCanceled, later, VerdictFinished},
		{"abandoned", true, StateAbandoned, later, VerdictFinished},
		{"succeeded after expiry", true, StateSucceeded, earlier, VerdictFinished},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Decide(tt.found, tt.state, tt.expiry, now); got != tt.want {
				t.Errorf("Decide(%v, %q, expiry %v) = %q; want %q", tt.found, tt.state, tt.expiry.Sub(now), got, tt.want)
			}
		})
	}
	for _, v := range []Verdict{VerdictSend, VerdictFinished, VerdictExpired, VerdictUnknown, VerdictCorrupt, VerdictMalformed} {
		if v.Sends() != (v == VerdictSend) || v.Removes() != (v == VerdictSend || v == VerdictFinished) {
			t.Errorf("%s: Sends %v Removes %v", v, v.Sends(), v.Removes())
		}
	}
}

// fakeDeadLetters is an in-memory dead-letter store; onDelete, if set,
// runs before each Delete.
type fakeDeadLetters struct {
	mu       sync.Mutex
	letters  []DeadLetter
	held     int
	released int
	onDelete func()
}

func (f *fakeDeadLetters) add(id string, body []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.letters = append(f.letters, DeadLetter{ID: id, Receipt: "r-" + id, Body: body, Deliveries: 5})
}

func (f *fakeDeadLetters) List(_ context.Context, max int, hold time.Duration) ([]DeadLetter, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := min(max, len(f.letters))
	f.held += n
	return append([]DeadLetter(nil), f.letters[:n]...), nil
}

func (f *fakeDeadLetters) Delete(_ context.Context, d DeadLetter) error {
	if f.onDelete != nil {
		f.onDelete()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, l := range f.letters {
		if l.ID == d.ID {
			f.letters = append(f.letters[:i], f.letters[i+1:]...)
			f.held--
			return nil
		}
	}
	return ErrNotFound
}

func (f *fakeDeadLetters) Release(context.Context, DeadLetter) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released++
	return nil
}

func (f *fakeDeadLetters) ids() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, l := range f.letters {
		out = append(out, l.ID)
	}
	return out
}

// TestRedrive: one redrive over every kind of dead letter sends the one
// that can finish (once for its two copies), acknowledges the finished one,
// and reports and leaves the expired, unknown, corrupt and malformed ones;
// a dry run before it changes nothing.
func TestRedrive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newAsyncEnv(t, asyncOK)
		ctx := context.Background()
		dl := &fakeDeadLetters{}
		r := &Redriver{Store: e.store, Queue: e.queue, DeadLetters: dl}

		pending := e.submit(t, asyncRequest())
		pendingMsg := e.takeOne(t, 0)
		done := e.submit(t, asyncRequest2("b"))
		doneMsg := e.takeOne(t, 0)
		if err := e.a.Process(ctx, doneMsg); err != nil {
			t.Fatal(err)
		}
		old := e.submit(t, asyncRequest2("c"))
		oldMsg := e.takeOne(t, 0)
		corrupt := e.submit(t, asyncRequest2("d"))
		corruptMsg := e.takeOne(t, 0)
		e.store.mu.Lock()
		e.store.storeLocked(asyncRecordKey(corrupt.ID), []byte("{"), "application/json")
		e.store.mu.Unlock()
		unknownMsg := wireContinuation{ID: strings.Repeat("ab", 16)}.Encode()

		dl.add("m1", pendingMsg)
		dl.add("m2", doneMsg)
		dl.add("m3", oldMsg)
		dl.add("m4", unknownMsg)
		dl.add("m5", []byte("not a continuation"))
		dl.add("m6", pendingMsg) // a second copy
		dl.add("m7", corruptMsg)
		dl.add("m8", nil)
		dl.letters[7].Problem = "unreadable file"

		time.Sleep(asyncTestTTL - time.Second)
		// Only old is past its expiry: push the others' expiry on.
		for _, id := range []string{pending.ID} {
			rec := e.store.record(t, id)
			rec.Expiry = time.Now().Add(time.Hour)
			e.store.putRecord(t, rec)
		}
		now := time.Now().Add(2 * time.Second)

		ls, err := r.List(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]Verdict{"m1": VerdictSend, "m2": VerdictFinished, "m3": VerdictExpired, "m4": VerdictUnknown,
			"m5": VerdictMalformed, "m6": VerdictSend, "m7": VerdictCorrupt, "m8": VerdictMalformed}
		for _, l := range ls {
			if l.Verdict != want[l.ID] {
				t.Errorf("letter %s (request %s): verdict %q; want %q (%s)", l.ID, l.RequestID, l.Verdict, want[l.ID], l.LastError)
			}
		}
		if len(ls) != len(want) || dl.released != len(want) {
			t.Errorf("listed %d, released %d; want %d each", len(ls), dl.released, len(want))
		}
		if l := ls[0]; l.Profile != "alice" || l.Key() != pending.ID || !l.CanFinish() || l.Age(now) <= 0 {
			t.Errorf("pending letter = %+v", l)
		}

		outs, err := r.Redrive(ctx, nil, true, now)
		if err != nil {
			t.Fatal(err)
		}
		if len(outs) != 7 || e.queue.size() != 0 || len(dl.ids()) != 8 {
			t.Fatalf("dry run: %d outcomes, queued %d, letters %v; want 7, nothing changed", len(outs), e.queue.size(), dl.ids())
		}

		outs, err = r.Redrive(ctx, nil, false, now)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]Outcome{}
		for _, o := range outs {
			got[o.Key()] = o
		}
		if o := got[pending.ID]; !o.Sent || !o.Removed || o.Copies != 2 || o.Err != nil {
			t.Errorf("pending: %+v; want sent once for 2 copies, removed", o)
		}
		if o := got[done.ID]; o.Sent || !o.Removed {
			t.Errorf("finished: sent %v removed %v; want acknowledged: not sent, removed", o.Sent, o.Removed)
		}
		if o := got[old.ID]; o.Sent || o.Removed || o.Verdict != VerdictExpired {
			t.Errorf("expired: %+v; want reported, not sent, left", o)
		}
		if left := strings.Join(dl.ids(), ","); left != "m3,m4,m5,m7,m8" {
			t.Errorf("dead letters left %s; want m3,m4,m5,m7,m8", left)
		}
		msgs := e.queue.take()
		if len(msgs) != 1 || string(msgs[0].body) != string(pendingMsg) {
			t.Fatalf("sent %d messages; want the one continuation of %s", len(msgs), pending.ID)
		}
		if err := e.a.Process(ctx, msgs[0].body); err != nil {
			t.Fatal(err)
		}
		if e.backend.count() != 2 || e.headerCount() != 2 {
			t.Errorf("backend calls %d, results %d; want 2 and 2 (done's and pending's)", e.backend.count(), e.headerCount())
		}

		if _, err := r.Redrive(ctx, []string{"m3", strings.Repeat("0", 32)}, false, now); err == nil || !strings.Contains(err.Error(), strings.Repeat("0", 32)) {
			t.Errorf("redrive of an id no letter has = %v; want an error naming it", err)
		}
		if outs, err := r.Redrive(ctx, []string{old.ID}, false, now); err != nil || len(outs) != 1 || outs[0].Sent {
			t.Errorf("redrive of the expired one by id = %+v, %v; want reported only", outs, err)
		}
	})
}

// asyncRequest2 is asyncRequest with another idempotency key.
func asyncRequest2(key string) *core.Request {
	r := asyncRequest()
	r.Header.Set("Idempotency-Key", key)
	r.IdempotencyKey = key
	return r
}

// TestRedriveRacedByDelivery: the request finishes between the redrive's
// look at its record and its send. The continuation it sends is
// acknowledged by the worker: the backend is called once, one result.
func TestRedriveRacedByDelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newAsyncEnv(t, asyncOK)
		ctx := context.Background()
		acc := e.submit(t, asyncRequest())
		msg := e.takeOne(t, 0)
		dl := &fakeDeadLetters{}
		dl.add("copy", msg)
		// The normal delivery runs as the redrive deletes the dead letter,
		// after it decided to send.
		var once sync.Once
		dl.onDelete = func() {
			once.Do(func() {
				if err := e.a.Process(ctx, msg); err != nil {
					t.Errorf("normal delivery: %v", err)
				}
			})
		}
		r := &Redriver{Store: e.store, Queue: e.queue, DeadLetters: dl}
		outs, err := r.Redrive(ctx, nil, false, time.Now())
		if err != nil || len(outs) != 1 || !outs[0].Sent {
			t.Fatalf("Redrive = %+v, %v; want the continuation sent", outs, err)
		}
		e.drain(t)
		if e.backend.count() != 1 || e.headerCount() != 1 {
			t.Errorf("backend calls %d, results %d; want exactly 1 and 1", e.backend.count(), e.headerCount())
		}
		if rec := e.store.record(t, acc.ID); rec.State != StateSucceeded {
			t.Errorf("state %s; want succeeded", rec.State)
		}
		// Redriven again once finished: acknowledged, nothing sent.
		dl.add("late", msg)
		outs, err = r.Redrive(ctx, nil, false, time.Now())
		if err != nil || len(outs) != 1 || outs[0].Sent || !outs[0].Removed || outs[0].Verdict != VerdictFinished {
			t.Errorf("redrive of a finished request = %+v, %v; want acknowledged", outs, err)
		}
		if e.queue.size() != 0 || len(dl.ids()) != 0 {
			t.Errorf("queued %d, dead letters %v; want none", e.queue.size(), dl.ids())
		}
	})
}

// TestRedriveSendFails: a send that fails leaves the dead letters.
func TestRedriveSendFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newAsyncEnv(t, asyncOK)
		e.submit(t, asyncRequest())
		msg := e.takeOne(t, 0)
		dl := &fakeDeadLetters{}
		dl.add("m", msg)
		e.queue.fail = func() error { return errors.New("queue down") }
		r := &Redriver{Store: e.store, Queue: e.queue, DeadLetters: dl}
		outs, err := r.Redrive(context.Background(), nil, false, time.Now())
		if err != nil || len(outs) != 1 || outs[0].Err == nil || outs[0].Sent || outs[0].Removed {
			t.Fatalf("Redrive = %+v, %v; want a send error, nothing removed", outs, err)
		}
		if len(dl.ids()) != 1 {
			t.Errorf("dead letters %v; want the one kept", dl.ids())
		}
	})
}

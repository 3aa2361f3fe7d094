package async

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"fngateway/core"
)

// TestContinuationsPerProfile: one profile holds at most its share of the
// slots; another profile still finds one free; the share comes back when
// done is called, and the default share is half the slots, rounded up.
func TestContinuationsPerProfile(t *testing.T) {
	for _, tt := range []struct{ max, per, want int }{{16, 0, 8}, {5, 0, 3}, {1, 0, 1}, {4, 1, 1}, {4, 9, 4}} {
		if got := NewProfileContinuations(tt.max, tt.per).PerProfile(); got != tt.want {
			t.Errorf("NewProfileContinuations(%d, %d).PerProfile() = %d; want %d", tt.max, tt.per, got, tt.want)
		}
	}
	c := NewProfileContinuations(4, 0)
	var dones []func()
	for i := range 2 {
		_, done, ok := c.TryStartFor("a")
		if !ok {
			t.Fatalf("profile a, slot %d: refused; want its share of 2", i+1)
		}
		dones = append(dones, done)
	}
	if _, _, ok := c.TryStartFor("a"); ok {
		t.Fatal("profile a took a third slot of 4; want at most 2")
	}
	if _, ok := c.HoldProfile("a"); ok {
		t.Fatal("HoldProfile(a) at its share succeeded")
	}
	if got := c.Free(); got != 2 {
		t.Errorf("free slots after a refused start = %d; want 2 (nothing leaked)", got)
	}
	_, doneB, ok := c.TryStartFor("b")
	if !ok {
		t.Fatal("profile b refused while 2 slots are free")
	}
	dones[0]()
	dones[0]() // done twice counts off once
	if _, _, ok := c.TryStartFor("a"); !ok {
		t.Error("profile a refused after giving a slot back")
	}
	if _, _, ok := c.TryStartFor("a"); ok {
		t.Error("profile a took a third slot after a double done")
	}
	doneB()
	if NewContinuations(2).PerProfile() != 2 {
		t.Error("NewContinuations has a per-profile cap; want none")
	}
}

// TestRunFairBetweenProfiles: one profile's 20 hand-offs to a hanging
// backend take only its share of the slots for in-process finishes; another
// profile's request, handed off too, still finishes in-process as soon as
// its backend answers. Before, the first profile held every slot and the
// second's request waited on the queue behind it (for up to AsyncTimeout).
func TestRunFairBetweenProfiles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const trigger, answer, slots, n = 100 * time.Millisecond, 600 * time.Millisecond, 4, 20
		var oc openCount
		hang := oc.after(time.Hour, asyncOK)
		short := asyncAfter(answer, asyncOK)
		e := newRunEnv(t, func(r *http.Request) (*http.Response, error) {
			if r.Header.Get("X-Test-Profile") == "bob" {
				return short(r)
			}
			return hang(r)
		}, true, slots)
		e.a.TriggerTimeout = trigger
		e.a.Continuations = NewProfileContinuations(slots, 0)
		defer e.a.Continuations.Shutdown(context.Background()) // ends alice's in-process finishes
		bob := &core.Profile{UserID: "bob", Async: core.AsyncConfig{Enabled: true, ContainerName: "bob-results"}}

		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				if _, acc, err := e.a.Run(context.Background(), e.runRequest("alice-"+strconv.Itoa(i)), e.profile); err != nil || acc == nil {
					t.Errorf("alice's Run %d = %v, %v; want a hand-off", i, acc, err)
				}
			})
		}
		wg.Wait() // every 202 sent, at the trigger
		if got, want := oc.open.Load(), int64(e.a.Continuations.PerProfile()); got != want {
			t.Errorf("alice's attempts still open after the hand-offs = %d; want her share, %d", got, want)
		}

		start := time.Now()
		req := e.runRequest("bob-1")
		req.Header.Set("X-Test-Profile", "bob")
		_, acc, err := e.a.Run(context.Background(), req, bob)
		if err != nil || acc == nil {
			t.Fatalf("bob's Run = %v, %v; want a hand-off", acc, err)
		}
		time.Sleep(answer - trigger)
		synctest.Wait()
		rec := e.store.record(t, acc.ID)
		if rec.State != StateSucceeded {
			t.Fatalf("bob's request, %v after its submission (his backend answers at %v): %s; want succeeded, finished in-process", time.Since(start), answer, rec.State)
		}
	})
}

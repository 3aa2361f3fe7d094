package azure_test

import (
	"slices"
	"testing"
	"time"

	"fngateway/internal/emulators"
	"fngateway/internal/testutil"
)

// TestPoisonQueue: the poison queue of <queue> is <queue>-poison; a
// message the host moved there (its text copied, as the Functions host
// does) is listed with its body, deliveries and insertion time; while
// listed it is hidden; Release shows it again with its text unchanged and
// Delete removes it. A poison queue that does not exist holds nothing.
func TestPoisonQueue(t *testing.T) {
	az := emulators.StartAzurite(t)
	ctx := testutil.Context(t)
	acct := newAccount(t, az)
	name := testutil.UniqueName("dl")
	pq, err := acct.PoisonQueue(name)
	if err != nil {
		t.Fatal(err)
	}
	if pq.Name() != name+"-poison" {
		t.Errorf("poison queue %q; want %q", pq.Name(), name+"-poison")
	}
	if ls, err := pq.List(ctx, 10, time.Minute); err != nil || len(ls) != 0 {
		t.Fatalf("List of a missing poison queue = %+v, %v; want none", ls, err)
	}
	// The host's move: the same text on <queue>-poison.
	poison, err := acct.Queue(name + "-poison")
	if err != nil {
		t.Fatal(err)
	}
	bodies := []string{`{"v":1,"id":"0123456789abcdef0123456789abcdef"}`, `{"v":1,"id":"fedcba9876543210fedcba9876543210"}`}
	before := time.Now().Add(-time.Second)
	for _, b := range bodies {
		if err := poison.Enqueue(ctx, []byte(b), 0); err != nil {
			t.Fatal(err)
		}
	}
	ls, err := pq.List(ctx, 100, time.Minute)
	if err != nil || len(ls) != 2 {
		t.Fatalf("List = %+v, %v; want 2", ls, err)
	}
	var seen []string
	for _, l := range ls {
		seen = append(seen, string(l.Body))
		if l.ID == "" || l.Receipt == "" || l.Deliveries != 0 || l.SentAt.Before(before) {
			t.Errorf("dead letter %+v: want id, receipt, 0 deliveries in the poison queue, insertion time", l)
		}
	}
	slices.Sort(seen)
	if !slices.Equal(seen, bodies) {
		t.Errorf("bodies %q; want %q", seen, bodies)
	}
	if again, _ := pq.List(ctx, 100, time.Minute); len(again) != 0 {
		t.Errorf("a listing while held = %d; want 0", len(again))
	}
	if err := pq.Release(ctx, ls[0]); err != nil {
		t.Fatal(err)
	}
	if err := pq.Delete(ctx, ls[1]); err != nil {
		t.Fatal(err)
	}
	again, err := pq.List(ctx, 100, time.Minute)
	if err != nil || len(again) != 1 || again[0].ID != ls[0].ID || string(again[0].Body) != string(ls[0].Body) {
		t.Errorf("after Release and Delete: %+v, %v; want the released one, unchanged: %+v", again, err, ls)
	}
	if _, err := acct.PoisonQueue("Bad_Name"); err == nil {
		t.Error("PoisonQueue of a bad queue name = nil; want an error")
	}
}

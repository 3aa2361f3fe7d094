package local

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"fngateway/core"
	"fngateway/core/async"
	"fngateway/infra/filestore"
)

// TestWorkerFairBetweenProfiles: one profile's 20 queued continuations to
// a hanging backend take only its share of the slots; the worker hides the
// rest for ProfileWait and goes on, so another profile's message behind
// them runs at once. Before, the first profile took every slot and the
// second's message waited for one to come free (up to AsyncTimeout).
func TestWorkerFairBetweenProfiles(t *testing.T) {
	fs, err := filestore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var open, most atomic.Int64
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/short" {
			w.Write([]byte("done"))
			return
		}
		n := open.Add(1)
		defer open.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-r.Context().Done() // hangs until the gateway gives up
	}))
	defer be.Close()
	hosts := core.HostList{}
	if err := hosts.Decode(be.URL); err != nil {
		t.Fatal(err)
	}
	const slots = 4
	a := &async.Async{Store: fs, Queue: fs, Router: core.NewRouter(nil, core.Route{Hosts: hosts}),
		Timeout: time.Hour, Continuations: async.NewProfileContinuations(slots, 0)}
	w := &Worker{Queue: fs, Async: a, Visibility: time.Second, Poll: 5 * time.Millisecond, ProfileWait: 200 * time.Millisecond}
	alice := &core.Profile{UserID: "alice", Async: core.AsyncConfig{Enabled: true}}
	bob := &core.Profile{UserID: "bob", Async: core.AsyncConfig{Enabled: true}}
	submit := func(p *core.Profile, path string) string {
		req := &core.Request{Method: "GET", Path: path, Header: http.Header{}, IdempotencyKey: "k", Budget: core.Budget{Arrival: time.Now()}}
		acc, _, err := a.Submit(context.Background(), req, p, false)
		if err != nil {
			t.Fatal(err)
		}
		return acc.ID
	}
	for range 20 {
		submit(alice, "/hang")
	}
	id := submit(bob, "/short")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	start := time.Now()
	go func() { w.Run(ctx); close(done) }()
	defer func() {
		cancel()
		stop, cancelStop := context.WithTimeout(context.Background(), 0)
		defer cancelStop()
		a.Continuations.Shutdown(stop) // stops alice's continuations
		<-done
	}()
	// Bob's message sits behind alice's 20: each is received once, hidden
	// for ProfileWait, and passed over. That takes a few receives: bob's
	// request is done within a few ProfileWaits, with room for a loaded
	// machine (without the cap it waits for AsyncTimeout, an hour here).
	within := 5*w.ProfileWait + 20*time.Second
	deadline := start.Add(within)
	for {
		v, err := a.Status(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if v.State.Done() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bob's request is %s %v after the worker started; want done", v.State, time.Since(start))
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
	if took := time.Since(start); took > within {
		t.Errorf("bob's request done after %v; want within %v", took, within)
	}
	if got, want := most.Load(), int64(a.Continuations.PerProfile()); got != want {
		t.Errorf("alice's continuations open at once: at most %d; want her share, %d", got, want)
	}
}

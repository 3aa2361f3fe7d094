package azure_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"fngateway/core/async"
	"fngateway/infra/azure"
	"fngateway/internal/emulators"
	"fngateway/internal/testutil"
)

// maxAttempts is how many requests the package's retry policy (2 retries,
// Config.Retry) makes for one operation before it gives up: an operation
// against a stopped storage account fails after these, not after the SDK's
// default policy's minutes of retries, so that the async hand-off answers
// 503 in time. Counted, not timed: a loaded machine cannot change it.
const maxAttempts = 3

// noHang bounds an operation against a stopped storage account as liveness
// only: its connections are refused, and the policy waits at most 2 × 500 ms
// between its attempts; the rest is room for a loaded machine running -race.
const noHang = 15 * time.Second

// countingTransport counts the requests an Account sends.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) Do(req *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultClient.Do(req)
}

// TestAccountDown checks that, with the default retry policy, operations
// fail quickly while the storage account is unreachable and work again
// once it is back.
func TestAccountDown(t *testing.T) {
	t.Parallel()
	az := emulators.StartAzurite(t)
	sent := &countingTransport{}
	acct, err := azure.NewAccount(azure.Config{ConnectionString: az.ConnectionString(), Transport: sent})
	if err != nil {
		t.Fatalf("NewAccount: %v", err)
	}
	store, notifier := acct.Store(), acct.Notifier()
	queue, err := acct.Queue("continuations")
	if err != nil {
		t.Fatal(err)
	}
	ctx := testutil.Context(t)
	key := testutil.UniqueName("down") + "/record.json"
	v1, err := store.Put(ctx, key, []byte("before"), "")
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	if err := queue.Enqueue(ctx, []byte("before"), 0); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}

	az.Stop()
	ops := []struct {
		name string
		op   func(context.Context) error
	}{
		{"Get", func(ctx context.Context) error { _, _, err := store.Get(ctx, key); return err }},
		{"Put", func(ctx context.Context) error { _, err := store.Put(ctx, key, []byte("during"), v1); return err }},
		{"WriteBlob", func(ctx context.Context) error {
			return store.WriteBlob(ctx, testutil.UniqueName("down")+"/blob", strings.NewReader("during"), "", true)
		}},
		{"OpenBlob", func(ctx context.Context) error { _, err := store.OpenBlob(ctx, key); return err }},
		{"Enqueue", func(ctx context.Context) error { return queue.Enqueue(ctx, []byte("during"), 0) }},
		{"Receive", func(ctx context.Context) error { _, err := queue.Receive(ctx, 1, time.Second); return err }},
		{"Notify", func(ctx context.Context) error { return notifier.Notify(ctx, "lifecycle", []byte("during")) }},
	}
	for _, tt := range ops {
		t.Run(tt.name, func(t *testing.T) {
			before := sent.n.Load()
			start := time.Now()
			err := tt.op(ctx)
			took := time.Since(start)
			if err == nil || errors.Is(err, async.ErrNotFound) || errors.Is(err, async.ErrConflict) {
				t.Errorf("error = %v, want a connection error", err)
			}
			if n := sent.n.Load() - before; n < 1 || n > maxAttempts {
				t.Errorf("failed after %d requests, want 1 to %d (the package's retry policy)", n, maxAttempts)
			}
			if took > noHang {
				t.Errorf("failed after %v, want within %v", took, noHang)
			}
		})
	}

	az.Start(t)
	// The restart's own deadline: starting Azurite again may take a while.
	ctx = testutil.Context(t)
	data, _, err := store.Get(ctx, key)
	if err != nil || string(data) != "before" {
		t.Fatalf("Get after restart = %q, %v; want %q", data, err, "before")
	}
	m := receiveOne(t, queue, 30*time.Second, 5*time.Second)
	if string(m.Body) != "before" {
		t.Fatalf("received %q after restart, want %q", m.Body, "before")
	}
}

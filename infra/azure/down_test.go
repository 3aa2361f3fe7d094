package azure_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"fngateway/core/async"
	"fngateway/internal/emulators"
)

// failFast bounds how long an operation against a stopped storage account
// may take: the async hand-off must answer 503 in time.
const failFast = 2 * time.Second

// TestAccountDown checks that, with the default retry policy, operations
// fail quickly while the storage account is unreachable and work again
// once it is back.
func TestAccountDown(t *testing.T) {
	t.Parallel()
	az := emulators.StartAzurite(t)
	acct := newAccount(t, az)
	store, notifier := acct.Store(), acct.Notifier()
	queue, err := acct.Queue("continuations")
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	key := uniqueName("down") + "/record.json"
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
			return store.WriteBlob(ctx, uniqueName("down")+"/blob", strings.NewReader("during"), "", true)
		}},
		{"OpenBlob", func(ctx context.Context) error { _, err := store.OpenBlob(ctx, key); return err }},
		{"Enqueue", func(ctx context.Context) error { return queue.Enqueue(ctx, []byte("during"), 0) }},
		{"Receive", func(ctx context.Context) error { _, err := queue.Receive(ctx, 1, time.Second); return err }},
		{"Notify", func(ctx context.Context) error { return notifier.Notify(ctx, "lifecycle", []byte("during")) }},
	}
	for _, tt := range ops {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			err := tt.op(ctx)
			took := time.Since(start)
			if err == nil || errors.Is(err, async.ErrNotFound) || errors.Is(err, async.ErrConflict) {
				t.Errorf("error = %v, want a connection error", err)
			}
			if took > failFast {
				t.Errorf("failed after %v, want within %v", took, failFast)
			}
		})
	}

	az.Start(t)
	data, _, err := store.Get(ctx, key)
	if err != nil || string(data) != "before" {
		t.Fatalf("Get after restart = %q, %v; want %q", data, err, "before")
	}
	m := receiveOne(t, queue, 30*time.Second, 5*time.Second)
	if string(m.Body) != "before" {
		t.Fatalf("received %q after restart, want %q", m.Body, "before")
	}
}

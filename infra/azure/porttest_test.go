package azure_test

import (
	"testing"

	"fngateway/core/async"
	"fngateway/core/async/porttest"
	"fngateway/internal/emulators"
	"fngateway/internal/testutil"
)

// TestStorePort runs core/async's Store conformance suite against Blob storage
// (Azurite); every subtest works in its own container.
func TestStorePort(t *testing.T) {
	t.Parallel()
	store := newAccount(t, emulators.StartAzurite(t)).Store()
	porttest.TestStore(t, func(*testing.T) async.Store { return store })
}

// TestQueuePort runs core/async's Queue conformance suite against Queue storage
// (Azurite), a fresh queue per subtest.
func TestQueuePort(t *testing.T) {
	t.Parallel()
	acct := newAccount(t, emulators.StartAzurite(t))
	porttest.TestQueue(t, func(t *testing.T) async.Queue {
		name := testutil.UniqueName("q")
		q, err := acct.Queue(name)
		if err != nil {
			t.Fatalf("Queue(%q): %v", name, err)
		}
		return q
	})
}

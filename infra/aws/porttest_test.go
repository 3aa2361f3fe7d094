package aws

import (
	"testing"

	"fngateway/core/async"
	"fngateway/core/async/porttest"
	"fngateway/internal/emulators"
	"fngateway/internal/testutil"
)

// TestStorePort runs core/async's Store conformance suite against S3
// (versitygw); every subtest works in its own container (key prefix) of
// one bucket, which the first write creates.
func TestStorePort(t *testing.T) {
	t.Parallel()
	store := newStoreOn(t, emulators.StartVersitygw(t), "s3://"+testutil.UniqueName("port"))
	porttest.TestStore(t, func(*testing.T) async.Store { return store })
}

// TestQueuePort runs core/async's Queue conformance suite against SQS (fauxqs),
// a fresh queue per subtest.
func TestQueuePort(t *testing.T) {
	t.Parallel()
	f := emulators.StartFauxqs(t)
	porttest.TestQueue(t, func(t *testing.T) async.Queue { return newQueueOn(t, f, testutil.UniqueName("port")) })
}

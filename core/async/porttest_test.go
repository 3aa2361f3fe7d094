package async_test

import (
	"testing"

	"fngateway/core/async"
	"fngateway/core/async/porttest"
)

// The in-memory fakes that core/async's unit tests run on must keep the ports'
// semantics, or those tests prove nothing.

func TestFakeStore(t *testing.T) {
	porttest.TestStore(t, func(*testing.T) async.Store { return async.NewFakeStore() })
}

func TestFakeQueue(t *testing.T) {
	porttest.TestQueue(t, func(*testing.T) async.Queue { return async.NewFakeQueue() })
}

package core_test

import (
	"testing"

	"fngateway/core"
	"fngateway/core/porttest"
)

// The in-memory fakes that core's unit tests run on must keep the ports'
// semantics, or those tests prove nothing.

func TestFakeStore(t *testing.T) {
	porttest.TestStore(t, func(*testing.T) core.Store { return core.NewFakeStore() })
}

func TestFakeQueue(t *testing.T) {
	porttest.TestQueue(t, func(*testing.T) core.Queue { return core.NewFakeQueue() })
}

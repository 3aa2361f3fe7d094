package filestore

import (
	"testing"

	"fngateway/core"
	"fngateway/core/porttest"
)

func TestStorePort(t *testing.T) {
	porttest.TestStore(t, func(t *testing.T) core.Store { return mustOpen(t, t.TempDir()) })
}

func TestQueuePort(t *testing.T) {
	porttest.TestQueue(t, func(t *testing.T) core.Queue { return mustOpen(t, t.TempDir()) })
}

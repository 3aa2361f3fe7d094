package filestore

import (
	"testing"

	"fngateway/core/async"
	"fngateway/core/async/porttest"
)

func TestStorePort(t *testing.T) {
	porttest.TestStore(t, func(t *testing.T) async.Store { return mustOpen(t, t.TempDir()) })
}

func TestQueuePort(t *testing.T) {
	porttest.TestQueue(t, func(t *testing.T) async.Queue { return mustOpen(t, t.TempDir()) })
}

package aws

import (
	"runtime"
	"testing"

	"fngateway/internal/testutil"
)

// TestWriteBlobMemory: WriteBlob streams; a 64 MiB blob allocates a small
// multiple of one part, not the blob.
func TestWriteBlobMemory(t *testing.T) {
	s := newTestStore(t)
	ctx := testutil.Context(t)
	const size = 64 << 20
	if err := s.WriteBlob(ctx, "warm/up", generated(1, minPartSize+1), "", true); err != nil {
		t.Fatalf("WriteBlob: %v", err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := s.WriteBlob(ctx, "mem/data", generated(2, size), "", true); err != nil {
		t.Fatalf("WriteBlob: %v", err)
	}
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("WriteBlob of %d MiB allocated %.1f MiB (part size %d MiB)", size>>20, float64(alloc)/(1<<20), s.partSize()>>20)
	if alloc > size/2 {
		t.Errorf("WriteBlob of %d MiB allocated %.1f MiB, want well under the blob's size", size>>20, float64(alloc)/(1<<20))
	}
	checkBlob(t, s, "mem/data", 2, size)
}

package core

import "sync/atomic"

// ByteBudget is a process-wide budget of bytes, such as the memory kept for
// buffered request bodies (MaxBufferedBytes). A nil *ByteBudget grants
// everything. Its methods are safe for concurrent use.
type ByteBudget struct {
	limit int64
	used  atomic.Int64
}

// NewByteBudget returns a budget of limit bytes.
func NewByteBudget(limit int64) *ByteBudget { return &ByteBudget{limit: limit} }

// Acquire takes n bytes from the budget and reports whether they fit; a
// request that does not fit takes nothing.
func (b *ByteBudget) Acquire(n int64) bool {
	if b == nil {
		return true
	}
	if n < 0 {
		return false
	}
	for {
		used := b.used.Load()
		if n > b.limit-used {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

// Release gives back n bytes taken by Acquire.
func (b *ByteBudget) Release(n int64) {
	if b != nil {
		b.used.Add(-n)
	}
}

// InUse returns the bytes taken now.
func (b *ByteBudget) InUse() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

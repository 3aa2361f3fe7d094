package async

import (
	"math/rand/v2"
	"time"
)

// Defaults of Redelivery.
const (
	// DefaultRedeliveryBase is the wait after a continuation's first
	// delivery failed transiently, when Redelivery.Base is zero.
	DefaultRedeliveryBase = 10 * time.Second
	// DefaultRedeliveryMax caps the wait when Redelivery.Max is zero: SQS's
	// longest message delay.
	DefaultRedeliveryMax = 15 * time.Minute
)

// Redelivery is when a continuation message whose processing failed
// transiently (Process returned an error that does not wrap ErrBadMessage)
// should be delivered again: after a wait that doubles with each delivery,
// from Base after the first to at most Max, with "equal jitter" (a uniform
// draw in the upper half of that), so that messages that failed together do
// not all come back together. A queue trigger that can hide a failed
// message for a while (SQS's ChangeMessageVisibility) asks it for the wait
// instead of leaving the message to the queue's whole visibility timeout.
// The zero value uses the defaults; a Redelivery is safe for concurrent use
// when Jitter is.
type Redelivery struct {
	// Base is the wait after the first delivery failed. Zero means
	// DefaultRedeliveryBase.
	Base time.Duration
	// Max caps the wait. Zero means DefaultRedeliveryMax.
	Max time.Duration
	// Jitter, if set, returns the uniform draw in [0,1) that places the wait
	// in its upper half (tests fix it). Nil uses math/rand/v2.
	Jitter func() float64
}

// Wait returns the wait before the delivery after delivery n (n ≥ 1, the
// queue's delivery count, SQS's ApproximateReceiveCount, of the delivery
// that failed): c/2 + r × c/2 for c = min(Max, Base × 2ⁿ⁻¹). A count below
// 1 (unknown) counts as 1.
func (p Redelivery) Wait(n int) time.Duration {
	base, ceil := p.Base, p.Max
	if base <= 0 {
		base = DefaultRedeliveryBase
	}
	if ceil <= 0 {
		ceil = DefaultRedeliveryMax
	}
	c := ceil
	if n < 1 {
		n = 1
	}
	if n <= 32 {
		if d := base << (n - 1); d > 0 && d < ceil {
			c = d
		}
	}
	r := rand.Float64
	if p.Jitter != nil {
		r = p.Jitter
	}
	f := min(max(r(), 0), 1)
	return c/2 + time.Duration(f*float64(c-c/2))
}

package async

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"fngateway/core"
)

const (
	// DrainGrace is how long an instance that is told to stop (SIGTERM)
	// lets its continuations in progress run on before it stops them and
	// releases their claims.
	DrainGrace = 10 * time.Second
	// drainWindUp bounds the wait for stopped continuations to release
	// their claims.
	drainWindUp = 5 * time.Second
)

// ErrDraining is the cause with which Continuations.Shutdown ends the
// continuations still running when its grace is over, and the error of
// Start once Shutdown has begun.
var ErrDraining = errors.New("the instance is shutting down")

// Continuations bounds and tracks the continuations one instance works on
// at once: the in-process finishes after a 202 (Async.Run, on hosts that
// may work after answering) and the queue deliveries of the local worker
// draw from the same slots, so the work an instance keeps going after its
// clients have their answers is bounded by one number, MaxContinuations.
// A continuation that finds no free slot waits on the queue, and so does
// one whose profile holds its share already (NewProfileContinuations), so
// that one profile's hanging backend cannot hold every slot.
//
// Shutdown drains it: no new continuation starts, those in progress get a
// grace period, and those still running then are stopped (their contexts
// end with cause ErrDraining) so that they release their claims for another
// instance to resume at once.
//
// Make one with NewContinuations; its methods are safe for concurrent use.
// A nil *Continuations has no slots: TryStart always fails.
type Continuations struct {
	slots   chan struct{}
	closing chan struct{}

	mu      sync.Mutex
	closed  bool
	running sync.WaitGroup
	// stops ends, with a cause, the context of each continuation started
	// and not done yet; keyed by a number given out in order, under mu.
	stops map[uint64]context.CancelCauseFunc
	next  uint64

	// perProfile caps the slots one profile holds (zero: no cap beyond
	// the slots); held counts them, per profile, under mu.
	perProfile int
	held       map[string]int
}

// NewContinuations returns a Continuations with max slots (zero or less
// means core.DefaultMaxContinuations).
func NewContinuations(max int) *Continuations {
	if max <= 0 {
		max = core.DefaultMaxContinuations
	}
	return &Continuations{slots: make(chan struct{}, max), closing: make(chan struct{}),
		stops: map[uint64]context.CancelCauseFunc{}}
}

// NewProfileContinuations returns a Continuations with max slots of which
// one profile may hold at most perProfile (MaxContinuationsPerProfile):
// the rest of its work waits on the queue while other profiles' runs. Zero
// or less for max means core.DefaultMaxContinuations; for perProfile, half of
// max rounded up. A perProfile above max is max.
func NewProfileContinuations(max, perProfile int) *Continuations {
	c := NewContinuations(max)
	if perProfile <= 0 {
		perProfile = (cap(c.slots) + 1) / 2
	}
	c.perProfile = min(perProfile, cap(c.slots))
	c.held = map[string]int{}
	return c
}

// PerProfile returns the most slots one profile may hold: the cap of
// NewProfileContinuations, or Max when there is none.
func (c *Continuations) PerProfile() int {
	if c == nil {
		return 0
	}
	if c.perProfile > 0 {
		return c.perProfile
	}
	return cap(c.slots)
}

// HoldProfile counts one more slot held by profile, if the profile is
// below its cap (PerProfile), and returns release, which must be called
// exactly once to count it off again. The caller holds, or is about to
// take, the slot itself (Start, TryStart): HoldProfile only keeps one
// profile from taking every slot. ok is false when the profile is at its
// cap; its work should then wait on the queue. A nil *Continuations, or
// one without a cap, always succeeds.
func (c *Continuations) HoldProfile(profile string) (release func(), ok bool) {
	if c == nil || c.perProfile <= 0 {
		return func() {}, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held[profile] >= c.perProfile {
		return nil, false
	}
	c.held[profile]++
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.held[profile]--; c.held[profile] <= 0 {
				delete(c.held, profile)
			}
		})
	}, true
}

// TryStartFor is TryStart for a continuation of profile: it fails too when
// the profile already holds PerProfile slots. done gives both back.
func (c *Continuations) TryStartFor(profile string) (ctx context.Context, done func(), ok bool) {
	release, ok := c.HoldProfile(profile)
	if !ok {
		return nil, nil, false
	}
	ctx, slot, ok := c.TryStart()
	if !ok {
		release()
		return nil, nil, false
	}
	return ctx, func() { slot(); release() }, true
}

// Max returns the number of slots.
func (c *Continuations) Max() int {
	if c == nil {
		return 0
	}
	return cap(c.slots)
}

// Free returns the number of free slots at this moment.
func (c *Continuations) Free() int {
	if c == nil {
		return 0
	}
	return cap(c.slots) - len(c.slots)
}

// TryStart takes a free slot without waiting. It returns the context the
// continuation runs under (it ends, with cause ErrDraining, only when
// Shutdown stops the work) and done, which gives the slot back and must be
// called exactly once. ok is false when no slot is free or Shutdown has
// begun.
func (c *Continuations) TryStart() (ctx context.Context, done func(), ok bool) {
	if c == nil {
		return nil, nil, false
	}
	select {
	case c.slots <- struct{}{}:
	default:
		return nil, nil, false
	}
	return c.started()
}

// Start waits for a free slot until ctx ends or Shutdown begins, and then
// returns as TryStart does; the error is ctx's, or ErrDraining.
func (c *Continuations) Start(ctx context.Context) (context.Context, func(), error) {
	if c == nil {
		return nil, nil, errors.New("continuations: no slots")
	}
	select {
	case c.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	case <-c.closing:
		return nil, nil, ErrDraining
	}
	wctx, done, ok := c.started()
	if !ok {
		return nil, nil, ErrDraining
	}
	return wctx, done, nil
}

// started registers a continuation that holds a slot.
func (c *Continuations) started() (context.Context, func(), bool) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		<-c.slots
		return nil, nil, false
	}
	c.running.Add(1)
	work, stop := context.WithCancelCause(context.Background())
	key := c.next
	c.next++
	c.stops[key] = stop
	c.mu.Unlock()
	var once sync.Once
	return work, func() {
		once.Do(func() {
			c.mu.Lock()
			delete(c.stops, key)
			c.mu.Unlock()
			<-c.slots
			c.running.Done()
		})
	}, true
}

// Shutdown stops new continuations from starting and waits for those in
// progress until ctx ends (the grace period, DrainGrace by convention).
// Those still running then are stopped, with cause ErrDraining, and given
// a few seconds to release their claims. It returns nil when every
// continuation finished within the grace, and an error saying how it ended
// otherwise. Call it once.
func (c *Continuations) Shutdown(ctx context.Context) error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	close(c.closing)
	idle := make(chan struct{})
	go func() { c.running.Wait(); close(idle) }()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
	}
	stopped := len(c.slots)
	c.mu.Lock()
	for _, stop := range c.stops {
		stop(ErrDraining)
	}
	c.mu.Unlock()
	t := time.NewTimer(drainWindUp)
	defer t.Stop()
	select {
	case <-idle:
		return fmt.Errorf("%w: stopped %d continuations after the grace period; their claims are released", ErrDraining, stopped)
	case <-t.C:
		return fmt.Errorf("%w: %d continuations did not wind up within %s; their claims lapse with their leases", ErrDraining, len(c.slots), drainWindUp)
	}
}

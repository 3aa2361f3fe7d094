package core

import (
	"context"
	"time"
)

// Beat calls beat every interval (at least a millisecond), in a goroutine
// of its own, until beat returns false, ctx ends or stop is called. beat
// gets a context that ends when stop is called or ctx ends. stop ends the
// beats and returns once the last has returned; it may be called more than
// once, and from any goroutine.
//
// It is the one ticker behind every renewal: a claim's lease (Async), a
// received message's visibility (adapters/local) and the embedded store's
// sweeper. For renewals that must outlive the caller's cancellation, pass
// context.WithoutCancel(ctx).
func Beat(ctx context.Context, interval time.Duration, beat func(ctx context.Context) bool) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(max(interval, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			// A tick and the end may both be ready: the end wins.
			if ctx.Err() != nil || !beat(ctx) {
				return
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

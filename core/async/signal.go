package async

import "sync"

// causeSignal is a one-shot signal that carries why it fired: what a
// context.WithCancelCause gives, for a value that outlives no call and so
// must not hold a context. Its methods are safe for concurrent use.
type causeSignal struct {
	once  sync.Once
	done  chan struct{}
	cause error
}

func newCauseSignal() *causeSignal { return &causeSignal{done: make(chan struct{})} }

// fire closes Done with cause; later calls do nothing. Its signature is
// that of a context.CancelCauseFunc.
func (s *causeSignal) fire(cause error) {
	s.once.Do(func() {
		s.cause = cause
		close(s.done)
	})
}

// Done returns a channel closed when the signal fires.
func (s *causeSignal) Done() <-chan struct{} { return s.done }

// Cause returns the cause it fired with, or nil before it fires.
func (s *causeSignal) Cause() error {
	select {
	case <-s.done:
		return s.cause
	default:
		return nil
	}
}

// onFire calls f(cause) in its own goroutine once the signal fires, unless
// stop is called first; stop reports whether it stopped f from being run,
// as context.AfterFunc's does.
func (s *causeSignal) onFire(f func(cause error)) (stop func() bool) {
	quit := make(chan struct{})
	var once sync.Once
	stopped := false
	go func() {
		select {
		case <-s.done:
			once.Do(func() { f(s.cause) })
		case <-quit:
		}
	}()
	return func() bool {
		once.Do(func() { stopped = true; close(quit) })
		return stopped
	}
}

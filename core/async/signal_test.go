package async

import (
	"errors"
	"testing"
	"testing/synctest"
)

// TestCauseSignal: the first cause wins, Done closes once, onFire runs
// its function once the signal fires unless stopped first.
func TestCauseSignal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newCauseSignal()
		if got := s.Cause(); got != nil {
			t.Errorf("Cause before firing = %v; want nil", got)
		}
		var got []error
		stop := s.onFire(func(cause error) { got = append(got, cause) })
		stopped := s.onFire(func(error) { t.Error("a stopped onFire ran") })
		if !stopped() {
			t.Error("stop before firing = false; want true")
		}
		s.fire(ErrLeaseLost)
		s.fire(ErrCancelRequested)
		<-s.Done()
		synctest.Wait()
		if !errors.Is(s.Cause(), ErrLeaseLost) {
			t.Errorf("Cause = %v; want the first, ErrLeaseLost", s.Cause())
		}
		if len(got) != 1 || !errors.Is(got[0], ErrLeaseLost) {
			t.Errorf("onFire saw %v; want [ErrLeaseLost] once", got)
		}
		if stop() {
			t.Error("stop after the function ran = true; want false")
		}
	})
}

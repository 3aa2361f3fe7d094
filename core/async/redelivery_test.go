package async

import (
	"testing"
	"time"
)

func TestRedeliveryWait(t *testing.T) {
	const s = time.Second
	fixed := func(r float64) func() float64 { return func() float64 { return r } }
	tests := []struct {
		name string
		p    Redelivery
		n    int
		want time.Duration
	}{
		{"first, top of the range", Redelivery{Base: 10 * s, Jitter: fixed(1)}, 1, 10 * s},
		{"first, bottom of the range", Redelivery{Base: 10 * s, Jitter: fixed(0)}, 1, 5 * s},
		{"doubles", Redelivery{Base: 10 * s, Jitter: fixed(1)}, 3, 40 * s},
		{"jitter in the upper half", Redelivery{Base: 10 * s, Jitter: fixed(0.5)}, 2, 15 * s},
		{"capped by Max", Redelivery{Base: 10 * s, Max: time.Minute, Jitter: fixed(1)}, 5, time.Minute},
		{"no overflow for huge counts", Redelivery{Base: 10 * s, Max: time.Minute, Jitter: fixed(1)}, 1000, time.Minute},
		{"unknown count is the first", Redelivery{Base: 2 * s, Jitter: fixed(1)}, 0, 2 * s},
		{"defaults", Redelivery{Jitter: fixed(1)}, 1, DefaultRedeliveryBase},
		{"default cap", Redelivery{Jitter: fixed(1)}, 40, DefaultRedeliveryMax},
		{"a draw out of range is clamped", Redelivery{Base: 4 * s, Jitter: fixed(7)}, 1, 4 * s},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Wait(tt.n); got != tt.want {
				t.Errorf("Wait(%d) = %v; want %v", tt.n, got, tt.want)
			}
		})
	}
	// Without a fixed draw every wait stays in the upper half.
	for n := 1; n <= 8; n++ {
		c := min(DefaultRedeliveryBase<<(n-1), DefaultRedeliveryMax)
		if got := (Redelivery{}).Wait(n); got < c/2 || got > c {
			t.Errorf("Wait(%d) = %v; want within [%v, %v]", n, got, c/2, c)
		}
	}
}

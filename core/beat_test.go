package core

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestBeat: beats come every interval on the clock, end when beat says
// so, when ctx ends or at stop, which waits for the beat in progress.
func TestBeat(t *testing.T) {
	tests := []struct {
		name     string
		interval time.Duration
		until    int           // beat returns false at this beat (0: never)
		cancelAt time.Duration // ctx ends then (0: never)
		stopAt   time.Duration
		want     []time.Duration
	}{
		{"stopped", time.Second, 0, 0, 3500 * time.Millisecond, []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}},
		{"beat says stop", time.Second, 2, 0, 10 * time.Second, []time.Duration{time.Second, 2 * time.Second}},
		{"ctx ends", 2 * time.Second, 0, 5 * time.Second, 10 * time.Second, []time.Duration{2 * time.Second, 4 * time.Second}},
		{"interval under a millisecond", 0, 3, 0, time.Second, []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if tt.cancelAt > 0 {
					time.AfterFunc(tt.cancelAt, cancel)
				}
				start := time.Now()
				var got []time.Duration
				stop := Beat(ctx, tt.interval, func(bctx context.Context) bool {
					got = append(got, time.Since(start))
					return tt.until == 0 || len(got) < tt.until
				})
				time.Sleep(tt.stopAt)
				stop()
				stop() // twice is harmless
				if len(got) != len(tt.want) {
					t.Fatalf("beats at %v; want %v", got, tt.want)
				}
				for i := range got {
					if got[i] != tt.want[i] {
						t.Errorf("beat %d at %v; want %v", i, got[i], tt.want[i])
					}
				}
			})
		})
	}
}

// TestBeatStopWaits: stop returns only once the beat in progress has
// returned, and that beat's context has ended.
func TestBeatStopWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		returned := false
		stop := Beat(context.Background(), time.Second, func(bctx context.Context) bool {
			<-bctx.Done()
			time.Sleep(time.Second) // winding up
			returned = true
			return true
		})
		time.Sleep(1500 * time.Millisecond)
		start := time.Now()
		stop()
		if !returned {
			t.Fatal("stop returned before the beat in progress")
		}
		if got := time.Since(start); got != time.Second {
			t.Errorf("stop took %v; want the beat's 1 s wind-up", got)
		}
	})
}

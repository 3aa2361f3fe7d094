package main

import (
	"math"
	"runtime/debug"
	"testing"
)

// TestTuneGC: with neither GOGC nor GOMEMLIMIT set, the collector runs at
// gcPercent under a soft limit of gcLimitShare of the host's memory; what
// the environment sets is left alone.
func TestTuneGC(t *testing.T) {
	before := debug.SetGCPercent(100)
	beforeLimit := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetGCPercent(before); debug.SetMemoryLimit(beforeLimit) })

	none := func(string) (string, bool) { return "", false }
	var mem int64 = 1 << 30
	want := int64(float64(mem) * gcLimitShare)
	percent, limit := tuneGC(none, mem)
	if percent != gcPercent || limit != want || want < mem/2 || want >= mem {
		t.Errorf("unset: GOGC %d, limit %d; want %d and %d", percent, limit, gcPercent, want)
	}

	debug.SetGCPercent(150)
	debug.SetMemoryLimit(math.MaxInt64)
	set := func(name string) (string, bool) { return "x", name == "GOGC" || name == "GOMEMLIMIT" }
	if percent, limit := tuneGC(set, mem); percent != 150 || limit != 0 {
		t.Errorf("set by the environment: GOGC %d, limit %d; want 150 and none", percent, limit)
	}

	debug.SetGCPercent(100)
	if percent, limit := tuneGC(none, 0); percent != gcPercent || limit != 0 {
		t.Errorf("memory unknown: GOGC %d, limit %d; want %d and none", percent, limit, gcPercent)
	}
}

package main

import (
	"math"
	"runtime/debug"
	"strings"
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
	percent, limit, _ := tuneGC(none, mem)
	if percent != gcPercent || limit != want || want < mem/2 || want >= mem {
		t.Errorf("unset: GOGC %d, limit %d; want %d and %d", percent, limit, gcPercent, want)
	}

	debug.SetGCPercent(150)
	debug.SetMemoryLimit(math.MaxInt64)
	set := func(name string) (string, bool) { return "150", name == "GOGC" || name == "GOMEMLIMIT" }
	if percent, limit, err := tuneGC(set, mem); percent != 150 || limit != 0 || err != nil {
		t.Errorf("set by the environment: GOGC %d, limit %d; want 150 and none", percent, limit)
	}

	debug.SetGCPercent(100)
	if percent, limit, _ := tuneGC(none, 0); percent != gcPercent || limit != 0 {
		t.Errorf("memory unknown: GOGC %d, limit %d; want %d and none", percent, limit, gcPercent)
	}

	for _, v := range []string{"", "4OO", "1e3", "99999999999"} {
		bad := func(name string) (string, bool) { return v, name == "GOGC" }
		if _, _, err := tuneGC(bad, mem); err == nil || !strings.Contains(err.Error(), "GOGC") {
			t.Errorf("GOGC=%q: %v; want an error naming GOGC", v, err)
		}
	}
	for _, v := range []string{"off", "50", "-1"} {
		good := func(name string) (string, bool) { return v, name == "GOGC" }
		if _, _, err := tuneGC(good, mem); err != nil {
			t.Errorf("GOGC=%q: %v; want it taken", v, err)
		}
	}
}

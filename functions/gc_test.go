package main

import (
	"math"
	"runtime/debug"
	"strings"
	"testing"
)

// keepGC restores the collector's settings when t ends.
func keepGC(t *testing.T) {
	t.Helper()
	before := debug.SetGCPercent(100)
	beforeLimit := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetGCPercent(before); debug.SetMemoryLimit(beforeLimit) })
}

// TestTuneGC: with neither GOGC nor GOMEMLIMIT set, the collector runs at
// gcPercent under a soft limit of gcLimitShare of the host's memory; what
// the environment sets is left alone.
func TestTuneGC(t *testing.T) {
	keepGC(t)
	none := func(string) (string, bool) { return "", false }
	var mem int64 = 1 << 30
	want := int64(float64(mem) * gcLimitShare)
	st, _ := tuneGC(none, mem, "InstanceMemoryMB=1024 MB")
	if st.Percent != gcPercent || st.Limit != want || want < mem/2 || want >= mem {
		t.Errorf("unset: GOGC %d, limit %d; want %d and %d", st.Percent, st.Limit, gcPercent, want)
	}
	if st.LimitSource != "the soft memory limit, 80 % of InstanceMemoryMB=1024 MB" {
		t.Errorf("unset: limit source %q; want it to say the share and the memory's source", st.LimitSource)
	}

	debug.SetGCPercent(150)
	debug.SetMemoryLimit(math.MaxInt64)
	set := func(name string) (string, bool) { return "150", name == "GOGC" || name == "GOMEMLIMIT" }
	if st, err := tuneGC(set, mem, "x"); st.Percent != 150 || st.Limit != 0 || err != nil {
		t.Errorf("set by the environment: GOGC %d, limit %d; want 150 and none", st.Percent, st.Limit)
	}

	debug.SetGCPercent(100)
	if st, _ := tuneGC(none, 0, ""); st.Percent != gcPercent || st.Limit != 0 {
		t.Errorf("memory unknown: GOGC %d, limit %d; want %d and none", st.Percent, st.Limit, gcPercent)
	}

	for _, v := range []string{"", "4OO", "1e3", "99999999999"} {
		bad := func(name string) (string, bool) { return v, name == "GOGC" }
		if _, err := tuneGC(bad, mem, "x"); err == nil || !strings.Contains(err.Error(), "GOGC") {
			t.Errorf("GOGC=%q: %v; want an error naming GOGC", v, err)
		}
	}
	for _, v := range []string{"off", "50", "-1"} {
		good := func(name string) (string, bool) { return v, name == "GOGC" }
		if _, err := tuneGC(good, mem, "x"); err != nil {
			t.Errorf("GOGC=%q: %v; want it taken", v, err)
		}
	}
}

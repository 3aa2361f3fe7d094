package main

import (
	"fmt"
	"math"
	"runtime/debug"
	"strconv"

	"fngateway/core"
)

// gcPercent is the GOGC the gateway runs with when GOGC is not set: Go's
// own default, chosen by measurement (docs/performance.md, "Garbage
// collection"). Peak memory at 100, 200 and 400 under an endless streamed
// answer, 40 concurrent 10 MiB uploads and make bench-wrk: 200 raised the
// wrk peak by 17 % and 400 by 40 % (and the uploads' by 12 %), past the 10 %
// allowed over 100; what they bought in requests/s was within the noise of
// the shared machine.
const gcPercent = 100

// gcLimitShare is the part of the host's memory the heap may grow to
// before the collector works harder, when GOMEMLIMIT is not set (a soft
// limit: Go's own GOMEMLIMIT). The rest is for the binary, goroutine
// stacks and the kernel's socket buffers (and, on Azure, the Functions
// host, which shares the instance).
const gcLimitShare = 0.8

// gcState is the collector's setting in force: GOGC, the soft memory limit
// in bytes (0 for none) and where that limit comes from, for messages.
type gcState struct {
	Percent     int
	Limit       int64
	LimitSource string
}

// tuneGC sets the collector's pace from the host's memory (mem bytes, from
// memSource; 0 when unknown), leaving alone whatever the GOGC and
// GOMEMLIMIT environment variables already set. It returns the setting now
// in force, or an error naming a GOGC the Go runtime would silently take
// for 100. (A malformed GOMEMLIMIT stops the runtime itself, naming it.)
func tuneGC(lookup func(string) (string, bool), mem int64, memSource string) (gcState, error) {
	if v, ok := lookup("GOGC"); !ok {
		debug.SetGCPercent(gcPercent)
	} else if _, err := strconv.ParseInt(v, 10, 32); err != nil && v != "off" {
		return gcState{}, &core.SettingError{Name: "GOGC", Value: v, Want: "want a whole percentage or off (Go's own variable)"}
	}
	var source string
	if v, ok := lookup("GOMEMLIMIT"); ok {
		source = "the soft memory limit GOMEMLIMIT=" + v
	} else if mem > 0 {
		debug.SetMemoryLimit(int64(float64(mem) * gcLimitShare))
		source = fmt.Sprintf("the soft memory limit, %.0f %% of %s", gcLimitShare*100, memSource)
	}
	st := gcInForce()
	if st.Limit > 0 {
		st.LimitSource = source
	}
	return st, nil
}

// gcInForce reads GOGC and the soft memory limit the runtime now applies.
// runtime/debug, not runtime/metrics: that package's initialisation (its
// table of every metric's description) cost each cold start 0.65 ms
// (docs/performance.md, "Cold start"). A negative limit only reads it;
// SetGCPercent returns the setting it replaces, put back at once.
func gcInForce() gcState {
	limit := debug.SetMemoryLimit(-1)
	if limit == math.MaxInt64 {
		limit = 0
	}
	percent := debug.SetGCPercent(-1)
	debug.SetGCPercent(percent)
	return gcState{Percent: percent, Limit: limit}
}

// bodyBound is what the body budgets are held against: the soft memory
// limit, or the host's memory (mem, from memSource) when that is smaller
// or there is no limit.
func (g gcState) bodyBound(mem int64, memSource string) (int64, string) {
	if mem > 0 && (g.Limit == 0 || mem < g.Limit) {
		return mem, "the memory this host has (" + memSource + ")"
	}
	return g.Limit, g.LimitSource
}

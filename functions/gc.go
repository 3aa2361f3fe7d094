package main

import (
	"math"
	"runtime/debug"
	"runtime/metrics"
	"strconv"

	"fngateway/core"
)

// gcPercent is the GOGC the gateway runs with when GOGC is not set. Its
// live heap is small (a few MB beside the bodies it buffers), so with Go's
// default of 100 it collects every few MB allocated: about 20 cycles a
// second at 12 000 requests/s, each waking threads on a host with few
// cores. 400 collects a quarter as often; gcLimitShare of the host's
// memory bounds what that costs in memory.
const gcPercent = 400

// gcLimitShare is the part of the host's memory the heap may grow to
// before the collector works harder, when GOMEMLIMIT is not set (a soft
// limit: Go's own GOMEMLIMIT). The rest is for the binary, goroutine
// stacks and the kernel's socket buffers.
const gcLimitShare = 0.8

// tuneGC sets the collector's pace from the host's memory, leaving alone
// whatever the GOGC and GOMEMLIMIT environment variables already set. It
// returns the GOGC and memory limit now in force (0 when there is none),
// or an error naming a GOGC the Go runtime would silently take for 100.
// (A malformed GOMEMLIMIT stops the runtime itself, naming it.)
func tuneGC(lookup func(string) (string, bool), mem int64) (percent int, limit int64, err error) {
	if v, ok := lookup("GOGC"); !ok {
		debug.SetGCPercent(gcPercent)
	} else if _, err := strconv.ParseInt(v, 10, 32); err != nil && v != "off" {
		return 0, 0, &core.SettingError{Name: "GOGC", Value: v, Want: "want a whole percentage or off (Go's own variable)"}
	}
	if _, ok := lookup("GOMEMLIMIT"); !ok && mem > 0 {
		debug.SetMemoryLimit(int64(float64(mem) * gcLimitShare))
	}
	m := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(m)
	if limit = int64(m[1].Value.Uint64()); limit == math.MaxInt64 {
		limit = 0
	}
	return int(m[0].Value.Uint64()), limit, nil
}

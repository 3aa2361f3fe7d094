package core

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"
)

// platformArrivalKey is the context key of WithPlatformArrival.
type platformArrivalKey struct{}

// WithPlatformArrival returns ctx carrying t, the time the platform says it
// accepted the request (Lambda: the event's requestContext.timeEpoch). The
// HTTP face starts the request's TTL there (ClockStart).
func WithPlatformArrival(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, platformArrivalKey{}, t)
}

// PlatformArrival returns the time WithPlatformArrival put in ctx.
func PlatformArrival(ctx context.Context) (time.Time, bool) {
	t, ok := ctx.Value(platformArrivalKey{}).(time.Time)
	return t, ok && !t.IsZero()
}

// ClockStart returns when a request's TTL starts (docs/deadlines.md#when-the-clock-starts): at
// accepted, the time the platform or a trusted proxy says it accepted the
// request, but never later than arrival, the gateway's own arrival; an
// accepted time after it (a skewed clock, or one in the future) counts as
// arrival. A zero accepted is arrival.
func ClockStart(accepted, arrival time.Time) time.Time {
	if accepted.IsZero() || !accepted.Before(arrival) {
		return arrival
	}
	return accepted
}

// errInvalidRequestStart is wrapped by ParseRequestStart's errors.
var errInvalidRequestStart = errors.New("want t=<microseconds since the Unix epoch>")

// ParseRequestStart reads an X-Request-Start header as load balancers and
// APM tools write it: "t=<microseconds since the Unix epoch>". The "t="
// may be missing, and the unit is told by magnitude as APM agents do
// (seconds, with decimals, milliseconds, microseconds or nanoseconds), so
// nginx's "t=${msec}" reads too.
func ParseRequestStart(v string) (time.Time, error) {
	v = strings.TrimSpace(v)
	v = strings.TrimPrefix(v, "t=")
	if v == "" || len(v) > 32 {
		return time.Time{}, errInvalidRequestStart
	}
	if strings.IndexByte(v, '.') >= 0 {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0) || f > 1e11 { // seconds, with a fraction
			return time.Time{}, errInvalidRequestStart
		}
		return time.UnixMicro(int64(f * 1e6)), nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}, errInvalidRequestStart
	}
	switch {
	case n >= 1e17:
		return time.Unix(0, n), nil
	case n >= 1e14:
		return time.UnixMicro(n), nil
	case n >= 1e11:
		return time.UnixMilli(n), nil
	}
	return time.Unix(n, 0), nil
}

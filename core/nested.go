package core

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// This file is the caller's own deadline (docs/deadlines.md#nested-budgets,
// docs/settings.md#per-request-headers): a proxy in front (Envoy's
// x-envoy-expected-rq-timeout-ms) or a gRPC client (grpc-timeout) says how
// long it will wait. The gateway's TTL nests inside it (client > gateway >
// backend): the caller's deadline can only shorten the TTL, never lengthen
// it, so it is safe to take from anyone.

// errInvalidCallerTimeout is returned by CallerDeadline for a header it
// cannot read.
var errInvalidCallerTimeout = errors.New("want grpc-timeout as 1 to 8 digits and a unit (H, M, S, m, u, n), such as 250m, and x-envoy-expected-rq-timeout-ms as a whole number of milliseconds")

// CallerDeadline returns the earliest deadline the caller's headers set for
// a request that arrived at arrival, and the header that set it: zero and
// "" when neither grpc-timeout nor x-envoy-expected-rq-timeout-ms is
// present. A present header that does not parse is an error naming it
// (wrapping errInvalidCallerTimeout).
func CallerDeadline(h http.Header, arrival time.Time) (time.Time, string, error) {
	var best time.Time
	var from string
	if v, ok := h["Grpc-Timeout"]; ok {
		d, err := parseGRPCTimeout(strings.Join(v, ","))
		if err != nil {
			return time.Time{}, "grpc-timeout", err
		}
		best, from = arrival.Add(d), "grpc-timeout"
	}
	if v, ok := h["X-Envoy-Expected-Rq-Timeout-Ms"]; ok {
		d, err := parseEnvoyTimeout(strings.Join(v, ","))
		if err != nil {
			return time.Time{}, "x-envoy-expected-rq-timeout-ms", err
		}
		if t := arrival.Add(d); best.IsZero() || t.Before(best) {
			best, from = t, "x-envoy-expected-rq-timeout-ms"
		}
	}
	return best, from, nil
}

// parseGRPCTimeout reads a grpc-timeout value: 1 to 8 ASCII digits and a
// unit, H (hours), M (minutes), S (seconds), m (milliseconds),
// u (microseconds) or n (nanoseconds), as gRPC over HTTP/2 defines it
// (https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md). A value
// beyond the ten-year cap on durations is capped there.
func parseGRPCTimeout(v string) (time.Duration, error) {
	if len(v) < 2 || len(v) > 9 {
		return 0, errInvalidCallerTimeout
	}
	digits, unit := v[:len(v)-1], v[len(v)-1]
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, errInvalidCallerTimeout
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, errInvalidCallerTimeout
	}
	var u time.Duration
	switch unit {
	case 'H':
		u = time.Hour
	case 'M':
		u = time.Minute
	case 'S':
		u = time.Second
	case 'm':
		u = time.Millisecond
	case 'u':
		u = time.Microsecond
	case 'n':
		u = time.Nanosecond
	default:
		return 0, errInvalidCallerTimeout
	}
	// 99999999 hours overflows nothing in int64 nanoseconds only up to
	// about 2.5 million hours: cap at ten years first.
	if n > int64(MaxSeconds*time.Second/u) {
		return MaxSeconds * time.Second, nil
	}
	return time.Duration(n) * u, nil
}

// parseEnvoyTimeout reads x-envoy-expected-rq-timeout-ms: a whole number
// of milliseconds, capped at ten years.
func parseEnvoyTimeout(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "" || len(v) > 19 || strings.Trim(v, "0123456789") != "" {
		return 0, errInvalidCallerTimeout
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, errInvalidCallerTimeout
	}
	if n > MaxSeconds*1000 {
		return MaxSeconds * time.Second, nil
	}
	return time.Duration(n) * time.Millisecond, nil
}

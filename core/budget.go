package core

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Cause names the deadline that ends an attempt or a request.
type Cause uint8

// The deadlines, in the order that breaks ties: when two fire at the same
// instant, the lower Cause is reported.
const (
	CauseNone          Cause = iota
	CauseTTL                 // the request's TTL
	CauseFunctionLimit       // the host's execution limit minus the margin
	CauseTimeout             // the attempt's own Timeout
)

func (c Cause) String() string {
	switch c {
	case CauseTTL:
		return "ttl"
	case CauseFunctionLimit:
		return "function-limit"
	case CauseTimeout:
		return "timeout"
	}
	return "none"
}

// Budget is the time a request may use. It is a value: copy it freely.
type Budget struct {
	// Arrival is when the request reached the gateway.
	Arrival time.Time
	// TTL is the request's deadline: arrival plus its TTL.
	TTL time.Time
	// Timeout is one attempt's window, fresh for each attempt.
	Timeout time.Duration
	// Limit is the host's execution limit minus the safety margin; the
	// zero Time means the host sets none.
	Limit time.Time
	// ClientTimeout and ClientTTL say that the client chose a Timeout or a
	// TTL shorter than the route's own (S7PTimeout, S7PTTL). An attempt
	// such a deadline cut says nothing of the host's health: it counts
	// toward neither ejection nor the retry budget (docs/security.md#host-health-and-client-chosen-budgets). False,
	// the zero value, means the deadline is the operator's.
	ClientTimeout, ClientTTL bool
}

// Chosen reports whether the deadline c, in b, is one the client shortened
// below the route's own: an attempt it cut is the client's doing, not the
// host's.
func (b Budget) Chosen(c Cause) bool {
	return c == CauseTimeout && b.ClientTimeout || c == CauseTTL && b.ClientTTL
}

// Attempt returns the deadline of an attempt that starts at now, and which
// limit sets it: the earliest of the TTL, now+Timeout and the execution
// limit wins.
func (b Budget) Attempt(now time.Time) (time.Time, Cause) {
	d, c := b.TTL, CauseTTL
	if !b.Limit.IsZero() && b.Limit.Before(d) {
		d, c = b.Limit, CauseFunctionLimit
	}
	if b.Timeout > 0 {
		if t := now.Add(b.Timeout); t.Before(d) {
			d, c = t, CauseTimeout
		}
	}
	return d, c
}

// WithLimit returns b with its execution limit margin before deadline, the
// host's limit for the invocation: the zero deadline means the host sets
// none, and a negative margin counts as zero.
func (b Budget) WithLimit(deadline time.Time, margin time.Duration) Budget {
	b.Limit = time.Time{}
	if !deadline.IsZero() {
		b.Limit = deadline.Add(-max(margin, 0))
	}
	return b
}

// End returns the earliest of the TTL and the execution limit: the instant
// the whole request must have its answer.
func (b Budget) End() (time.Time, Cause) {
	if !b.Limit.IsZero() && b.Limit.Before(b.TTL) {
		return b.Limit, CauseFunctionLimit
	}
	return b.TTL, CauseTTL
}

// errInvalidTTL is returned by ParseTTL for a value it cannot read.
var errInvalidTTL = errors.New("want seconds (300 or 2.5), +<unix seconds>, or an ISO 8601 time such as 2024-12-31T23:59:59Z")

// errInvalidTimeout is returned by ParseTimeout for a value it cannot read.
var errInvalidTimeout = errors.New("want a positive number of milliseconds, such as 5000")

// ErrBeyondCap is ParseDecimalSeconds's error for a value beyond
// MaxSeconds, the ten-year cap on every duration.
var ErrBeyondCap = errors.New("beyond the ten-year cap")

// capError is a value refused only because it is beyond the ten-year cap
// on durations: its message names the cap, and it Is its kind
// (errInvalidTTL, errInvalidTimeout) for callers that branch on that.
type capError struct {
	kind error
	msg  string
}

func (e *capError) Error() string        { return e.msg }
func (e *capError) Is(target error) bool { return target == e.kind }

// errTTLBeyondCap and errTimeoutBeyondCap are ParseTTL's and
// ParseTimeout's errors for a value that reads well but is beyond its cap:
// ten years for S7PTTL, MaxSeconds milliseconds for S7PTimeout.
var (
	errTTLBeyondCap = &capError{kind: errInvalidTTL,
		msg: fmt.Sprintf("more than ten years (%d s) after arrival; want at most that: the longest TTL the gateway accepts", MaxSeconds)}
	errTimeoutBeyondCap = &capError{kind: errInvalidTimeout,
		msg: fmt.Sprintf("more than %d ms; want at most that: the longest timeout the gateway accepts", MaxSeconds)}
)

// ParseTTL reads an S7PTTL header value and returns the request's deadline
// for a request that arrived at arrival. The forms are: seconds from
// arrival ("300", "2.5"), absolute Unix seconds ("+1735689600") and
// ISO 8601 ("2024-12-31T23:59:59Z", or with an offset). Zero, a negative
// value or a past time give a deadline at or before arrival: the request has
// expired. An empty or unreadable value is errInvalidTTL; one beyond ten
// years is an error that names that cap and Is errInvalidTTL.
func ParseTTL(v string, arrival time.Time) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, errInvalidTTL
	}
	if rest, ok := strings.CutPrefix(v, "+"); ok {
		t, err := parseUnix(rest)
		if err != nil {
			return time.Time{}, errInvalidTTL
		}
		if t.Sub(arrival) > MaxSeconds*time.Second {
			return time.Time{}, errTTLBeyondCap
		}
		return t, nil
	}
	if c := v[0]; c == '-' || c >= '0' && c <= '9' || c == '.' {
		if len(v) >= 10 && strings.ContainsAny(v, "T:") {
			return parseISO(v, arrival)
		}
		secs, err := ParseDecimalSeconds(v)
		if errors.Is(err, ErrBeyondCap) {
			return time.Time{}, errTTLBeyondCap
		}
		if err != nil {
			return time.Time{}, errInvalidTTL
		}
		return arrival.Add(secs), nil
	}
	return time.Time{}, errInvalidTTL
}

func parseISO(v string, arrival time.Time) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, errInvalidTTL
	}
	if t.Sub(arrival) > MaxSeconds*time.Second {
		return time.Time{}, errTTLBeyondCap
	}
	return t, nil
}

// parseUnix reads digits[.digits] as absolute Unix seconds, up to the
// year 9999.
func parseUnix(v string) (time.Time, error) {
	whole, frac, _ := strings.Cut(v, ".")
	if whole == "" || len(whole) > 12 || strings.Trim(whole, "0123456789") != "" || strings.Trim(frac, "0123456789") != "" {
		return time.Time{}, errInvalidTTL
	}
	sec, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || sec > 253402300799 {
		return time.Time{}, errInvalidTTL
	}
	var nsec int64
	if frac != "" {
		if len(frac) > 9 {
			frac = frac[:9]
		}
		n, _ := strconv.ParseInt(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
		nsec = n
	}
	return time.Unix(sec, nsec), nil
}

// ParseDecimalSeconds reads [-]digits[.digits] as a duration, rejecting
// exponents, infinities and anything beyond ±MaxSeconds (the magnitude of a
// negative value is irrelevant, so it is clamped rather than refused).
func ParseDecimalSeconds(v string) (time.Duration, error) {
	s := v
	neg := false
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	}
	if s == "" || s == "." {
		return 0, errInvalidTTL
	}
	dot := false
	digits := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.' && !dot:
			dot = true
		default:
			return 0, errInvalidTTL
		}
	}
	if digits == 0 {
		return 0, errInvalidTTL
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		if neg {
			return -MaxSeconds * time.Second, nil
		}
		if err != nil && errors.Is(err, strconv.ErrRange) || math.IsInf(f, 0) {
			return 0, ErrBeyondCap // digits only: a number too large to hold
		}
		return 0, errInvalidTTL
	}
	if f > MaxSeconds {
		if neg {
			return -MaxSeconds * time.Second, nil
		}
		return 0, ErrBeyondCap
	}
	d := time.Duration(math.Round(f * float64(time.Second)))
	if neg {
		d = -d
	}
	return d, nil
}

// ParseTimeout reads an S7PTimeout header value: a positive number of
// milliseconds, decimals allowed.
func ParseTimeout(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "" || v[0] == '-' || v[0] == '+' {
		return 0, errInvalidTimeout
	}
	d, err := ParseDecimalSeconds(v)
	if errors.Is(err, ErrBeyondCap) {
		return 0, errTimeoutBeyondCap
	}
	if err != nil {
		return 0, errInvalidTimeout
	}
	// d is v seconds; v was milliseconds.
	d /= 1000
	if d <= 0 {
		return 0, errInvalidTimeout
	}
	return d, nil
}

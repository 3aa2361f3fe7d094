package core

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func TestParseTTL(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    time.Time
		wantErr bool
	}{
		{"whole seconds", "300", t0.Add(300 * time.Second), false},
		{"decimal seconds", "2.5", t0.Add(2500 * time.Millisecond), false},
		{"leading dot", ".5", t0.Add(500 * time.Millisecond), false},
		{"spaces trimmed", " 10 ", t0.Add(10 * time.Second), false},
		{"absolute unix", "+1735689600", time.Unix(1735689600, 0), false},
		{"absolute unix decimal", "+1735689600.25", time.Unix(1735689600, 250e6), false},
		{"iso utc", "2026-11-30T12:01:00Z", t0.Add(time.Minute), false},
		{"iso offset", "2026-11-30T13:01:00+01:00", t0.Add(time.Minute), false},
		{"iso fraction", "2026-11-30T12:00:01.5Z", t0.Add(1500 * time.Millisecond), false},
		{"zero is expired", "0", t0, false},
		{"negative is expired", "-5", t0.Add(-5 * time.Second), false},
		{"huge negative is expired", "-99999999999999999999", t0.Add(-MaxSeconds * time.Second), false},
		{"past iso is expired", "2024-12-31T23:59:59Z", time.Date(2024, 12, 31, 23, 59, 59, 0, time.UTC), false},
		{"empty", "", time.Time{}, true},
		{"blank", "   ", time.Time{}, true},
		{"trailing junk", "12abc", time.Time{}, true},
		{"exponent", "1e30", time.Time{}, true},
		{"exponent small", "1e3", time.Time{}, true},
		{"overflow relative", "99999999999999999999", time.Time{}, true},
		{"overflow absolute", "+99999999999999", time.Time{}, true},
		{"plus only", "+", time.Time{}, true},
		{"plus minus", "+-5", time.Time{}, true},
		{"double plus", "++5", time.Time{}, true},
		{"two dots", "1.2.3", time.Time{}, true},
		{"dot only", ".", time.Time{}, true},
		{"minus only", "-", time.Time{}, true},
		{"hex", "0x10", time.Time{}, true},
		{"inf", "Inf", time.Time{}, true},
		{"nan", "NaN", time.Time{}, true},
		{"bad iso", "2024-13-31T23:59:59Z", time.Time{}, true},
		{"iso without zone", "2024-12-31T23:59:59", time.Time{}, true},
		{"far future iso", "9999-12-31T23:59:59Z", time.Time{}, true},
		{"words", "soon", time.Time{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTTL(tt.in, t0)
			if tt.wantErr {
				if !errors.Is(err, errInvalidTTL) {
					t.Fatalf("ParseTTL(%q) = %v, %v; want errInvalidTTL", tt.in, got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTTL(%q): %v", tt.in, err)
			}
			if !got.Equal(tt.want) {
				t.Errorf("ParseTTL(%q) = %v; want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseTimeout(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"5000", 5 * time.Second, false},
		{"1.5", 1500 * time.Microsecond, false},
		{"1", time.Millisecond, false},
		{"0", 0, true},
		{"-1", 0, true},
		{"", 0, true},
		{"abc", 0, true},
		{"1e3", 0, true},
		{"+5", 0, true},
		{"99999999999999999999", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseTimeout(tt.in)
			if tt.wantErr {
				if !errors.Is(err, errInvalidTimeout) {
					t.Fatalf("ParseTimeout(%q) = %v, %v; want errInvalidTimeout", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ParseTimeout(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

// TestBudgetEarliestWins puts the three deadlines in every order and checks
// the earliest one sets the attempt's deadline.
func TestBudgetEarliestWins(t *testing.T) {
	s := time.Second
	tests := []struct {
		name      string
		ttl       time.Duration // from t0
		timeout   time.Duration
		limit     time.Duration // from t0; 0: none
		want      time.Duration
		wantCause Cause
	}{
		{"ttl < timeout < limit", 1 * s, 2 * s, 3 * s, 1 * s, CauseTTL},
		{"ttl < limit < timeout", 1 * s, 3 * s, 2 * s, 1 * s, CauseTTL},
		{"timeout < ttl < limit", 2 * s, 1 * s, 3 * s, 1 * s, CauseTimeout},
		{"timeout < limit < ttl", 3 * s, 1 * s, 2 * s, 1 * s, CauseTimeout},
		{"limit < ttl < timeout", 2 * s, 3 * s, 1 * s, 1 * s, CauseFunctionLimit},
		{"limit < timeout < ttl", 3 * s, 2 * s, 1 * s, 1 * s, CauseFunctionLimit},
		{"no limit, ttl first", 1 * s, 2 * s, 0, 1 * s, CauseTTL},
		{"no limit, timeout first", 2 * s, 1 * s, 0, 1 * s, CauseTimeout},
		{"tie ttl and timeout: ttl", 1 * s, 1 * s, 0, 1 * s, CauseTTL},
		{"tie ttl and limit: ttl", 1 * s, 5 * s, 1 * s, 1 * s, CauseTTL},
		{"tie limit and timeout: limit", 5 * s, 1 * s, 1 * s, 1 * s, CauseFunctionLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := Budget{Arrival: t0, TTL: t0.Add(tt.ttl), Timeout: tt.timeout}
			if tt.limit > 0 {
				b.Limit = t0.Add(tt.limit)
			}
			got, cause := b.Attempt(t0)
			if got.Sub(t0) != tt.want || cause != tt.wantCause {
				t.Errorf("Attempt = +%v (%v); want +%v (%v)", got.Sub(t0), cause, tt.want, tt.wantCause)
			}
		})
	}
}

// TestBudgetSeedExample is the seed's worked example: TTL 60 s, Timeout
// 45 s, 5 s in a queue before the first attempt, two attempts. The first
// attempt has its full 45 s; the second starts at 50 s and has 10 s; the TTL
// fires at 60 s.
func TestBudgetSeedExample(t *testing.T) {
	b := Budget{Arrival: t0, TTL: t0.Add(60 * time.Second), Timeout: 45 * time.Second}
	start1 := t0.Add(5 * time.Second)
	end1, c1 := b.Attempt(start1)
	if got, want := end1.Sub(start1), 45*time.Second; got != want || c1 != CauseTimeout {
		t.Fatalf("attempt 1 window = %v (%v); want %v (timeout)", got, c1, want)
	}
	end2, c2 := b.Attempt(end1)
	if got, want := end2.Sub(end1), 10*time.Second; got != want || c2 != CauseTTL {
		t.Fatalf("attempt 2 window = %v (%v); want %v (ttl)", got, c2, want)
	}
	if got, want := end2.Sub(t0), 60*time.Second; got != want {
		t.Errorf("TTL fires at %v; want %v", got, want)
	}
}

// TestBudgetEnvoyCase: a route timeout of 2 s with a per-try timeout of
// 500 ms; 1.7 s already used, so the third attempt gets only 0.3 s.
func TestBudgetEnvoyCase(t *testing.T) {
	b := Budget{Arrival: t0, TTL: t0.Add(2 * time.Second), Timeout: 500 * time.Millisecond}
	now := t0.Add(1700 * time.Millisecond)
	end, c := b.Attempt(now)
	if got, want := end.Sub(now), 300*time.Millisecond; got != want || c != CauseTTL {
		t.Errorf("third attempt window = %v (%v); want %v (ttl)", got, c, want)
	}
}

func TestBudgetEnd(t *testing.T) {
	b := Budget{Arrival: t0, TTL: t0.Add(10 * time.Second)}
	if e, c := b.End(); !e.Equal(b.TTL) || c != CauseTTL {
		t.Errorf("End = %v %v; want TTL", e, c)
	}
	b.Limit = t0.Add(5 * time.Second)
	if e, c := b.End(); !e.Equal(b.Limit) || c != CauseFunctionLimit {
		t.Errorf("End = %v %v; want limit", e, c)
	}
}

func TestGRPCTimeout(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{1500 * time.Millisecond, "1500000u"},
		{45 * time.Second, "45000000u"},
		{100 * time.Second, "100000m"},
		{30 * time.Hour, "108000S"},
		{time.Nanosecond, "1n"},
		{0, "1n"},
		{1234567 * time.Nanosecond, "1234567n"},
	}
	for _, tt := range tests {
		if got := grpcTimeout(tt.in); got != tt.want {
			t.Errorf("grpcTimeout(%v) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	base := 25 * time.Millisecond
	tests := []struct {
		n    int
		r    float64
		want time.Duration
	}{
		{1, 0.999999, 25 * time.Millisecond},
		{2, 0.5, 25 * time.Millisecond},
		{3, 1, 100 * time.Millisecond},
		{4, 1, 200 * time.Millisecond},
		{5, 1, 250 * time.Millisecond}, // capped at 10 × base
		{60, 1, 250 * time.Millisecond},
		{1, 0, 0},
		{0, 1, 0},
	}
	for _, tt := range tests {
		got := backoff(base, tt.n, tt.r)
		if d := got - tt.want; d > time.Microsecond || d < -time.Microsecond {
			t.Errorf("backoff(n=%d, r=%v) = %v; want %v", tt.n, tt.r, got, tt.want)
		}
	}
}

func FuzzParseTTL(f *testing.F) {
	for _, s := range []string{"300", "2.5", "+1735689600", "2024-12-31T23:59:59Z", "0", "-1", "", "12abc", "1e30", "+99999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseTTL(s, t0)
		if err != nil {
			if !errors.Is(err, errInvalidTTL) {
				t.Fatalf("ParseTTL(%q): unexpected error kind %v", s, err)
			}
			return
		}
		// A readable TTL is never further than ten years away, so adding
		// it to a clock cannot overflow.
		if got.Sub(t0) > MaxSeconds*time.Second {
			t.Fatalf("ParseTTL(%q) = %v: beyond the ten-year bound", s, got)
		}
		// Round trip: relative seconds written back parse to the same
		// deadline (to the nanosecond).
		if d := got.Sub(t0); d > 0 {
			back, err := ParseTTL(formatSeconds(d), t0)
			if err != nil || !back.Equal(got) {
				t.Fatalf("round trip of %q via %q = %v, %v; want %v", s, formatSeconds(d), back, err, got)
			}
		}
	})
}

func FuzzParseTimeout(f *testing.F) {
	for _, s := range []string{"5000", "1.5", "0", "-1", "", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseTimeout(s)
		if err != nil {
			if !errors.Is(err, errInvalidTimeout) {
				t.Fatalf("ParseTimeout(%q): unexpected error kind %v", s, err)
			}
			return
		}
		if d <= 0 || d > MaxSeconds*time.Second {
			t.Fatalf("ParseTimeout(%q) = %v: out of range", s, d)
		}
	})
}

// formatSeconds writes d as decimal seconds with nanosecond precision.
func formatSeconds(d time.Duration) string {
	s := d / time.Second
	ns := d % time.Second
	out := []byte{}
	out = append(out, []byte(itoa(int64(s)))...)
	if ns != 0 {
		frac := itoa(int64(ns) + 1e9)[1:]
		out = append(out, '.')
		out = append(out, []byte(frac)...)
	}
	return string(out)
}

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

func TestBudgetWithLimit(t *testing.T) {
	dl := time.Unix(1000, 0)
	b := Budget{Timeout: time.Second}
	tests := []struct {
		name     string
		deadline time.Time
		margin   time.Duration
		want     time.Time
	}{
		{"margin before the deadline", dl, time.Second, dl.Add(-time.Second)},
		{"no margin", dl, 0, dl},
		{"a negative margin counts as zero", dl, -time.Second, dl},
		{"no deadline, no limit", time.Time{}, time.Second, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := b.WithLimit(tt.deadline, tt.margin)
			if !got.Limit.Equal(tt.want) || got.Timeout != b.Timeout {
				t.Errorf("WithLimit = %+v, want Limit %v and the rest kept", got, tt.want)
			}
		})
	}
	if got := (Budget{Limit: dl}).WithLimit(time.Time{}, 0); !got.Limit.IsZero() {
		t.Errorf("WithLimit(no deadline) kept the old limit %v", got.Limit)
	}
}

// TestParseTTLNamesTheCap: a TTL or timeout that reads well but is beyond
// the cap is refused with a message naming the cap, not one that asks for
// the form it already has; it is still errInvalidTTL / errInvalidTimeout.
func TestParseTTLNamesTheCap(t *testing.T) {
	tests := []struct {
		name, in string
		parse    func(string) error
		kind     error
		want     string
	}{
		{"seconds", "400000000", func(v string) error { _, err := ParseTTL(v, t0); return err }, errInvalidTTL, "more than ten years (315360000 s) after arrival"},
		{"huge seconds", strings.Repeat("9", 400), func(v string) error { _, err := ParseTTL(v, t0); return err }, errInvalidTTL, "more than ten years"},
		{"absolute", "+99999999999", func(v string) error { _, err := ParseTTL(v, t0); return err }, errInvalidTTL, "more than ten years"},
		{"iso", "9999-12-31T23:59:59Z", func(v string) error { _, err := ParseTTL(v, t0); return err }, errInvalidTTL, "more than ten years"},
		{"timeout", "400000000", func(v string) error { _, err := ParseTimeout(v); return err }, errInvalidTimeout, "more than 315360000 ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.parse(tt.in)
			if !errors.Is(err, tt.kind) || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "300 or 2.5") {
				t.Errorf("parse(%q) = %v; want %v naming the cap (%q)", tt.in, err, tt.kind, tt.want)
			}
		})
	}
	// A value that does not read is still asked for in the right form.
	if _, err := ParseTTL("soon", t0); err == nil || !strings.Contains(err.Error(), "300 or 2.5") {
		t.Errorf("ParseTTL(soon) = %v; want the forms", err)
	}
}

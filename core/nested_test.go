package core

import (
	"errors"
	"net/http"
	"testing"
	"time"
)

func TestCallerDeadline(t *testing.T) {
	for _, tt := range []struct {
		name string
		h    http.Header
		want time.Duration // after arrival; -1: none
		from string
		err  bool
	}{
		{"none", http.Header{}, -1, "", false},
		{"grpc 250m", http.Header{"Grpc-Timeout": {"250m"}}, 250 * time.Millisecond, "grpc-timeout", false},
		{"grpc 2S", http.Header{"Grpc-Timeout": {"2S"}}, 2 * time.Second, "grpc-timeout", false},
		{"grpc 1H", http.Header{"Grpc-Timeout": {"1H"}}, time.Hour, "grpc-timeout", false},
		{"grpc huge capped", http.Header{"Grpc-Timeout": {"99999999H"}}, MaxSeconds * time.Second, "grpc-timeout", false},
		{"envoy", http.Header{"X-Envoy-Expected-Rq-Timeout-Ms": {"1500"}}, 1500 * time.Millisecond, "x-envoy-expected-rq-timeout-ms", false},
		{"earliest wins", http.Header{"Grpc-Timeout": {"3S"}, "X-Envoy-Expected-Rq-Timeout-Ms": {"1000"}}, time.Second, "x-envoy-expected-rq-timeout-ms", false},
		{"grpc no unit", http.Header{"Grpc-Timeout": {"250"}}, 0, "grpc-timeout", true},
		{"grpc nine digits", http.Header{"Grpc-Timeout": {"123456789S"}}, 0, "grpc-timeout", true},
		{"grpc negative", http.Header{"Grpc-Timeout": {"-1S"}}, 0, "grpc-timeout", true},
		{"grpc empty", http.Header{"Grpc-Timeout": {""}}, 0, "grpc-timeout", true},
		{"envoy junk", http.Header{"X-Envoy-Expected-Rq-Timeout-Ms": {"1.5"}}, 0, "x-envoy-expected-rq-timeout-ms", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, from, err := CallerDeadline(tt.h, t0)
			if (err != nil) != tt.err || err != nil && !errors.Is(err, errInvalidCallerTimeout) {
				t.Fatalf("err = %v; want error %v", err, tt.err)
			}
			if from != tt.from {
				t.Errorf("from %q; want %q", from, tt.from)
			}
			if tt.err {
				return
			}
			if tt.want < 0 {
				if !got.IsZero() {
					t.Errorf("deadline %v; want none", got)
				}
				return
			}
			if d := got.Sub(t0); d != tt.want {
				t.Errorf("deadline arrival+%v; want +%v", d, tt.want)
			}
		})
	}
}

// FuzzParseGRPCTimeout: any value read is at most the cap and at least
// zero, and what grpcTimeout writes reads back as no less than it wrote.
func FuzzParseGRPCTimeout(f *testing.F) {
	for _, s := range []string{"1n", "250m", "99999999H", "0S", "1x", "", "S", "-1S", "12345678u", "+1S", " 1S"} {
		f.Add(s, int64(0))
	}
	f.Add("", int64(1500*time.Millisecond))
	f.Fuzz(func(t *testing.T, v string, d int64) {
		if got, err := parseGRPCTimeout(v); err == nil && (got < 0 || got > MaxSeconds*time.Second) {
			t.Fatalf("parseGRPCTimeout(%q) = %v; want within [0, ten years]", v, got)
		}
		if d <= 0 || d > int64(MaxSeconds*time.Second) {
			return
		}
		w := grpcTimeout(time.Duration(d))
		back, err := parseGRPCTimeout(w)
		if err != nil || back < time.Duration(d) {
			t.Fatalf("grpcTimeout(%v) = %q reads back as %v, %v; want at least the window", time.Duration(d), w, back, err)
		}
	})
}

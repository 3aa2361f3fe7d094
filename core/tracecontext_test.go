package core

import (
	"net/http"
	"strings"
	"testing"

	"fngateway/internal/testutil"
)

const validTP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestTraceContext is the table of what a client's trace context may carry
// on (W3C Trace Context §3.2, §3.3; docs/security.md#bounded-telemetry-and-logs).
func TestTraceContext(t *testing.T) {
	cases := []struct {
		name           string
		tp             []string
		ts             []string
		wantTP, wantTS string
	}{
		{"valid", []string{validTP}, []string{"congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"}, validTP, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"},
		{"tracestate over two headers", []string{validTP}, []string{"a=1", "b=2"}, validTP, "a=1,b=2"},
		{"multi-tenant key", []string{validTP}, []string{"t1@sys=v"}, validTP, "t1@sys=v"},
		{"empty members and blanks", []string{validTP}, []string{"a=1 , ,\tb=2"}, validTP, "a=1 , ,\tb=2"},
		{"no tracestate", []string{validTP}, nil, validTP, ""},
		{"future version with more fields", []string{"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what"}, nil, "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what", ""},
		{"32 members", []string{validTP}, []string{strings.Join(shortMembers(32), ",")}, validTP, strings.Join(shortMembers(32), ",")},
		{"33 members dropped", []string{validTP}, []string{strings.Join(shortMembers(33), ",")}, validTP, ""},
		{"2000 members dropped", []string{validTP}, []string{strings.Repeat("a=1,", 2000)}, validTP, ""},
		{"over 512 bytes dropped", []string{validTP}, []string{"a=" + strings.Repeat("x", 256) + ",b=" + strings.Repeat("y", 256)}, validTP, ""},
		{"one 60 KB member dropped", []string{validTP}, []string{"a=" + strings.Repeat("x", 60<<10)}, validTP, ""},
		{"value over 256 dropped", []string{validTP}, []string{"a=" + strings.Repeat("x", 257)}, validTP, ""},
		{"duplicate key dropped", []string{validTP}, []string{"a=1,a=2"}, validTP, ""},
		{"uppercase key dropped", []string{validTP}, []string{"A=1"}, validTP, ""},
		{"value with = dropped", []string{validTP}, []string{"a=1=2"}, validTP, ""},
		{"DEL in a value dropped", []string{validTP}, []string{"a=1 x \x7f"}, validTP, ""},
		{"control character dropped", []string{validTP}, []string{"a=1\x01"}, validTP, ""},
		{"no traceparent: tracestate dropped", nil, []string{"a=1"}, "", ""},
		{"two traceparents", []string{validTP, validTP}, nil, "", ""},
		{"uppercase hex", []string{strings.ToUpper(validTP)}, []string{"a=1"}, "", ""},
		{"zero trace-id", []string{"00-00000000000000000000000000000000-00f067aa0ba902b7-01"}, nil, "", ""},
		{"zero parent-id", []string{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"}, nil, "", ""},
		{"version ff", []string{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, nil, "", ""},
		{"version 00 too long", []string{validTP + "-x"}, nil, "", ""},
		{"short", []string{validTP[:54]}, nil, "", ""},
		{"bad separator", []string{strings.Replace(validTP, "-", "_", 1)}, nil, "", ""},
		{"60 KB traceparent", []string{validTP + strings.Repeat("x", 60<<10)}, nil, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			if c.tp != nil {
				h["Traceparent"] = c.tp
			}
			if c.ts != nil {
				h["Tracestate"] = c.ts
			}
			tp, ts := TraceContext(h)
			if tp != c.wantTP || ts != c.wantTS {
				t.Errorf("TraceContext = %.80q, %.80q; want %.80q, %.80q", tp, ts, c.wantTP, c.wantTS)
			}
		})
	}
}

func shortMembers(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = string(rune('a'+i%26)) + string(rune('a'+i/26)) + "=1"
	}
	return out
}

// TestForwardedTraceContext: an attempt carries the client's trace context
// only when it is valid.
func TestForwardedTraceContext(t *testing.T) {
	route := &Route{Prefix: "/", Hosts: testutil.Hosts(t, "b")}
	for _, c := range []struct {
		name           string
		tp, ts         string
		wantTP, wantTS string
	}{
		{"valid", validTP, "a=1", validTP, "a=1"},
		{"60 KB tracestate", validTP, "a=" + strings.Repeat("x", 60<<10), validTP, ""},
		{"malformed traceparent", "00-xyz", "a=1", "", ""},
	} {
		req := &Request{Method: "GET", Path: "/", Header: http.Header{"Traceparent": {c.tp}, "Tracestate": {c.ts}}, Route: route}
		out := buildOutgoing(t.Context(), req, "/", route.Hosts[0], 0)
		if got, got2 := out.Header.Get("Traceparent"), out.Header.Get("Tracestate"); got != c.wantTP || got2 != c.wantTS {
			t.Errorf("%s: forwarded traceparent %.80q tracestate %.80q; want %q, %q", c.name, got, got2, c.wantTP, c.wantTS)
		}
	}
}

// FuzzTraceContext: what TraceContext keeps is within the limits, and
// keeping it again changes nothing.
func FuzzTraceContext(f *testing.F) {
	f.Add(validTP, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
	f.Add(validTP, "t1@sys=v, ,b=2")
	f.Add("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", "a=1,a=2")
	f.Fuzz(func(t *testing.T, tp, ts string) {
		gotTP, gotTS := TraceContext(http.Header{"Traceparent": {tp}, "Tracestate": {ts}})
		if gotTP == "" && gotTS != "" {
			t.Fatalf("tracestate %q kept without a traceparent", gotTS)
		}
		if len(gotTS) > maxTraceStateBytes || strings.Count(gotTS, ",")+1 > 4*maxTraceStateBytes {
			t.Fatalf("tracestate of %d bytes kept", len(gotTS))
		}
		if gotTP != "" && gotTP != tp || gotTS != "" && gotTS != ts {
			t.Fatalf("TraceContext rewrote %q %q into %q %q", tp, ts, gotTP, gotTS)
		}
		members := 0
		for m := range strings.SplitSeq(gotTS, ",") {
			if strings.Trim(m, " \t") != "" {
				members++
			}
		}
		if members > maxTraceStateMembers {
			t.Fatalf("tracestate of %d members kept", members)
		}
		if gotTP == "" {
			return
		}
		againTP, againTS := TraceContext(http.Header{"Traceparent": {gotTP}, "Tracestate": {gotTS}})
		if againTP != gotTP || gotTS != "" && againTS != gotTS {
			t.Fatalf("not stable: %q %q then %q %q", gotTP, gotTS, againTP, againTS)
		}
	})
}

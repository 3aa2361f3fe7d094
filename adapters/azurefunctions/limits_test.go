package azurefunctions

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fngateway/core"
)

func TestParseTimeSpan(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"00:00:03", 3 * time.Second},
		{"00:05:00", 5 * time.Minute},
		{" 00:10:00 ", 10 * time.Minute},
		{"01:30", 90 * time.Minute},
		{"23:59:59", 24*time.Hour - time.Second},
		{"1.00:00:00", 24 * time.Hour},
		{"2.03:04:05", 51*time.Hour + 4*time.Minute + 5*time.Second},
		{"00:00:01.5", 1500 * time.Millisecond},
		{"00:00:00.0000001", 100 * time.Nanosecond},
		{"3", 72 * time.Hour},
		{"-1", Unbounded},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseTimeSpan(tt.in)
			if err != nil || got != tt.want {
				t.Errorf("ParseTimeSpan(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
	for _, bad := range []string{"", "abc", "-00:00:01", "-2", "+00:00:01", "24:00:00", "00:60:00", "00:00:60",
		"00:00:00.12345678", "1:2:3:4", "00::01", "00:00:", ".00:00:01", "1.", "00:00:1e1", "1 00:00:00", "99999999"} {
		if d, err := ParseTimeSpan(bad); err == nil {
			t.Errorf("ParseTimeSpan(%q) = %v; want an error", bad, d)
		}
	}
}

// FuzzParseTimeSpan: whatever parses is in range and survives a round trip
// through FormatTimeSpan unchanged.
func FuzzParseTimeSpan(f *testing.F) {
	for _, s := range []string{"00:00:03", "1.02:03:04.5", "-1", "7", "00:10", "23:59:59.9999999", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseTimeSpan(s)
		if err != nil {
			return
		}
		if d != Unbounded && (d < 0 || d > maxTimeSpan) {
			t.Fatalf("ParseTimeSpan(%q) = %v: out of range", s, d)
		}
		if d%100 != 0 {
			t.Fatalf("ParseTimeSpan(%q) = %v: not whole 100 ns ticks", s, d)
		}
		out := FormatTimeSpan(d)
		back, err := ParseTimeSpan(out)
		if err != nil || back != d {
			t.Fatalf("round trip %q → %v → %q → %v, %v", s, d, out, back, err)
		}
	})
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestLoadLimits(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "host.json"), []byte(`{"version":"2.0","functionTimeout":"00:00:45"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	noTimeout := t.TempDir()
	if err := os.WriteFile(filepath.Join(noTimeout, "host.json"), []byte(`{"version":"2.0"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	broken := t.TempDir()
	if err := os.WriteFile(filepath.Join(broken, "host.json"), []byte(`{"functionTimeout":`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name                       string
		env                        map[string]string
		function, invocation, http time.Duration
		warn                       bool
	}{
		{"app setting overrides host.json", map[string]string{envFunctionTimeout: "00:00:03", envAppRoot: root}, 3 * time.Second, 3 * time.Second, 3 * time.Second, false},
		{"host.json", map[string]string{envAppRoot: root}, 45 * time.Second, 45 * time.Second, 45 * time.Second, false},
		{"HTTP capped by the load balancer", map[string]string{envFunctionTimeout: "00:10:00"}, 10 * time.Minute, 10 * time.Minute, HTTPLimit, false},
		{"unbounded on Flex", map[string]string{envFunctionTimeout: "-1", envSKU: "FlexConsumption"}, 0, 0, HTTPLimit, false},
		{"Consumption default", map[string]string{envSKU: "Dynamic", envAppRoot: noTimeout}, ConsumptionDefault, ConsumptionDefault, HTTPLimit, true},
		{"Flex default", map[string]string{envSKU: "FlexConsumption"}, PlanDefault, PlanDefault, HTTPLimit, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := LoadLimits(env(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			if l.Function != tt.function || l.Invocation != tt.invocation || l.HTTP != tt.http {
				t.Errorf("limits = %+v; want function %v, invocation %v, http %v", l, tt.function, tt.invocation, tt.http)
			}
			if (l.Warning != "") != tt.warn {
				t.Errorf("warning = %q; want one: %v", l.Warning, tt.warn)
			}
		})
	}
	bad := []struct {
		name    string
		env     map[string]string
		setting string
	}{
		{"not a timespan", map[string]string{envFunctionTimeout: "10m"}, envFunctionTimeout},
		{"zero", map[string]string{envFunctionTimeout: "00:00:00"}, envFunctionTimeout},
		{"over Consumption's maximum", map[string]string{envFunctionTimeout: "00:20:00", envSKU: "Dynamic"}, envFunctionTimeout},
		{"unbounded on Consumption", map[string]string{envFunctionTimeout: "-1", envSKU: "Dynamic"}, envFunctionTimeout},
		{"host.json not JSON", map[string]string{envAppRoot: broken}, "functionTimeout"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadLimits(env(tt.env))
			var se *core.SettingError
			if !errors.As(err, &se) || se.Name != tt.setting || strings.Contains(err.Error(), "\n") {
				t.Errorf("err = %v; want one line naming %s", err, tt.setting)
			}
		})
	}
}

func TestLookupEnv(t *testing.T) {
	t.Setenv("AZUREFUNCTIONSJOBHOST__FUNCTIONTIMEOUT", "00:00:07")
	v, ok := LookupEnv(envFunctionTimeout)
	if !ok || v != "00:00:07" {
		t.Errorf("LookupEnv = %q, %v; want the upper-case setting", v, ok)
	}
	l, err := LoadLimits(LookupEnv)
	if err != nil || l.Function != 7*time.Second {
		t.Errorf("LoadLimits = %+v, %v; want 7 s", l, err)
	}
	if _, ok := LookupEnv("FNGATEWAY_SURELY_UNSET"); ok {
		t.Error("LookupEnv found an unset name")
	}
}

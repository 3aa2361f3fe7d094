package otel

import (
	"strings"
	"testing"
)

// TestReadLimits: the standard OTEL_* limit variables are honoured, the
// span-specific one first; unset, the gateway's small defaults hold; a bad
// value is an error naming it.
func TestReadLimits(t *testing.T) {
	for _, c := range []struct {
		name    string
		env     map[string]string
		want    limits
		wantErr string
	}{
		{"defaults", nil, limits{256, 32, 512, 128}, ""},
		{"general length", map[string]string{"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "100"}, limits{100, 32, 512, 128}, ""},
		{"span length wins", map[string]string{"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "100", "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT": "50"}, limits{50, 32, 512, 128}, ""},
		{"queue and batch", map[string]string{"OTEL_BSP_MAX_QUEUE_SIZE": "64", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "512"}, limits{256, 32, 64, 64}, ""},
		{"bad", map[string]string{"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "lots"}, limits{}, `OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT="lots"`},
		{"zero", map[string]string{"OTEL_BSP_MAX_QUEUE_SIZE": "0"}, limits{}, `OTEL_BSP_MAX_QUEUE_SIZE="0"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := readLimits(lookupMap(c.env))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Errorf("readLimits error = %v; want one naming %s", err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Errorf("readLimits = %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

func TestCapValue(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"longer one", 6, "longer"},
		{"héllo", 2, "h"}, // never half a rune
		{strings.Repeat("x", 400<<10), 256, strings.Repeat("x", 256)},
	} {
		if got := capValue(c.in, c.n); got != c.want {
			t.Errorf("capValue(%.20q, %d) = %.20q; want %.20q", c.in, c.n, got, c.want)
		}
	}
	if got := capValues([]string{"a", "b", "c"}, 1); len(got) != maxHeaderValues {
		t.Errorf("capValues kept %d values; want %d", len(got), maxHeaderValues)
	}
	if spanMethod("GET") != "GET" || spanMethod(strings.Repeat("X", 1000)) != "_OTHER" {
		t.Error("spanMethod: want GET kept and a made-up method _OTHER")
	}
}

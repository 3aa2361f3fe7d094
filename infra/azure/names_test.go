package azure

import (
	"strings"
	"testing"
	"time"
)

func TestCheckName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"abc", true},
		{"gateway-continuations", true},
		{"a1-b2-c3", true},
		{strings.Repeat("a", 63), true},
		{"ab", false},
		{strings.Repeat("a", 64), false},
		{"Abc", false},
		{"a_c", false},
		{"-abc", false},
		{"abc-", false},
		{"a--c", false},
		{"a.c", false},
	}
	for _, tt := range tests {
		err := checkName("queue", tt.name)
		if (err == nil) != tt.ok {
			t.Errorf("checkName(%q) = %v, want ok %v", tt.name, err, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), `queue name "`+tt.name+`"`) {
			t.Errorf("checkName(%q) error %q does not name it", tt.name, err)
		}
	}
}

func TestSplitKey(t *testing.T) {
	tests := []struct {
		key, container, blob string
		ok                   bool
	}{
		{"results/abc", "results", "abc", true},
		{"results/req/1/data", "results", "req/1/data", true},
		{"results", "", "", false},
		{"results/", "", "", false},
		{"/blob", "", "", false},
		{"Results/blob", "", "", false},
		{"results/" + strings.Repeat("x", 1025), "", "", false},
	}
	for _, tt := range tests {
		c, b, err := splitKey(tt.key)
		if (err == nil) != tt.ok || c != tt.container || b != tt.blob {
			t.Errorf("splitKey(%q) = %q, %q, %v; want %q, %q, ok %v", tt.key, c, b, err, tt.container, tt.blob, tt.ok)
		}
	}
}

func TestSeconds(t *testing.T) {
	tests := []struct {
		d     time.Duration
		least int32
		want  int32
	}{
		{0, 0, 0},
		{0, 1, 1},
		{time.Millisecond, 0, 1},
		{1500 * time.Millisecond, 0, 2},
		{2 * time.Second, 1, 2},
		{-time.Second, 0, 0},
		{7 * 24 * time.Hour, 1, 604800},
		{30 * 24 * time.Hour, 1, 604800},
	}
	for _, tt := range tests {
		if got := seconds(tt.d, tt.least); got != tt.want {
			t.Errorf("seconds(%v, %d) = %d, want %d", tt.d, tt.least, got, tt.want)
		}
	}
}

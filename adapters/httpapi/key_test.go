package httpapi

import (
	"encoding/hex"
	"testing"
)

// TestNewKeyUnique draws keys across several refills of the read-ahead
// buffer: each is 32 hex digits and none repeats.
func TestNewKeyUnique(t *testing.T) {
	seen := make(map[string]bool)
	for range 3 * 4096 / 16 {
		k := newKey()
		if b, err := hex.DecodeString(k); err != nil || len(b) != 16 {
			t.Fatalf("newKey() = %q: want 32 hex digits", k)
		}
		if seen[k] {
			t.Fatalf("newKey() repeated %q after %d keys", k, len(seen))
		}
		seen[k] = true
	}
}

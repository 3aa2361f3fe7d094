package core

import (
	"strings"
	"testing"
)

func TestEmfNamespaceDecode(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{{"Gateway", true}, {"", true}, {"My/App-1 x", true}, {"AWS/Lambda", false}, {strings.Repeat("a", 256), false}, {"a\nb", false}} {
		var n EmfNamespace
		if err := n.Decode(tc.in); (err == nil) != tc.ok {
			t.Errorf("Decode(%q) = %v; want ok %v", tc.in, err, tc.ok)
		}
	}
}

package settings

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

// FuzzEmfNamespace: whatever Decode accepts is a namespace CloudWatch takes
// and decodes to itself again.
func FuzzEmfNamespace(f *testing.F) {
	for _, s := range []string{"Gateway", "", "AWS/x", "a\x00b", strings.Repeat("n", 255)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var n EmfNamespace
		if err := n.Decode(s); err != nil {
			return
		}
		if len(n) > 255 || strings.HasPrefix(string(n), "AWS/") {
			t.Fatalf("accepted %q", s)
		}
		for i := 0; i < len(n); i++ {
			if n[i] < 0x20 || n[i] > 0x7e {
				t.Fatalf("accepted byte 0x%02x in %q", n[i], s)
			}
		}
		var again EmfNamespace
		if err := again.Decode(string(n)); err != nil || again != n {
			t.Fatalf("round trip of %q: %q, %v", n, again, err)
		}
	})
}

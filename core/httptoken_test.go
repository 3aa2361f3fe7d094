package core

import (
	"net/http"
	"strings"
	"testing"
)

// TestIsToken: what passes as an HTTP token and why.
func TestIsToken(t *testing.T) {
	tests := []struct {
		s    string
		want bool
		why  string
	}{
		{"GET", true, "a method"},
		{"M-SEARCH", true, "a registered method with a hyphen"},
		{"post", true, "methods are case-sensitive tokens; the check does not judge case"},
		{"X-Client-Authorization", true, "a header name"},
		{"!#$%&'*+-.^_`|~09azAZ", true, "every tchar punctuation"},
		{strings.Repeat("a", MaxTokenLen), true, "exactly the cap"},
		{strings.Repeat("a", MaxTokenLen+1), false, "one past the cap"},
		{"", false, "empty"},
		{"GE T", false, "space"},
		{"a\tb", false, "tab"},
		{"X-A:", false, "colon, the header separator"},
		{"a\r\nb", false, "CR LF: header injection"},
		{"a\x00", false, "NUL"},
		{"a\x7f", false, "DEL"},
		{`a"b`, false, "DQUOTE"},
		{"(),/;<=>?@[\\]{}", false, "delimiters"},
		{"naïve", false, "non-ASCII"},
	}
	for _, tt := range tests {
		if got := IsToken(tt.s); got != tt.want {
			t.Errorf("IsToken(%.40q) = %v; want %v (%s)", tt.s, got, tt.want, tt.why)
		}
	}
}

// FuzzIsToken checks IsToken against RFC 9110's other wording of a token:
// visible ASCII (VCHAR) but for DQUOTE and the delimiters
// "(),/:;<=>?@[\]{}". A token stays one when net/http canonicalises it as
// a header name.
func FuzzIsToken(f *testing.F) {
	for _, s := range []string{"GET", "X-Forwarded-For", "", "a b", "a:b", "\x80", strings.Repeat("x", MaxTokenLen+1)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := s != "" && len(s) <= MaxTokenLen
		for i := 0; i < len(s) && want; i++ {
			c := s[i]
			want = c > 0x20 && c < 0x7f && !strings.ContainsRune(`"(),/:;<=>?@[\]{}`, rune(c))
		}
		got := IsToken(s)
		if got != want {
			t.Fatalf("IsToken(%q) = %v; want %v", s, got, want)
		}
		if got && !IsToken(http.CanonicalHeaderKey(s)) {
			t.Fatalf("IsToken(%q) but not of its canonical form %q", s, http.CanonicalHeaderKey(s))
		}
	})
}

func BenchmarkIsToken(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		IsToken("X-Forwarded-For")
	}
}

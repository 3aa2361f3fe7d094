package core

// MaxTokenLen is the longest HTTP token the gateway accepts, in bytes: a
// method, a header field name (from a client, a platform event, a setting
// or a stored record). RFC 9110 §5.6.2 sets no limit; the longest names in
// IANA's HTTP Method and Field Name registries are a few dozen bytes, so
// 256 refuses nothing in use while keeping what a client can put in a log
// line, an error message or an async record small.
const MaxTokenLen = 256

// tchars is the set of tchar bytes of RFC 9110 §5.6.2 — ALPHA, DIGIT and
// "!#$%&'*+-.^_`|~" — as a bitmap of the 128 ASCII bytes.
var tchars = func() (m [2]uint64) {
	const set = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~"
	for i := 0; i < len(set); i++ {
		m[set[i]>>6] |= 1 << (set[i] & 63)
	}
	return m
}()

// IsToken reports whether s is an HTTP token (RFC 9110 §5.6.2: one or more
// tchar, which is what a method and a header field name must be) of at most
// MaxTokenLen bytes. It is the gateway's one token check: settings,
// platform events, stored records and the command-line tools all call it.
func IsToken(s string) bool {
	if s == "" || len(s) > MaxTokenLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x80 || tchars[c>>6]&(1<<(c&63)) == 0 {
			return false
		}
	}
	return true
}

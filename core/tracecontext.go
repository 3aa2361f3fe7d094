package core

import (
	"net/http"
	"strings"
)

// The W3C Trace Context limits the gateway keeps (docs/security.md#bounded-telemetry-and-logs): a tracestate
// of more list-members or more bytes is dropped whole, never forwarded.
// W3C Trace Context, §3.3.1.1 "tracestate Limits": "There can be a maximum of
// 32 list-members in a list" and vendors "SHOULD propagate at least 512
// characters of a combined header"; https://www.w3.org/TR/trace-context/.
const (
	maxTraceStateMembers = 32
	maxTraceStateBytes   = 512
)

// TraceContext returns the W3C trace context headers of h that may be
// honoured and forwarded: traceparent as W3C Trace Context §3.2 defines it
// (version, 32-hex trace-id and 16-hex parent-id not all zeros, flags;
// exactly one header), and tracestate (§3.3) only beside a valid
// traceparent, well formed, its keys unique, with at most
// maxTraceStateMembers list-members and maxTraceStateBytes bytes once its
// headers are combined. What fails is "" (dropped), never forwarded as is.
func TraceContext(h http.Header) (traceparent, tracestate string) {
	tp := h["Traceparent"]
	if len(tp) != 1 || !validTraceparent(tp[0]) {
		return "", "" // §3.3: without a traceparent, tracestate is not parsed
	}
	traceparent = tp[0]
	ts := h["Tracestate"]
	if len(ts) == 0 {
		return traceparent, ""
	}
	combined := strings.Join(ts, ",")
	if len(combined) > maxTraceStateBytes || !validTracestate(combined) {
		return traceparent, ""
	}
	return traceparent, combined
}

// validTraceparent reports whether v is a traceparent value (§3.2.2):
// version "-" trace-id "-" parent-id "-" trace-flags, lowercase hex. A
// version above 00 may carry more fields after a "-" (§3.2.4); version ff
// is invalid.
func validTraceparent(v string) bool {
	if len(v) < 55 || !lowerHex(v[0:2]) || v[0:2] == "ff" || v[2] != '-' ||
		!lowerHex(v[3:35]) || v[35] != '-' || !lowerHex(v[36:52]) || v[52] != '-' || !lowerHex(v[53:55]) {
		return false
	}
	if v[3:35] == "00000000000000000000000000000000" || v[36:52] == "0000000000000000" {
		return false
	}
	if v[0:2] == "00" {
		return len(v) == 55
	}
	return len(v) == 55 || v[55] == '-'
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// validTracestate reports whether v is a tracestate list (§3.3.1): at most
// maxTraceStateMembers list-members key=value separated by commas with
// optional blanks around them, empty members allowed, no key twice.
func validTracestate(v string) bool {
	var keys []string
	for m := range strings.SplitSeq(v, ",") {
		m = strings.Trim(m, " \t")
		if m == "" {
			continue
		}
		k, val, ok := strings.Cut(m, "=")
		if !ok || !validTraceKey(k) || !validTraceValue(val) {
			return false
		}
		for _, seen := range keys {
			if seen == k {
				return false
			}
		}
		if keys = append(keys, k); len(keys) > maxTraceStateMembers {
			return false
		}
	}
	return true
}

// validTraceKey: simple-key = lcalpha 0*255(lcalpha / DIGIT / "_" / "-" /
// "*" / "/"); multi-tenant-key = tenant-id "@" system-id, tenant-id =
// (lcalpha / DIGIT) 0*240(…), system-id = lcalpha 0*13(…).
func validTraceKey(k string) bool {
	keyChar := func(c byte) bool {
		return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '*' || c == '/'
	}
	chars := func(s string, first func(byte) bool, max int) bool {
		if s == "" || len(s) > max || !first(s[0]) {
			return false
		}
		for i := 1; i < len(s); i++ {
			if !keyChar(s[i]) {
				return false
			}
		}
		return true
	}
	lcalpha := func(c byte) bool { return c >= 'a' && c <= 'z' }
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
	if tenant, system, ok := strings.Cut(k, "@"); ok {
		return chars(tenant, alnum, 241) && chars(system, lcalpha, 14)
	}
	return chars(k, lcalpha, 256)
}

// validTraceValue: value = 0*255(chr) nblk-chr; chr = %x20 / nblk-chr;
// nblk-chr = %x21-2B / %x2D-3C / %x3E-7E.
func validTraceValue(v string) bool {
	if v == "" || len(v) > 256 || v[len(v)-1] == ' ' {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e || c == ',' || c == '=' {
			return false
		}
	}
	return true
}

package core

import (
	"iter"
	"net/http"
	"strings"
)

// hopHeaders are the hop-by-hop headers, canonical, dropped in both
// directions (RFC 9110 §7.6.1): the one list of them (isHopHeader, and the
// trailer fields that never pass).
var hopHeaders = [...]string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// isHopHeader reports whether the canonical key k is a hop-by-hop header
// (hopHeaders).
func isHopHeader(k string) bool {
	for _, h := range hopHeaders {
		if k == h {
			return true
		}
	}
	return false
}

// ConnectionNames yields the names a Connection header's values list
// (RFC 9110 §7.6.1: comma-separated connection options), trimmed and
// canonicalised, empty elements skipped: the one reading of them (the
// headers RemoveHopHeaders drops with it, the trailer fields that never
// pass, whether a request asks for an upgrade).
func ConnectionNames(values []string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, v := range values {
			for n := range strings.SplitSeq(v, ",") {
				if n = http.CanonicalHeaderKey(strings.TrimSpace(n)); n != "" && !yield(n) {
					return
				}
			}
		}
	}
}

// HeaderKey is a header name as every deny-list of the gateway compares it:
// lower case, with '_' read as '-'. Servers disagree on what one name is:
// net/http keeps X_Ms_Client_Principal_Id apart from
// X-Ms-Client-Principal-Id, while CGI and WSGI backends (RFC 3875 §4.1.18:
// HTTP_ and the name with '-' replaced by '_') and servers such as
// Apache's and nginx's with underscores allowed read both as one. So a
// name the gateway removes or refuses — a credential, a principal, a
// forwarding header, a signed route's control namespace — is removed or
// refused in every spelling (docs/security.md, "One spelling of a header
// name").
// Only ASCII letters are folded, byte by byte, as header names are ASCII
// tokens (RFC 9110 §5.1).
func HeaderKey(k string) string {
	i := 0
	for i < len(k) && headerByte(k[i]) == k[i] {
		i++
	}
	if i == len(k) {
		return k
	}
	b := []byte(k)
	for i, c := range b {
		b[i] = headerByte(c)
	}
	return string(b)
}

// headerIs reports whether the header names k and name are one name as
// HeaderKey reads them, without allocating.
func headerIs(k, name string) bool {
	return len(k) == len(name) && headerHasPrefix(k, name)
}

// headerHasPrefix reports whether the header name k starts with prefix as
// HeaderKey reads them, without allocating.
func headerHasPrefix(k, prefix string) bool {
	if len(k) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		if headerByte(k[i]) != headerByte(prefix[i]) {
			return false
		}
	}
	return true
}

// headerByte is c as HeaderKey reads it.
func headerByte(c byte) byte {
	switch {
	case c == '_':
		return '-'
	case 'A' <= c && c <= 'Z':
		return c + 'a' - 'A'
	}
	return c
}

// headerIn reports whether k is one of names or starts with one of
// prefixes, in any spelling.
func headerIn(k string, names, prefixes []string) bool {
	for _, n := range names {
		if headerIs(k, n) {
			return true
		}
	}
	for _, p := range prefixes {
		if headerHasPrefix(k, p) {
			return true
		}
	}
	return false
}

package core

import (
	"errors"
	"net/url"
	"strings"
)

// errInvalidPath is returned by ConfinePath for a path that could leave a
// host's base path, or that is not a path at all.
var errInvalidPath = errors.New("want a path starting with / and without a .. segment (also when percent-encoded)")

// ConfinePath checks a request path as the client wrote it (its escaped
// form, as url.URL.EscapedPath gives it) and returns it decoded. It refuses
// with errInvalidPath a path that does not start with /, that has a bad
// escape, or that has a .. segment once percent-decoded (%2e, %2f and %5c
// included), where both / and \ separate segments and a segment's path
// parameters (;…) are ignored, as some servers resolve /..;x/ as /../.
// Any other path is forwarded with its escaping kept, so it can never climb
// above the base path of the host it is joined to.
func ConfinePath(escaped string) (string, error) {
	if escaped == "" {
		return "", nil
	}
	if escaped[0] != '/' {
		return "", errInvalidPath
	}
	decoded := escaped
	if strings.IndexByte(escaped, '%') >= 0 {
		d, err := url.PathUnescape(escaped)
		if err != nil {
			return "", errInvalidPath
		}
		decoded = d
	}
	if !strings.Contains(decoded, "..") {
		return decoded, nil // the common case: nothing to split
	}
	rest := decoded
	for rest != "" {
		i := strings.IndexAny(rest, `/\`)
		seg := rest
		if i >= 0 {
			seg, rest = rest[:i], rest[i+1:]
		} else {
			rest = ""
		}
		if j := strings.IndexByte(seg, ';'); j >= 0 {
			seg = seg[:j]
		}
		if seg == ".." {
			return "", errInvalidPath
		}
	}
	return decoded, nil
}

// joinURL returns the URL of path (escaped, checked by ConfinePath, and
// decoded) under the base URL host, with the client's escaping kept, as
// httputil.ReverseProxy's joinURLPath does.
func joinURL(host *url.URL, escaped, decoded, rawQuery string) url.URL {
	// RawPath is used as written whenever it is a valid encoding of Path;
	// without it, url.URL would re-escape characters such as ! and *.
	return url.URL{Scheme: host.Scheme, Host: host.Host, Path: host.Path + decoded,
		RawPath: host.EscapedPath() + escaped, RawQuery: rawQuery}
}

// target is the path of an attempt: escaped, as it is joined to the
// host's base path, and decoded (ConfinePath's result).
type target struct{ escaped, decoded string }

// TargetPath returns the path the route's hosts receive for escaped, the
// request's path as the client wrote it: with the route's Prefix removed
// first when StripPrefix is set (whole segments: "/api/x" on prefix "/api"
// becomes "/x", "/api" becomes ""), then checked by ConfinePath, so that
// no stripped path can climb above a host's base path. A path whose
// escaped segments do not spell the prefix ("/a%2Fb" on prefix "/a/b") is
// refused with errInvalidPath rather than cut at the wrong place.
func (r *Route) TargetPath(escaped string) (target, error) {
	if r != nil && r.StripPrefix && r.Prefix != "/" && r.Prefix != "" {
		rest, ok := stripSegments(escaped, r.Prefix)
		if !ok {
			return target{}, errInvalidPath
		}
		escaped = rest
	}
	decoded, err := ConfinePath(escaped)
	return target{escaped, decoded}, err
}

// stripSegments removes prefix (decoded, starting with /) from escaped,
// segment by segment, each escaped segment compared once unescaped. It
// reports false when escaped does not start with the prefix's segments.
func stripSegments(escaped, prefix string) (string, bool) {
	prefix = strings.TrimSuffix(prefix, "/")
	rest := escaped
	for want := range strings.SplitSeq(strings.TrimPrefix(prefix, "/"), "/") {
		if !strings.HasPrefix(rest, "/") {
			return "", false
		}
		seg := rest[1:]
		next := ""
		if i := strings.IndexByte(seg, '/'); i >= 0 {
			seg, next = seg[:i], seg[i:]
		}
		got, err := url.PathUnescape(seg)
		if err != nil || got != want {
			return "", false
		}
		rest = next
	}
	return rest, true
}

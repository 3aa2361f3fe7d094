package httpapi

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"fngateway/core"
)

// acceptedAt returns when the request was accepted before it reached the
// gateway, where that is said by someone the gateway believes: the
// platform (core.PlatformArrival, Lambda's requestContext.timeEpoch), or
// a trusted proxy's X-Request-Start. It returns the zero time otherwise,
// and for a header that does not parse.
func acceptedAt(r *http.Request, trusted bool) time.Time {
	if t, ok := core.PlatformArrival(r.Context()); ok {
		return t
	}
	if trusted {
		if v := r.Header["X-Request-Start"]; len(v) == 1 {
			if t, err := core.ParseRequestStart(v[0]); err == nil {
				return t
			}
		}
	}
	return time.Time{}
}

// rewriteLocations rewrites a backend's Location and Content-Location that
// point at the route's backend base URL to the gateway's public address
// (PublicBaseURL, else the request's own), as nginx's default
// proxy_redirect does; any other value is left alone.
func (h *Handler) rewriteLocations(hdr http.Header, r *http.Request, route *core.Route) {
	for _, k := range [...]string{"Location", "Content-Location"} {
		v := hdr[k]
		if len(v) != 1 {
			continue
		}
		if nv, ok := h.publicLocation(v[0], r, route); ok {
			hdr[k] = []string{nv}
		}
	}
}

// publicLocation maps loc to the public address when it is an absolute URL
// under one of route's backend base URLs.
func (h *Handler) publicLocation(loc string, r *http.Request, route *core.Route) (string, bool) {
	if len(loc) < len("http://") || !strings.EqualFold(loc[:4], "http") {
		return "", false
	}
	u, err := url.Parse(loc)
	if err != nil || u.Host == "" || u.User != nil || u.Opaque != "" {
		return "", false
	}
	for _, b := range route.Hosts {
		if !strings.EqualFold(u.Scheme, b.Scheme) || !sameHostPort(u, b) {
			continue
		}
		p := u.EscapedPath()
		base := b.EscapedPath()
		if base != "" && p != base && !strings.HasPrefix(p, base+"/") {
			continue
		}
		rest := p[len(base):]
		if rest == "" {
			rest = "/"
		}
		if u.RawQuery != "" || u.ForceQuery {
			rest += "?" + u.RawQuery
		}
		if u.Fragment != "" {
			rest += "#" + u.EscapedFragment()
		}
		return h.absolute(r, rest), true
	}
	return "", false
}

// sameHostPort compares the hosts of two http(s) URLs of the same scheme,
// a missing port counting as the scheme's default.
func sameHostPort(a, b *url.URL) bool {
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		if strings.EqualFold(u.Scheme, "https") {
			return "443"
		}
		return "80"
	}
	return strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

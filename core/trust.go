package core

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// TrustedProxies is the TrustedProxies setting: the networks whose
// X-Forwarded-*, Forwarded and X-Request-Start headers the gateway
// believes (docs/deadlines.md#whom-the-gateway-trusts). The zero value trusts no peer. A value is
// read-only once decoded and may be shared by goroutines.
//
// The peer a request is judged by is the address the host hands the
// gateway: the TCP peer locally, the platform's own word on Lambda
// (requestContext.http.sourceIp) and on Azure (the front end's entry of
// X-Forwarded-For, which the Functions host passes on); the adapters
// state it as the request's RemoteAddr.
type TrustedProxies []netip.Prefix

// Decode parses a comma-separated list of CIDRs (a bare address is one
// address), for envconfig. An empty text trusts no peer.
func (t *TrustedProxies) Decode(s string) error {
	var out TrustedProxies
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			if strings.TrimSpace(s) == "" {
				break
			}
			return errors.New("want comma-separated CIDRs without empty elements, such as 10.0.0.0/8,2001:db8::/32")
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			a, aerr := netip.ParseAddr(part)
			if aerr != nil || a.Zone() != "" {
				return errors.New("want comma-separated CIDRs, such as 10.0.0.0/8,2001:db8::/32; " + strconv.Quote(trimText(part)) + " is not one")
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	*t = out
	return nil
}

// String lists the networks as the setting writes them.
func (t TrustedProxies) String() string {
	s := make([]string, len(t))
	for i, p := range t {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// Trusts reports whether a is in one of the networks. An IPv4-mapped IPv6
// address counts as its IPv4 address.
func (t TrustedProxies) Trusts(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	a = a.Unmap()
	for _, p := range t {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ParseHop reads one address as forwarding headers and RemoteAddr write
// it: "192.0.2.1", "192.0.2.1:443", "[2001:db8::1]:443", "2001:db8::1".
// It returns the zero Addr for anything else.
func ParseHop(s string) netip.Addr {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil {
		return a.WithZone("").Unmap()
	}
	if h, _, err := net.SplitHostPort(s); err == nil {
		if a, err := netip.ParseAddr(h); err == nil {
			return a.WithZone("").Unmap()
		}
	}
	return netip.Addr{}
}

// isForwardingHeader reports whether the header key k (any case) is one
// only a trusted proxy may send: X-Forwarded-*, Forwarded or
// X-Request-Start.
func isForwardingHeader(k string) bool {
	switch len(k) {
	case len("Forwarded"):
		return strings.EqualFold(k, "Forwarded")
	case len("X-Request-Start"):
		if strings.EqualFold(k, "X-Request-Start") {
			return true
		}
	}
	return len(k) > len("X-Forwarded-") && strings.EqualFold(k[:len("X-Forwarded-")], "X-Forwarded-")
}

// isAddressHeader reports whether the header key k (any case) is one of
// the client-address headers other proxies write (X-Real-IP,
// True-Client-IP, X-Client-IP): only a trusted proxy may send them.
func isAddressHeader(k string) bool {
	return strings.EqualFold(k, "X-Real-Ip") || strings.EqualFold(k, "True-Client-Ip") || strings.EqualFold(k, "X-Client-Ip")
}

// isUnderscoreForm reports whether the header key k spells a forwarding
// or client-address header with '_' for '-' (X_Forwarded_For,
// X_Real_IP). No proxy writes them, but CGI-style backends read them as
// the dashed header (both become HTTP_X_FORWARDED_FOR), so they are never
// passed on, whoever the peer.
func isUnderscoreForm(k string) bool {
	if !strings.Contains(k, "_") {
		return false
	}
	d := HeaderKey(k)
	return isForwardingHeader(d) || isAddressHeader(d)
}

// untrustedOnly reports whether a peer that is not trusted may not send
// the header key k: forwarding headers, client-address headers and their
// underscore forms.
func untrustedOnly(k string) bool {
	return isForwardingHeader(k) || isAddressHeader(k) || isUnderscoreForm(k)
}

// Believe returns the headers of a request from peer (its RemoteAddr) as
// the gateway may pass them on, and whether peer is a trusted proxy.
//
// From a peer that is not trusted every X-Forwarded-*, Forwarded and
// X-Request-Start header is dropped, and so are the client-address
// headers X-Real-IP, True-Client-IP and X-Client-IP. From a trusted one
// they are kept, except that X-Forwarded-For is cut to the hops that can
// be believed: read from the right, every entry that is itself a trusted
// proxy, and the first one that is not (the client); entries before it
// were written by the client and are dropped. Addresses keep no port.
// Any of these headers spelt with '_' for '-' (X_Forwarded_For) is
// dropped from every peer.
//
// h is never modified: when something is dropped the result is a copy
// (the values are shared), otherwise it is h itself.
func (t TrustedProxies) Believe(h http.Header, peer string) (http.Header, bool) {
	trusted := len(t) > 0 && t.Trusts(ParseHop(peer))
	drop := untrustedOnly
	if trusted {
		drop = isUnderscoreForm
	}
	found := false
	for k := range h {
		if drop(k) {
			found = true
			break
		}
	}
	if found {
		out := make(http.Header, len(h))
		for k, v := range h {
			if !drop(k) {
				out[k] = v
			}
		}
		h = out
	}
	if !trusted {
		return h, false
	}
	xff, ok := h["X-Forwarded-For"]
	if !ok {
		return h, true
	}
	chain := t.believedChain(xff)
	out := h
	if !found {
		out = make(http.Header, len(h))
		for k, v := range h {
			out[k] = v
		}
	}
	if chain == "" {
		delete(out, "X-Forwarded-For")
	} else {
		out["X-Forwarded-For"] = []string{chain}
	}
	return out, true
}

// believedChain is the believable part of a trusted peer's X-Forwarded-For
// values, comma-joined.
func (t TrustedProxies) believedChain(values []string) string {
	var hops []string
	for _, v := range values {
		for e := range strings.SplitSeq(v, ",") {
			hops = append(hops, e)
		}
	}
	var keep []string
	for i := len(hops) - 1; i >= 0; i-- {
		a := ParseHop(hops[i])
		if !a.IsValid() {
			break // not an address: nothing left of it can be believed
		}
		keep = append(keep, a.String())
		if !t.Trusts(a) {
			break // the client, as the first trusted proxy saw it
		}
	}
	for i, j := 0, len(keep)-1; i < j; i, j = i+1, j-1 {
		keep[i], keep[j] = keep[j], keep[i]
	}
	return strings.Join(keep, ", ")
}

// PopPlatformHop removes from h's X-Forwarded-For the last entry, the one
// a platform's front end appended for the client it accepted (a Lambda
// Function URL or API Gateway, App Service's front end before the
// Functions host), and returns it as an address: the one function both
// hosts pop that hop with. Only that hop is the platform's: the entries
// before it, which the client wrote, stay (comma-joined) for
// TrustedProxies to judge, and none left removes the header. When the
// last entry is not an address, or differs from want where want is valid,
// nothing is removed and the zero Addr is returned.
func PopPlatformHop(h http.Header, want netip.Addr) netip.Addr {
	v := h["X-Forwarded-For"]
	if len(v) == 0 {
		return netip.Addr{}
	}
	all := strings.Join(v, ",")
	rest, last := "", all
	if i := strings.LastIndexByte(all, ','); i >= 0 {
		rest, last = all[:i], all[i+1:]
	}
	a := ParseHop(last)
	if !a.IsValid() || want.IsValid() && a != want {
		return netip.Addr{}
	}
	if rest = strings.TrimSpace(rest); rest == "" {
		delete(h, "X-Forwarded-For")
	} else {
		h["X-Forwarded-For"] = []string{rest}
	}
	return a
}

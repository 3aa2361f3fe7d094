package azurefunctions

import (
	"crypto/tls"
	"net/http"
	"net/netip"
	"strings"

	"fngateway/core"
)

// platformPeer turns a request the Functions host forwarded into one whose
// RemoteAddr is the client as the platform's front end saw it.
//
// The handler's peer is always the Functions host, on loopback. The host
// passes the request on with the headers it got from App Service's front
// end, which appended the client's address (with its port) to
// X-Forwarded-For and set X-Forwarded-Proto; everything else in those
// headers was written by the client. So exactly that one hop is
// trusted: its last X-Forwarded-For entry becomes RemoteAddr, the entries
// before it stay for TrustedProxies to judge, and an https
// X-Forwarded-Proto marks the request as TLS. A request without
// X-Forwarded-For (the host run locally) keeps the loopback peer.
func platformPeer(r *http.Request) {
	if !core.ParseHop(r.RemoteAddr).IsLoopback() {
		return
	}
	client := core.PopPlatformHop(r.Header, netip.Addr{})
	if !client.IsValid() {
		return
	}
	r.RemoteAddr = client.String()
	if strings.EqualFold(strings.TrimSpace(r.Header.Get("X-Forwarded-Proto")), "https") && r.TLS == nil {
		r.TLS = &tls.ConnectionState{}
	}
}

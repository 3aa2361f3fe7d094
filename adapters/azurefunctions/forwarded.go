package azurefunctions

import (
	"crypto/tls"
	"net/http"
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
	v := r.Header["X-Forwarded-For"]
	if len(v) == 0 {
		return
	}
	all := strings.Join(v, ",")
	rest, last := "", all
	if i := strings.LastIndexByte(all, ','); i >= 0 {
		rest, last = all[:i], all[i+1:]
	}
	client := core.ParseHop(last)
	if !client.IsValid() {
		return
	}
	r.RemoteAddr = client.String()
	if rest = strings.TrimSpace(rest); rest == "" {
		delete(r.Header, "X-Forwarded-For")
	} else {
		r.Header["X-Forwarded-For"] = []string{rest}
	}
	if strings.EqualFold(strings.TrimSpace(r.Header.Get("X-Forwarded-Proto")), "https") && r.TLS == nil {
		r.TLS = &tls.ConnectionState{}
	}
}

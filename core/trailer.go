package core

import (
	"io"
	"net/http"
	"strings"
)

// A message is its head, its body and its trailers: a request's trailer
// fields pass the same boundary as its headers (docs/security.md,
// "Trailers"). passTrailer is the one rule; forwardTrailer applies it to
// an attempt.
//
//   - On a route with auth, no trailer passes. Admit decides what a client
//     may ask of the route's backends before the first byte goes to them,
//     and a streamed body's trailers arrive only after the body has gone:
//     they could not be refused, only dropped. And the gateway's own
//     signature (SigV4, a bearer token) covers the head, not trailers, so
//     a backend would take a trailer field as signed by the gateway.
//   - Elsewhere a trailer field passes unless a header of its name would be
//     removed, refused or set by the gateway or the platform, in any
//     spelling (HeaderKey), or RFC 9110 §6.5.1 says it cannot be processed
//     after the content: see trailerDenied and trailerDeniedPrefixes.

// trailerDenied are the trailer field names (as HeaderKey writes them)
// that never pass:
//
//   - hop-by-hop fields (isHopHeader) and those a request's Connection
//     names (checked apart);
//   - credentials and identities a platform checks or sets, of every host
//     (Credentials: SigV4Headers, the Azure function key) and cookies;
//   - fields the gateway sets on every attempt (Idempotency-Key, Via,
//     X-Envoy-Expected-Rq-Timeout-Ms, Grpc-Timeout, the trace context);
//   - the method-override headers (methodOverrideHeaders);
//   - what RFC 9110 §6.5.1 says must be read before the content: framing
//     (Content-Length, Transfer-Encoding), routing (Host), authentication,
//     request modifiers (Cache-Control, Expect, Max-Forwards, Pragma, Range,
//     TE, the conditionals) and content format (Content-Type,
//     -Encoding, -Range).
var trailerDenied = func() map[string]bool {
	m := map[string]bool{}
	for _, list := range [][]string{
		hopHeaders[:], SigV4Headers, {"x-functions-key", "cookie"},
		{"idempotency-key", "via", "x-envoy-expected-rq-timeout-ms", "grpc-timeout", "traceparent", "tracestate"},
		methodOverrideHeaders,
		{"content-length", "host", "cache-control", "expect", "max-forwards", "pragma", "range", "content-type",
			"content-encoding", "content-range"},
	} {
		for _, n := range list {
			m[HeaderKey(n)] = true
		}
	}
	return m
}()

// trailerDeniedPrefixes are the prefixes of trailer field names that never
// pass: the gateway's own headers (s7p), App Service's principal headers,
// the conditionals (If-Match, If-None-Match, If-Modified-Since, …).
var trailerDeniedPrefixes = []string{"s7p", "x-ms-client-principal", "if-"}

// passTrailer reports whether the client's trailer field k may reach the
// backends of route (nil: a route without auth), given the request's
// Connection header values.
func passTrailer(route *Route, k string, connection []string) bool {
	if route != nil && route.Auth != nil {
		return false
	}
	n := HeaderKey(k)
	if trailerDenied[n] || untrustedOnly(k) {
		return false
	}
	for _, p := range trailerDeniedPrefixes {
		if strings.HasPrefix(n, p) {
			return false
		}
	}
	for n := range ConnectionNames(connection) {
		if headerIs(k, n) {
			return false
		}
	}
	return true
}

// copyTrailer copies into to the fields of from that pass (passTrailer).
func copyTrailer(to, from http.Header, route *Route, connection []string) {
	for k, v := range from {
		if passTrailer(route, k, connection) {
			to[k] = v
		}
	}
}

// forwardTrailer returns the trailer of an attempt of req: the client's
// fields that pass, or nil when none does. For a streamed body, whose
// trailer values net/http fills in only as the body ends, it returns the
// fields declared so far and body wrapped to copy the values that pass
// once it has been read to its end; the transport sends the trailer
// after that.
func forwardTrailer(req *Request, body io.ReadCloser) (http.Header, io.ReadCloser) {
	if len(req.Trailer) == 0 {
		return nil, body
	}
	t := make(http.Header, len(req.Trailer))
	copyTrailer(t, req.Trailer, req.Route, req.Header["Connection"])
	if len(t) == 0 {
		return nil, body
	}
	if req.BodyStream != nil {
		body = &trailerBody{ReadCloser: body, req: req, to: t}
	}
	return t, body
}

// trailerBody is a streamed request body that copies the client's
// trailer values that pass into an attempt's trailer when it ends.
type trailerBody struct {
	io.ReadCloser
	req *Request
	to  http.Header
}

func (b *trailerBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		copyTrailer(b.to, b.req.Trailer, b.req.Route, b.req.Header["Connection"])
	}
	return n, err
}

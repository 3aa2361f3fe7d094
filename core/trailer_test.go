package core

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// TestPassTrailer: on a route with auth no trailer field passes; elsewhere
// every field passes but those a header of the name would not (in any
// spelling), and those RFC 9110 §6.5.1 keeps out of trailers.
func TestPassTrailer(t *testing.T) {
	signed := &Route{Auth: &BackendAuth{Type: AuthSigV4, Service: "s3", Region: "eu-west-1"}}
	open := &Route{}
	denied := []string{
		"Authorization", "X-Amz-Security-Token", "x_amz_security_token", "X-Amz-Date", "X-Amz-Content-Sha256",
		"X-Functions-Key", "X_Functions_Key", "X-Ms-Client-Principal-Id", "X_MS_CLIENT_PRINCIPAL_ID", "Cookie",
		"X-Forwarded-For", "X_Forwarded_For", "Forwarded", "X-Real-Ip", "X-Request-Start",
		"Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Proxy-Authorization",
		"S7PTTL", "S7PAsyncMode", "Traceparent", "Idempotency-Key", "Via", "Grpc-Timeout",
		"X-Http-Method-Override", "X_HTTP_Method", "Content-Length", "Content-Type", "Host", "If-Match", "Range",
		"X-Named-By-Connection",
	}
	passed := []string{"X-Checksum", "Grpc-Status", "X-Amz-Copy-Source", "X-Client-Authorization", "Server-Timing"}
	connection := []string{"close, x_named_by_connection"}
	for _, k := range denied {
		if passTrailer(open, k, connection) {
			t.Errorf("trailer %s passes a route without auth", k)
		}
	}
	for _, k := range passed {
		if !passTrailer(open, k, connection) {
			t.Errorf("trailer %s does not pass a route without auth", k)
		}
		if passTrailer(signed, k, nil) {
			t.Errorf("trailer %s passes a route with auth", k)
		}
	}
}

// FuzzPassTrailer: against an oracle of the names a header section loses
// on its way to a backend: no trailer field passes a route with auth, and
// none that is a credential, a principal, a forwarding or hop-by-hop
// field, the gateway's own, in any spelling.
func FuzzPassTrailer(f *testing.F) {
	for _, s := range []string{"X_MS_CLIENT_PRINCIPAL_ID", "authorization", "X-Checksum", "s7pttl", "x_forwarded_host", "Keep_Alive"} {
		f.Add(s, false)
	}
	oracle := []string{"authorization", "x-amz-date", "x-amz-security-token", "x-amz-content-sha256", "x-functions-key",
		"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-authorization", "forwarded",
		"x-real-ip", "true-client-ip", "x-client-ip", "x-request-start", "traceparent", "tracestate", "idempotency-key",
		"content-length", "host"}
	f.Fuzz(func(t *testing.T, k string, signed bool) {
		route := &Route{}
		if signed {
			route.Auth = &BackendAuth{Type: AuthEntra, Scope: "https://storage.azure.com/.default"}
		}
		got := passTrailer(route, k, nil)
		n := strings.ToLower(strings.ReplaceAll(k, "_", "-"))
		deny := signed || slices.Contains(oracle, n) || strings.HasPrefix(n, "x-ms-client-principal") ||
			strings.HasPrefix(n, "s7p") || strings.HasPrefix(n, "x-forwarded-") && n != "x-forwarded-"
		if got && deny {
			t.Fatalf("trailer %q passes (route with auth: %v)", k, signed)
		}
	})
}

// TestForwardTrailer: an attempt carries only the client's trailer fields
// that pass, for a buffered body at once, for a streamed one once it has
// been read to its end (net/http fills the values in then); a route with
// auth sends none, and a buffered body without trailers left keeps its
// Content-Length.
func TestForwardTrailer(t *testing.T) {
	host := &url.URL{Scheme: "http", Host: "backend"}
	client := func() http.Header {
		return http.Header{"X-Checksum": {"abc"}, "Authorization": {"Bearer forged"}, "X_MS_CLIENT_PRINCIPAL_ID": {"p"}}
	}
	t.Run("buffered", func(t *testing.T) {
		req := &Request{Method: "POST", Path: "/p", Header: http.Header{}, Body: []byte("data"), Trailer: client(), Route: &Route{}}
		out := buildOutgoing(context.Background(), req, "/p", host, 0)
		if want := (http.Header{"X-Checksum": {"abc"}}); !equalHeader(out.Trailer, want) || out.ContentLength != -1 {
			t.Errorf("trailer %v, Content-Length %d; want %v, -1 (chunked)", out.Trailer, out.ContentLength, want)
		}
		req.Route = &Route{Auth: &BackendAuth{Type: AuthSigV4, Service: "s3", Region: "eu-west-1"}}
		out = buildOutgoing(context.Background(), req, "/p", host, 0)
		if out.Trailer != nil || out.ContentLength != 4 {
			t.Errorf("signed route: trailer %v, Content-Length %d; want none, 4", out.Trailer, out.ContentLength)
		}
	})
	t.Run("streamed", func(t *testing.T) {
		declared := http.Header{"X-Checksum": nil, "Authorization": nil}
		req := &Request{Method: "POST", Path: "/p", Header: http.Header{}, BodyStream: strings.NewReader("data"), Trailer: declared, Route: &Route{}}
		out := buildOutgoing(context.Background(), req, "/p", host, 0)
		if _, ok := out.Trailer["X-Checksum"]; !ok || len(out.Trailer) != 1 {
			t.Fatalf("declared trailer %v; want X-Checksum alone", out.Trailer)
		}
		// net/http fills the client's trailer as the body ends.
		body, _ := io.ReadAll(io.TeeReader(out.Body, writerFunc(func(p []byte) {
			if bytes.Contains(p, []byte("data")) {
				for k, v := range client() {
					declared[k] = v
				}
			}
		})))
		if string(body) != "data" {
			t.Fatalf("body %q", body)
		}
		if want := (http.Header{"X-Checksum": {"abc"}}); !equalHeader(out.Trailer, want) {
			t.Errorf("trailer at the body's end %v; want %v", out.Trailer, want)
		}
	})
}

type writerFunc func(p []byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }

func equalHeader(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

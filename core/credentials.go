package core

import (
	"net/http"
	"net/url"
	"strings"
)

// What callers' credentials become (docs/security.md#what-callers-credentials-become): a credential the
// platform checked for the gateway is the gateway's, never a backend's.
// The adapters remove it before anything else sees the request, and what
// the platform verified (the caller's identity, see WithCaller) scopes the
// caller's work instead. A value that differs on every request can never
// scope anything: it would make every request another caller's.

// SigV4Headers are the headers of an AWS Signature Version 4 request
// (Authorization, X-Amz-Date, X-Amz-Security-Token, X-Amz-Content-Sha256),
// canonicalised: the one list of them. Behind a Lambda Function URL with
// AuthType AWS_IAM they are the caller's signature of its request to the
// Function URL, which Lambda has verified; anyone holding them could
// replay the request there within the signature's five-minute window.
var SigV4Headers = append([]string{"Authorization"}, sigV4Replaced...)

// sigV4Replaced are SigV4Headers less Authorization: the client headers a
// signature of the gateway's own sets, which a signed route removes from
// the client's request rather than refusing (Admit, authHeaders).
var sigV4Replaced = []string{"X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-Sha256"}

// SigV4QueryParams are the query parameters of a SigV4 request signed in
// its query string (a presigned URL), removed with SigV4Headers.
var SigV4QueryParams = []string{"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires",
	"X-Amz-SignedHeaders", "X-Amz-Signature", "X-Amz-Security-Token"}

// Credentials are where a platform puts the credential of a caller it
// checked for the gateway, or the identity it verified: a host states its
// own (the Lambda and Azure adapters), and Strip is the one function that
// removes them from a request before anything else sees it
// (docs/security.md, "What callers' credentials become").
// A plain value, safe to share.
type Credentials struct {
	// Names are header names removed in every spelling (headerIs).
	Names []string
	// Prefixes are header-name prefixes removed in every spelling
	// (headerHasPrefix).
	Prefixes []string
	// Verified are header-name prefixes the platform itself sets on a
	// request it authenticated, having removed what a client sent under
	// them: their dashed spelling is kept, and any spelling with '_',
	// which the platform neither sets nor removes, is removed.
	Verified []string
	// Query are query parameters removed (dropQueryParams).
	Query []string
}

// Strip removes c from r: its headers, and its query parameters from both
// r.URL.RawQuery and r.RequestURI, the rest of the target as written.
func (c Credentials) Strip(r *http.Request) {
	for k := range r.Header {
		if headerIn(k, c.Names, c.Prefixes) || strings.IndexByte(k, '_') >= 0 && headerIn(k, nil, c.Verified) {
			delete(r.Header, k)
		}
	}
	if len(c.Query) == 0 || r.URL == nil {
		return
	}
	q := dropQueryParams(r.URL.RawQuery, c.Query...)
	if q == r.URL.RawQuery {
		return
	}
	r.URL.RawQuery = q
	r.URL.ForceQuery = false
	path, _, _ := strings.Cut(r.RequestURI, "?")
	r.RequestURI = path
	if q != "" {
		r.RequestURI += "?" + q
	}
}

// dropQueryParams returns rawQuery without the parameters whose name, once
// unescaped, equals one of names (ASCII case-insensitively, as the
// Functions host reads `code`); every other parameter is kept exactly as
// written, in order. Parameters are split at '&' and at ';', which some
// servers and frameworks also take as a separator (Go before 1.17, Python
// before 3.9.2, Java servlet containers' path parameters): a parameter
// after a ';' is dropped too, whoever reads the query. A kept parameter
// keeps the separator before it. A parameter whose name cannot be
// unescaped is kept.
func dropQueryParams(rawQuery string, names ...string) string {
	if rawQuery == "" {
		return rawQuery
	}
	var b strings.Builder
	dropped, kept := false, 0
	for rest, sep := rawQuery, ""; ; {
		i := strings.IndexAny(rest, "&;")
		p := rest
		if i >= 0 {
			p = rest[:i]
		}
		name, _, _ := strings.Cut(p, "=")
		if n, err := url.QueryUnescape(name); err == nil && equalFoldAny(n, names) {
			dropped = true
		} else {
			if kept > 0 {
				b.WriteString(sep)
			}
			b.WriteString(p)
			kept++
		}
		if i < 0 {
			break
		}
		sep, rest = rest[i:i+1], rest[i+1:]
	}
	if !dropped {
		return rawQuery
	}
	return b.String()
}

func equalFoldAny(s string, names []string) bool {
	for _, n := range names {
		if strings.EqualFold(s, n) {
			return true
		}
	}
	return false
}

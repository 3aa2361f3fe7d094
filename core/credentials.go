package core

import (
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
// canonicalised. Behind a Lambda Function URL with AuthType AWS_IAM they
// are the caller's signature of its request to the Function URL, which
// Lambda has verified; anyone holding them could replay the request there
// within the signature's five-minute window.
var SigV4Headers = []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-Sha256"}

// SigV4QueryParams are the query parameters of a SigV4 request signed in
// its query string (a presigned URL), removed with SigV4Headers.
var SigV4QueryParams = []string{"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires",
	"X-Amz-SignedHeaders", "X-Amz-Signature", "X-Amz-Security-Token"}

// notAScope names the headers IdempotencyScopeHeaders refuses, canonicalised,
// with why: their value differs on every request of one caller (a date, a
// signature, a payload hash, a trace id), or the gateway removes them
// before anything could read them.
var notAScope = map[string]string{
	"Date":                 "a date",
	"X-Amz-Date":           "a SigV4 signing date",
	"X-Amz-Content-Sha256": "a SigV4 payload hash",
	"X-Amz-Security-Token": "a SigV4 session token, removed on Lambda",
	"X-Ms-Date":            "an Azure Storage signing date",
	"Traceparent":          "a trace id",
	"X-Amzn-Trace-Id":      "a trace id",
	"X-Request-Id":         "a request id",
	"X-Functions-Key":      "an Azure Functions key, removed on Azure",
}

// checkScopeHeaders refuses names that can never scope an Idempotency-Key
// (see notAScope), naming every one of them. names are canonicalised.
func checkScopeHeaders(names []string) error {
	var bad []string
	for _, n := range names {
		if why, ok := notAScope[n]; ok {
			bad = append(bad, n+" ("+why+")")
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return &scopeHeaderError{names: bad}
}

type scopeHeaderError struct{ names []string }

func (e *scopeHeaderError) Error() string {
	return "want headers whose value is the same on every request of one caller; " + strings.Join(e.names, ", ") +
		" can never scope an Idempotency-Key"
}

// DropQueryParams returns rawQuery without the parameters whose name, once
// unescaped, equals one of names (ASCII case-insensitively, as the
// Functions host reads `code`); every other parameter is kept exactly as
// written, in order. A parameter whose name cannot be unescaped is kept.
func DropQueryParams(rawQuery string, names ...string) string {
	if rawQuery == "" {
		return rawQuery
	}
	parts := strings.Split(rawQuery, "&")
	keep := parts[:0]
	dropped := false
	for _, p := range parts {
		name, _, _ := strings.Cut(p, "=")
		if n, err := url.QueryUnescape(name); err == nil && equalFoldAny(n, names) {
			dropped = true
			continue
		}
		keep = append(keep, p)
	}
	if !dropped {
		return rawQuery
	}
	return strings.Join(keep, "&")
}

func equalFoldAny(s string, names []string) bool {
	for _, n := range names {
		if strings.EqualFold(s, n) {
			return true
		}
	}
	return false
}

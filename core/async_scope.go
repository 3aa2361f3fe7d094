package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
)

// An Idempotency-Key is scoped to its caller (CONTRACT §3): the index entry
// of a key is named by the profile, the key and a digest of the caller —
// the caller identity the host's platform verified (WithCaller) when there
// is one, otherwise the values of the request headers named by
// IdempotencyScopeHeaders (Async.ScopeHeaders). The same key and request
// from another caller is another request; nothing of the credential is
// stored in clear. The same digest, kept in the record, says who may
// cancel the request (CONTRACT §6).

// DefaultIdempotencyScopeHeaders are the headers that scope an
// Idempotency-Key when Async.ScopeHeaders is nil (IdempotencyScopeHeaders'
// default).
var DefaultIdempotencyScopeHeaders = []string{"Authorization"}

// callerKey is the context key of the verified caller identity.
type callerKey struct{}

// WithCaller returns a context carrying identity: who the host's platform
// verified the caller to be, such as a Lambda Function URL's AWS_IAM
// caller ("aws-iam:" and the event's requestContext.authorizer.iam.userArn)
// or an App Service authentication principal on Azure. Only adapters call
// it, and only with what the platform vouches for: never from a header a
// client could send itself. An empty identity leaves ctx unchanged.
func WithCaller(ctx context.Context, identity string) context.Context {
	if identity == "" {
		return ctx
	}
	return context.WithValue(ctx, callerKey{}, identity)
}

// CallerOf returns the verified caller identity WithCaller put in ctx, or
// "" when the platform verified none.
func CallerOf(ctx context.Context) string {
	s, _ := ctx.Value(callerKey{}).(string)
	return s
}

func (a *Async) scopeHeaders() []string {
	if a.ScopeHeaders != nil {
		return a.ScopeHeaders
	}
	return DefaultIdempotencyScopeHeaders
}

// callerScope returns the SHA-256, in hex, of who the caller is: the
// identity the platform verified (WithCaller) when there is one — the
// caller then is that identity, whatever headers it sends, so a signature
// or a token refreshed between two requests changes nothing — and
// otherwise the values of the scope headers in h, in the order the
// headers are named. Each part is length-prefixed, so no two different
// credentials write the same bytes; an absent header counts as empty.
func (a *Async) callerScope(ctx context.Context, h http.Header) string {
	d := sha256.New()
	if c := CallerOf(ctx); c != "" {
		fmt.Fprintf(d, "c%d:%s\n", len(c), c)
		return hex.EncodeToString(d.Sum(nil))
	}
	for _, name := range a.scopeHeaders() {
		vals := h.Values(name)
		fmt.Fprintf(d, "h%d:%s;%d\n", len(name), http.CanonicalHeaderKey(name), len(vals))
		for _, v := range vals {
			fmt.Fprintf(d, "%d:%s\n", len(v), v)
		}
	}
	d.Write([]byte("c0:\n")) // no verified identity
	return hex.EncodeToString(d.Sum(nil))
}

// submitter returns the callerScope a request's record keeps, so that
// only the same caller may cancel it (CONTRACT §6), or "" when the request
// was scoped to no caller: no verified identity and none of the scope
// headers set. Only the digest is kept, never the credential.
func (a *Async) submitter(ctx context.Context, h http.Header) string {
	if CallerOf(ctx) == "" && !a.anyScopeHeader(h) {
		return ""
	}
	return a.callerScope(ctx, h)
}

// anyScopeHeader reports whether h sets one of the scope headers to a
// value that is not empty.
func (a *Async) anyScopeHeader(h http.Header) bool {
	for _, name := range a.scopeHeaders() {
		for _, v := range h.Values(name) {
			if v != "" {
				return true
			}
		}
	}
	return false
}

// scopedIdempotencyKey is the index key of req's client-given
// Idempotency-Key within profile and for req's caller.
func (a *Async) scopedIdempotencyKey(ctx context.Context, req *Request, profile string) string {
	d := sha256.New()
	scope := a.callerScope(ctx, req.Header)
	for _, part := range []string{profile, req.IdempotencyKey, scope} {
		fmt.Fprintf(d, "%d:%s\n", len(part), part)
	}
	return asyncIdempotencyPrefix + hex.EncodeToString(d.Sum(nil))
}

// ParseHeaderNames parses a comma-separated list of HTTP header names
// (IdempotencyScopeHeaders), trimmed and canonicalised. An empty list, an
// empty element or a name that is not an HTTP token is an error.
func ParseHeaderNames(s string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(s, ",") {
		name := strings.TrimSpace(part)
		if name == "" {
			return nil, fmt.Errorf("empty header name in %.60q", s)
		}
		if len(name) > 256 || !isHeaderToken(name) {
			return nil, fmt.Errorf("%.60q is not an HTTP header name", name)
		}
		out = append(out, http.CanonicalHeaderKey(name))
	}
	return out, nil
}

// isHeaderToken reports whether s is an HTTP token (RFC 9110 §5.6.2), as a
// header name must be.
func isHeaderToken(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return s != ""
}

package async

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"

	"fngateway/core"
)

// An Idempotency-Key is scoped to its caller (CONTRACT §3): the index entry
// of a key is named by the profile, the key and a digest of the caller's
// credential — the values of the request headers named by
// IdempotencyScopeHeaders (Async.ScopeHeaders) and the caller identity the
// host's platform verified (WithCaller). The same key and request from
// another caller is another request; nothing of the credential is stored
// in clear.

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

// callerScope returns the SHA-256, in hex, of the caller's credential: the
// values of the scope headers in h, in the order the headers are named,
// and the verified caller identity in ctx. Each part is length-prefixed,
// so no two different credentials write the same bytes; an absent header
// and an identity the platform did not give count as empty.
func (a *Async) callerScope(ctx context.Context, h http.Header) string {
	d := sha256.New()
	for _, name := range a.scopeHeaders() {
		vals := h.Values(name)
		fmt.Fprintf(d, "h%d:%s;%d\n", len(name), http.CanonicalHeaderKey(name), len(vals))
		for _, v := range vals {
			fmt.Fprintf(d, "%d:%s\n", len(v), v)
		}
	}
	c := CallerOf(ctx)
	fmt.Fprintf(d, "c%d:%s\n", len(c), c)
	return hex.EncodeToString(d.Sum(nil))
}

// scopedIdempotencyKey is the index key of req's client-given
// Idempotency-Key within profile and for req's caller.
func (a *Async) scopedIdempotencyKey(ctx context.Context, req *core.Request, profile string) string {
	d := sha256.New()
	scope := a.callerScope(ctx, req.Header)
	for _, part := range []string{profile, req.IdempotencyKey, scope} {
		fmt.Fprintf(d, "%d:%s\n", len(part), part)
	}
	return asyncIdempotencyPrefix + hex.EncodeToString(d.Sum(nil))
}

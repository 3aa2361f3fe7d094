package async

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"fngateway/core"
)

// An Idempotency-Key is scoped to its caller (docs/async-api.md#idempotency-and-callers): the index entry
// of a key is named by the profile, the key and a digest of the caller —
// the caller identity the host's platform verified (WithCaller) when there
// is one, otherwise the values of the request headers named by
// IdempotencyScopeHeaders (Async.ScopeHeaders). The same key and request
// from another caller is another request; nothing of the credential is
// stored in clear. The same digest, kept in the record, says who may
// cancel the request (docs/async-api.md#cancellation).

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

// idempotency is the index of clients' Idempotency-Keys: the entries,
// named by scoped key, that lead a request seen before to its first
// submission. An idempotency is a plain value over the records it reads.
type idempotency struct {
	records    records
	scope      []string      // the scope headers
	retryAfter time.Duration // the RetryAfter of an Accepted it returns
}

// callerScope returns the SHA-256, in hex, of who the caller is: the
// identity the platform verified (WithCaller) when there is one — the
// caller then is that identity, whatever headers it sends, so a signature
// or a token refreshed between two requests changes nothing — and
// otherwise the values of the scope headers in h, in the order the
// headers are named. Each part is length-prefixed, so no two different
// credentials write the same bytes; an absent header counts as empty.
func (ix idempotency) callerScope(ctx context.Context, h http.Header) string {
	d := sha256.New()
	if c := CallerOf(ctx); c != "" {
		fmt.Fprintf(d, "c%d:%s\n", len(c), c)
		return hex.EncodeToString(d.Sum(nil))
	}
	for _, name := range ix.scope {
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
// only the same caller may cancel it (docs/async-api.md#cancellation), or "" when the request
// was scoped to no caller: no verified identity and none of the scope
// headers set. Only the digest is kept, never the credential.
func (ix idempotency) submitter(ctx context.Context, h http.Header) string {
	if CallerOf(ctx) == "" && !ix.anyScopeHeader(h) {
		return ""
	}
	return ix.callerScope(ctx, h)
}

// anyScopeHeader reports whether h sets one of the scope headers to a
// value that is not empty.
func (ix idempotency) anyScopeHeader(h http.Header) bool {
	for _, name := range ix.scope {
		for _, v := range h.Values(name) {
			if v != "" {
				return true
			}
		}
	}
	return false
}

// key is the index key of req's client-given Idempotency-Key within
// profile and for req's caller.
func (ix idempotency) key(ctx context.Context, req *core.Request, profile string) string {
	d := sha256.New()
	scope := ix.callerScope(ctx, req.Header)
	for _, part := range []string{profile, req.IdempotencyKey, scope} {
		fmt.Fprintf(d, "%d:%s\n", len(part), part)
	}
	return asyncIdempotencyPrefix + hex.EncodeToString(d.Sum(nil))
}

// requestFingerprint identifies what a request asks for: the SHA-256 of
// its method, path, query and the SHA-256 of its body, each
// length-prefixed. It is "" for a body not read yet (a BodyStream), which
// matches no fingerprint, its own included.
func requestFingerprint(req *core.Request) string {
	if req.BodyStream != nil {
		return ""
	}
	body := sha256.Sum256(req.Body)
	h := sha256.New()
	for _, part := range []string{req.Method, req.Path, req.RawQuery, hex.EncodeToString(body[:])} {
		fmt.Fprintf(h, "%d:%s\n", len(part), part)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// keyReused is the error of a key used before for another request.
func keyReused() *core.Error {
	return &core.Error{Reason: core.ReasonIdempotencyKeyReused,
		Message: "this Idempotency-Key was used for a different request (method, path, query or body); use a new key"}
}

// lookup returns the Accepted recorded under the index key for a
// request with fingerprint fp, or nil and the version of an entry that may
// be taken over ("" when there is none): one that is unreadable or names a
// record that is missing, abandoned or past its read grace. An entry of another fingerprint is
// an *Error with ReasonIdempotencyKeyReused; a store failure, or an entry
// or record a newer release wrote (ErrNewerFormat), one with
// ReasonAsyncUnavailable.
func (ix idempotency) lookup(ctx context.Context, key, fp string) (*Accepted, string, error) {
	data, version, err := ix.records.store.Get(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", asyncUnavailable("read the idempotency index", err)
	}
	e, err := decodeIdempotencyEntry(data)
	switch {
	case errors.Is(err, ErrNewerFormat):
		// A newer release's entry: not taken over, lest a retried
		// submission run twice; the newer release answers it.
		return nil, "", asyncUnavailable("read the idempotency index", err)
	case err != nil:
		return nil, version, nil
	}
	rec, err := ix.records.load(ctx, e.ID)
	switch {
	case errors.Is(err, ErrNotFound), errors.Is(err, errBadRecord):
		return nil, version, nil
	case err != nil:
		return nil, "", asyncUnavailable("read the idempotency index", err)
	case rec.State == StateAbandoned, !time.Now().Before(readEnd(rec.Arrival, rec.Expiry)):
		// Abandoned, or past its read grace (a store without a sweep
		// keeps it): the key is free again.
		return nil, version, nil
	}
	// Compared in constant time: the fingerprint is a digest of the body.
	if fp == "" || subtle.ConstantTimeCompare([]byte(e.Fingerprint), []byte(fp)) != 1 {
		return nil, "", keyReused()
	}
	return &Accepted{ID: e.ID, StatusURI: e.StatusURI, DataURI: e.DataURI, HeaderURI: e.HeaderURI, RetryAfter: ix.retryAfter}, "", nil
}

// index writes acc under the idempotency key (create, or take over the
// entry at version), with the request's fingerprint and the end of its
// read grace. It returns
// the Accepted of a concurrent submission of the same request that won the
// key instead, if any, or the error of lookup for one that is
// not the same request.
func (ix idempotency) index(ctx context.Context, key, version, fp string, readableUntil time.Time, acc *Accepted) (*Accepted, error) {
	b, _ := json.Marshal(idempotencyEntry{V: 1, ID: acc.ID, StatusURI: acc.StatusURI, DataURI: acc.DataURI, HeaderURI: acc.HeaderURI,
		Fingerprint: fp, ReadableUntil: readableUntil.UTC()})
	_, err := ix.records.store.Put(ctx, key, b, version)
	if err == nil {
		return nil, nil
	}
	if !errors.Is(err, ErrConflict) {
		return nil, err
	}
	other, _, lerr := ix.lookup(ctx, key, fp)
	if lerr != nil {
		return nil, lerr
	}
	if other == nil {
		return nil, err
	}
	return other, nil
}

// replay answers a resubmission without reaching a backend. It returns
// nil, nil when req carries no client-given Idempotency-Key, or one not seen
// before within the profile (profile may be nil) from the same caller (the
// same values of the ScopeHeaders, the same verified identity of
// WithCaller): the request is new. For
// a key seen before with the same request — method, path, query and body,
// compared by SHA-256 fingerprint — it returns the first submission's
// Accepted (same id and URIs), whatever that request's state. For a key
// seen before with a different request it returns an *Error with
// ReasonIdempotencyKeyReused and nothing of the first request. A store
// that cannot be read is an *Error with ReasonAsyncUnavailable.
//
// Call it before forwarding an async-eligible request, so that a
// resubmission never reaches the backend again. A request whose body is
// an unread BodyStream cannot be fingerprinted: with a key seen before it
// is always ReasonIdempotencyKeyReused.
func (ix idempotency) replay(ctx context.Context, req *core.Request, profile *core.Profile) (*Accepted, error) {
	if !req.ClientKey || req.IdempotencyKey == "" {
		return nil, nil
	}
	var profileID string
	if profile != nil {
		profileID = profile.UserID
	}
	prev, _, err := ix.lookup(ctx, ix.key(ctx, req, profileID), requestFingerprint(req))
	if err != nil {
		return nil, err
	}
	return prev, nil
}

package async

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Gateway result URLs (docs/async-api.md#result-urls-and-their-lifetime). A store's own signature may not last
// as long as a request: an S3 URL presigned with a function role's
// temporary credentials stops working when their session token expires,
// any presigned URL when its access key is deleted, an Azure
// user-delegation SAS after at most 7 days or when its key is revoked, a
// shared-key SAS when the account key is rotated. So, unless the store
// says its own URLs last (LastingSigner), the 202 hands out gateway URLs,
//
//	/_gateway/async/<id>/data?sig=…
//	/_gateway/async/<id>/headers?sig=…
//
// whose signature is an HMAC-SHA256 of the id and the blob's part under a
// key of the request's own: 32 random bytes made at submission and kept in
// its record (ResultKey). The key is thus the same on every instance,
// survives restarts, expires and is deleted with the request, and depends
// on no credential. Reading such a URL checks the signature against the
// record and redirects (307) to a URL of the blob that the store signs at
// that moment, valid for redirectURLLifetime.

// The parts of a result that gateway URLs read.
const (
	// ResultData is the result body: <container>/<id>/data.
	ResultData = "data"
	// ResultHeaders is the result's status and headers:
	// <container>/<id>/headers.json.
	ResultHeaders = "headers"
)

const (
	// resultKeyLen is the length of a request's result key.
	resultKeyLen = 32
	// resultSigContext separates these signatures from any other use of
	// the key.
	resultSigContext = "fngw-async-result-1\n"
	// redirectURLLifetime is how long a blob URL signed for a redirect
	// lasts (the 307 of a gateway result URL, the 303 of a status URI): a
	// few minutes to follow it, never past the request's read end.
	redirectURLLifetime = 5 * time.Minute
	// maxResultQuery bounds the query of a gateway result URL.
	maxResultQuery = 1024
)

// ErrInvalidSignature is returned for a gateway result URL whose signature
// is missing, malformed, altered, or made for another request or part.
var ErrInvalidSignature = errors.New("invalid result URL signature")

// ErrResultPending is returned for a gateway result URL of a request that
// has no result yet.
var ErrResultPending = errors.New("no result yet")

// LastingSigner is implemented by a Store whose SignURL URLs stay valid
// until the expiry asked for, however far, whatever happens to any cloud
// credential: the file store signs with a key of its own, so its URLs are
// gateway URLs already. The 202 hands out such a store's own URLs; for any
// other store (S3, Azure Blob) it hands out gateway result URLs.
type LastingSigner interface {
	// SignsLastingURLs reports whether SignURL's URLs last until their
	// expiry.
	SignsLastingURLs() bool
}

// ResultPath is the path of the gateway URL of part (ResultData or
// ResultHeaders) of request id's result, without its signature.
func ResultPath(id, part string) string { return StatusPrefix + id + "/" + part }

// CutResultPart splits rest, the part of a path after StatusPrefix, into
// an id and a result part when it names a gateway result URL
// ("<id>/data" or "<id>/headers"). The id is not checked.
func CutResultPart(rest string) (id, part string, ok bool) {
	id, part, ok = strings.Cut(rest, "/")
	if !ok || (part != ResultData && part != ResultHeaders) {
		return "", "", false
	}
	return id, part, true
}

// newResultKey returns a fresh result key.
func newResultKey() []byte {
	k := make([]byte, resultKeyLen)
	rand.Read(k) // never fails (crypto/rand, Go ≥ 1.24)
	return k
}

// resultSignature is the signature of a read of part of request id's
// result under key: base64url (no padding) of an HMAC-SHA256.
func resultSignature(key []byte, id, part string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(resultSigContext))
	m.Write([]byte(id))
	m.Write([]byte{'\n'})
	m.Write([]byte(part))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// resultURL is the signed gateway URL of part of request id's result.
func resultURL(key []byte, id, part string) string {
	return ResultPath(id, part) + "?sig=" + resultSignature(key, id, part)
}

// parseResultQuery returns the signature in the raw query of a gateway
// result URL, as written: exactly one sig parameter, compared raw, so a
// percent-encoded character, even one that decodes to the signed byte, does
// not match. Other parameters are ignored, but not a second sig, nor one
// spelt with escapes; a malformed or overlong query is an error.
func parseResultQuery(rawQuery string) (string, error) {
	if len(rawQuery) > maxResultQuery {
		return "", fmt.Errorf("query longer than %d bytes", maxResultQuery)
	}
	var sigs []string
	for part := range strings.SplitSeq(rawQuery, "&") {
		k, v, _ := strings.Cut(part, "=")
		if k == "sig" {
			sigs = append(sigs, v)
			continue
		}
		if dk, err := url.QueryUnescape(k); err != nil || dk == "sig" {
			return "", errors.New("malformed query")
		}
	}
	if len(sigs) != 1 || sigs[0] == "" {
		return "", errors.New("want exactly one sig parameter")
	}
	return sigs[0], nil
}

// verifyResultSig reports whether sig, as written in a URL, is the
// signature of part of request id under key. A missing key verifies
// nothing.
func verifyResultSig(key []byte, id, part, sig string) bool {
	if len(key) != resultKeyLen {
		return false
	}
	return hmac.Equal([]byte(sig), []byte(resultSignature(key, id, part)))
}

// Redirect is where a gateway result URL sends its reader.
type Redirect struct {
	// URL is the blob's URL, signed by the store at that moment and valid
	// for a few minutes; relative ("/_gateway/blobs/…") when the gateway
	// serves the blob itself.
	URL string
	// Attempts counts the request's attempts, for x-Attempts.
	Attempts int
}

// ResultURL checks a gateway result URL, of part (ResultData or
// ResultHeaders) of request id with rawQuery, and returns where to redirect
// its reader: a URL of the blob that the store signs now, valid for a few
// minutes and never past the request's read end. It answers, in this
// order: ErrInvalidSignature (wrapped) for a query without one well-formed
// signature, before any I/O; an error wrapping ErrNotFound for an unknown
// id or part; an *Error with ReasonCorruptRecord for a record that cannot
// be read; ErrInvalidSignature for a signature that is not this request's
// and part's; an *Error with ReasonExpired once the request's expiry and
// read grace have passed (nothing is signed then); ErrResultPending while
// it has no result. Safe for concurrent use.
func (a *Async) ResultURL(ctx context.Context, id, part, rawQuery string) (*Redirect, error) {
	sig, err := parseResultQuery(rawQuery)
	if err != nil {
		return nil, fmt.Errorf("result URL: %w: %v", ErrInvalidSignature, err)
	}
	if !validAsyncID(id) || (part != ResultData && part != ResultHeaders) {
		return nil, fmt.Errorf("result URL: malformed id or part: %w", ErrNotFound)
	}
	rec, err := a.engine().records.loadReadable(ctx, id, "result URL")
	if err != nil {
		return nil, err
	}
	if !verifyResultSig(rec.ResultKey, id, part, sig) {
		return nil, fmt.Errorf("result URL %s/%s: %w: it does not match this request and part", id, part, ErrInvalidSignature)
	}
	now := time.Now()
	end, err := rec.readable(now)
	if err != nil {
		return nil, err
	}
	if !rec.State.Done() || rec.Result == nil {
		return nil, fmt.Errorf("result URL %s: %w", id, ErrResultPending)
	}
	key := asyncDataKey(rec.Container, id)
	if part == ResultHeaders {
		key = asyncHeaderKey(rec.Container, id)
	}
	u, err := a.Store.SignURL(ctx, key, redirectUntil(now, end))
	if err != nil {
		return nil, fmt.Errorf("result URL %s: sign the %s URL: %w", id, part, err)
	}
	return &Redirect{URL: u, Attempts: len(rec.Attempts)}, nil
}

// redirectUntil is the expiry of a blob URL signed at now for a redirect
// of a request readable until end.
func redirectUntil(now, end time.Time) time.Time {
	return minTime(now.Add(redirectURLLifetime), end)
}

// lastingSigner reports whether store signs URLs that last.
func lastingSigner(store Store) bool {
	ls, ok := store.(LastingSigner)
	return ok && ls.SignsLastingURLs()
}

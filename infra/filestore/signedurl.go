package filestore

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"fngateway/core"
	"fngateway/core/async"
)

// blobPathPrefix is the path under which ServeHTTP serves blobs; SignURL's
// URLs start with it.
const blobPathPrefix = "/_gateway/blobs/"

// Codes of the errors ServeHTTP answers with, in the body's error.code and
// the x-Gateway-Error header.
const (
	codeInvalidSignature = "InvalidSignature"
	codeURLExpired       = "URLExpired"
	codeNotFound         = "NotFound"
	codeMethodNotAllowed = "MethodNotAllowed"
	codeStoreError       = "StoreError"
)

// signContext separates these signatures from any other use of the key.
const signContext = "fngw-blob-read-1\n"

// SignURL returns a relative, read-only URL for the one blob at key, valid
// until expiry (to the second, rounded down):
// /_gateway/blobs/<key>?se=<Unix seconds>&sig=<base64url HMAC-SHA256>.
// The signature covers the key and the expiry. The blob need not exist yet.
func (s *Store) SignURL(ctx context.Context, key string, expiry time.Time) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := checkKey(key); err != nil {
		return "", fmt.Errorf("sign url: %w", err)
	}
	se := expiry.Unix()
	if se < 0 {
		return "", fmt.Errorf("sign url %s: expiry %s is before 1970", key, expiry.UTC().Format(time.RFC3339))
	}
	segs := strings.Split(key, "/")
	for i, seg := range segs {
		segs[i] = url.PathEscape(seg)
	}
	return blobPathPrefix + strings.Join(segs, "/") + "?se=" + strconv.FormatInt(se, 10) + "&sig=" + s.sign(key, se), nil
}

var _ async.LastingSigner = (*Store)(nil)

// SignsLastingURLs reports true: SignURL signs with the store's own key
// (kept in its directory, the same for every process that opens it), which
// no cloud credential's expiry or rotation touches, so its URLs last until
// their expiry and the 202 hands them out as they are.
func (s *Store) SignsLastingURLs() bool { return true }

// sign returns the signature of a read of key until se (Unix seconds).
func (s *Store) sign(key string, se int64) string {
	m := hmac.New(sha256.New, s.signingKey)
	m.Write([]byte(signContext))
	m.Write([]byte(key))
	m.Write([]byte{'\n'})
	m.Write(strconv.AppendInt(nil, se, 10))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// denial is why a blob request is refused.
type denial struct {
	status  int
	code    string
	message string
}

// verify checks a blob request's decoded path and raw query at now and
// returns the blob's key, or why it is refused. The signature and expiry
// are compared in their raw, encoded form, so any change to them, even one
// that decodes to the same bytes, invalidates them.
func (s *Store) verify(path, rawQuery string, now time.Time) (string, *denial) {
	key, ok := strings.CutPrefix(path, blobPathPrefix)
	if !ok {
		return "", &denial{http.StatusNotFound, codeNotFound, "not a blob path: " + path}
	}
	invalid := func(msg string) (string, *denial) {
		return "", &denial{http.StatusForbidden, codeInvalidSignature, msg}
	}
	// The query is read raw: se and sig are compared as written, so a
	// percent-encoded character, even one that decodes to the signed byte,
	// does not match.
	var ses, sigs []string
	for part := range strings.SplitSeq(rawQuery, "&") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "se":
			ses = append(ses, v)
		case "sig":
			sigs = append(sigs, v)
		default:
			if dk, err := url.QueryUnescape(k); err != nil || dk == "se" || dk == "sig" {
				return invalid("malformed query")
			}
		}
	}
	if len(ses) != 1 || len(sigs) != 1 {
		return invalid("want exactly one se and one sig parameter")
	}
	se, err := parseExpiry(ses[0])
	if err != nil {
		return invalid("se: " + err.Error())
	}
	if !hmac.Equal([]byte(sigs[0]), []byte(s.sign(key, se))) {
		return invalid("signature does not match this blob and expiry")
	}
	if checkKey(key) != nil {
		return invalid("signature does not match this blob and expiry")
	}
	if !now.Before(time.Unix(se, 0)) {
		return "", &denial{http.StatusForbidden, codeURLExpired,
			"URL expired at " + time.Unix(se, 0).UTC().Format(time.RFC3339)}
	}
	return key, nil
}

// parseExpiry parses se: Unix seconds, decimal digits only.
func parseExpiry(v string) (int64, error) {
	if v == "" || len(v) > 19 || strings.TrimLeft(v, "0123456789") != "" {
		return 0, errors.New("want Unix seconds")
	}
	return strconv.ParseInt(v, 10, 64)
}

// ServeHTTP serves GET and HEAD of /_gateway/blobs/<key>?se=…&sig=…, the
// URLs SignURL makes: the blob's bytes with its stored content type
// (application/octet-stream when none), ranges and conditional requests
// included. It refuses a missing, altered or foreign signature with 403
// InvalidSignature, an expired one with 403 URLExpired, a missing blob with
// 404 NotFound and other methods with 405, each as the contract's JSON
// error document with the code in x-Gateway-Error.
func (s *Store) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if w.Header().Get("X-Attempts") == "" {
		w.Header().Set("X-Attempts", "0")
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, &denial{http.StatusMethodNotAllowed, codeMethodNotAllowed, "blob URLs are read-only: use GET or HEAD"})
		return
	}
	key, d := s.verify(r.URL.Path, r.URL.RawQuery, time.Now())
	if d != nil {
		writeError(w, d)
		return
	}
	b, err := s.openBlob(key)
	if errors.Is(err, async.ErrNotFound) {
		writeError(w, &denial{http.StatusNotFound, codeNotFound, "no blob " + key})
		return
	}
	if err != nil {
		writeError(w, &denial{http.StatusInternalServerError, codeStoreError, "cannot read blob " + key})
		return
	}
	defer b.Close()
	h := w.Header()
	ct := b.contentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	h.Set("Content-Type", ct)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("ETag", `"`+b.version+`"`)
	http.ServeContent(w, r, "", b.modTime, b.SectionReader)
}

// writeError writes d as the contract's error document.
func writeError(w http.ResponseWriter, d *denial) {
	body := core.ErrorJSON(d.code, d.message, nil)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Gateway-Error", d.code)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(d.status)
	w.Write(body)
}

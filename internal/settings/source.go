package settings

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Document is one version of a source's settings.
type Document struct {
	// Values are the settings the source sets, as text (ParseDocument).
	Values map[string]string
	// Version names this version: an ETag, a sentinel's value, a hash.
	Version string
}

// Source is where settings are reloaded from (SettingsSource).
type Source interface {
	// String names the source for logs and the settings view, without a
	// secret.
	String() string
	// Read returns the source's document when its version is not have
	// (one conditional read), or nil and no error when it is.
	Read(ctx context.Context, have string) (*Document, error)
}

// Open returns the source spec names (SettingsSource's value).
func Open(spec string, env func(string) (string, bool)) (Source, error) {
	switch {
	case strings.HasPrefix(spec, "file:"):
		p := strings.TrimPrefix(spec, "file:")
		if p == "" {
			return nil, errors.New("want a path after file: (file:<path>)")
		}
		return &fileSource{path: p}, nil
	case strings.HasPrefix(spec, "appconfig:"):
		return openAgent(spec, env)
	}
	return nil, fmt.Errorf("want file:<path>, s3://<bucket>/<key>, https://<account>.blob.core.windows.net/<container>/<blob> or appconfig:<application>/<environment>/<profile>")
}

// fileSource is a settings document in a local file (file:<path>). A file
// whose size and modification time did not change is not read again.
type fileSource struct {
	path    string
	size    int64
	modTime time.Time
	version string
}

func (f *fileSource) String() string { return "file:" + f.path }

func (f *fileSource) Read(_ context.Context, have string) (*Document, error) {
	fh, err := os.Open(f.path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", f.path)
	}
	if have != "" && have == f.version && st.Size() == f.size && st.ModTime().Equal(f.modTime) {
		return nil, nil
	}
	b, err := io.ReadAll(io.LimitReader(fh, maxDocument+1))
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	version := "sha256:" + hex.EncodeToString(sum[:6])
	f.size, f.modTime, f.version = st.Size(), st.ModTime(), version
	if version == have {
		return nil, nil
	}
	vals, err := ParseDocument(b)
	if err != nil {
		return nil, &DocumentError{Version: version, Err: err}
	}
	return &Document{Values: vals, Version: version}, nil
}

// DocumentError is a document that was read but does not parse: a
// rejection, not a failure to reach the source.
type DocumentError struct {
	Version string
	Err     error
}

func (e *DocumentError) Error() string { return e.Err.Error() }
func (e *DocumentError) Unwrap() error { return e.Err }

// Redact returns a source's spec without its secrets: a connection
// string's Secret and a URL's query (a SAS) removed.
func Redact(spec string) string {
	if strings.Contains(spec, "Secret=") || strings.Contains(spec, "AccountKey=") || strings.Contains(spec, "SharedAccessSignature=") {
		var keep []string
		for _, part := range strings.Split(spec, ";") {
			k, _, _ := strings.Cut(part, "=")
			switch strings.ToLower(strings.TrimSpace(k)) {
			case "secret", "accountkey", "sharedaccesssignature":
				keep = append(keep, k+"=(secret)")
			default:
				keep = append(keep, part)
			}
		}
		return strings.Join(keep, ";")
	}
	if i := strings.IndexAny(spec, "?#"); i >= 0 {
		return spec[:i] + "?(secret)"
	}
	return spec
}

// Conditional is a settings document read with a conditional GET (an S3
// object, a blob): Get returns the body and its ETag, or notModified when
// the ETag is still the one given (If-None-Match), so that an unchanged
// document costs one request and no body.
type Conditional struct {
	// Name is the source as the settings view shows it (no secret).
	Name string
	Get  func(ctx context.Context, etag string) (body []byte, etag2 string, notModified bool, err error)
	// Secrets are removed from the errors Get returns (a SAS in the URL,
	// which an HTTP client's error quotes).
	Secrets []string
}

func (c *Conditional) String() string { return c.Name }

func (c *Conditional) Read(ctx context.Context, have string) (*Document, error) {
	b, etag, notModified, err := c.Get(ctx, have)
	switch {
	case err != nil:
		return nil, scrub(err, c.Secrets)
	case notModified || (have != "" && etag == have):
		return nil, nil
	}
	vals, err := ParseDocument(b)
	if err != nil {
		return nil, &DocumentError{Version: etag, Err: err}
	}
	return &Document{Values: vals, Version: etag}, nil
}

// scrub removes each of secrets from err's text.
func scrub(err error, secrets []string) error {
	msg := err.Error()
	changed := false
	for _, s := range secrets {
		if s != "" && strings.Contains(msg, s) {
			msg, changed = strings.ReplaceAll(msg, s, "(secret)"), true
		}
	}
	if !changed {
		return err
	}
	return errors.New(msg)
}

package settings

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// The App Configuration source's own settings (environment only).
const (
	// PrefixSetting is the key prefix of the settings in an App
	// Configuration store: Warm: by default, as SimpleL7Proxy lays them.
	PrefixSetting = "SettingsKeyPrefix"
	// LabelSetting is the label of the key-values read; unset, those with
	// no label.
	LabelSetting = "SettingsLabel"
)

// DefaultPrefix is SettingsKeyPrefix's default.
const DefaultPrefix = "Warm:"

// appConfigAPIVersion is the data-plane API version of the requests.
const appConfigAPIVersion = "1.0"

// AppConfiguration is an Azure App Configuration store laid out as
// SimpleL7Proxy lays it: each setting a key under Prefix (Warm:DefaultTTLSecs),
// with Label (or none), and a sentinel key, <Prefix>Sentinel, whose change
// says the others changed. Each poll is one conditional GET of the sentinel
// (If-None-Match its ETag); only when it changed are the keys under the
// prefix listed, and the version is the sentinel's ETag.
type AppConfiguration struct {
	// Endpoint is the store, https://<store>.azconfig.io.
	Endpoint string
	Prefix   string
	Label    string
	// Authorize signs a request: HMAC-SHA256 with an access key
	// (HMACSigner) or an Entra ID token of the managed identity.
	Authorize func(ctx context.Context, r *http.Request) error
	// Client sends the requests; nil means http.DefaultClient.
	Client *http.Client
}

func (a *AppConfiguration) String() string {
	s := a.Endpoint + " (keys " + a.Prefix + "*"
	if a.Label != "" {
		s += ", label " + a.Label
	}
	return s + ")"
}

// ParseAppConfigConnectionString parses an App Configuration connection
// string, Endpoint=https://<store>.azconfig.io;Id=<id>;Secret=<base64>.
func ParseAppConfigConnectionString(s string) (endpoint, id string, secret []byte, err error) {
	for _, part := range strings.Split(s, ";") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "endpoint":
			endpoint = strings.TrimRight(strings.TrimSpace(v), "/")
		case "id":
			id = strings.TrimSpace(v)
		case "secret":
			secret, err = base64.StdEncoding.DecodeString(strings.TrimSpace(v))
			if err != nil {
				return "", "", nil, errors.New("want an App Configuration connection string Endpoint=…;Id=…;Secret=…: Secret is not base64")
			}
		}
	}
	u, uerr := url.Parse(endpoint)
	if endpoint == "" || id == "" || len(secret) == 0 || uerr != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", "", nil, errors.New("want an App Configuration connection string Endpoint=https://<store>.azconfig.io;Id=…;Secret=…")
	}
	return endpoint, id, secret, nil
}

// HMACSigner signs App Configuration requests with an access key, as the
// service documents ("HMAC authentication - REST API reference"):
// x-ms-date, x-ms-content-sha256 (base64 SHA-256 of the body, here empty)
// and Authorization: HMAC-SHA256 Credential=<id>&SignedHeaders=x-ms-date;host;x-ms-content-sha256&Signature=<base64
// HMAC-SHA256 of "METHOD\npath?query\ndate;host;hash" keyed by the decoded
// secret>.
func HMACSigner(id string, secret []byte, now func() time.Time) func(ctx context.Context, r *http.Request) error {
	return func(_ context.Context, r *http.Request) error {
		date := now().UTC().Format(http.TimeFormat)
		sum := sha256.Sum256(nil)
		hash := base64.StdEncoding.EncodeToString(sum[:])
		r.Header.Set("x-ms-date", date)
		r.Header.Set("x-ms-content-sha256", hash)
		r.Header.Set("Authorization", "HMAC-SHA256 Credential="+id+"&SignedHeaders=x-ms-date;host;x-ms-content-sha256&Signature="+
			HMACSignature(secret, r.Method, r.URL.RequestURI(), date, r.URL.Host, hash))
		return nil
	}
}

// HMACSignature is the signature of one request.
func HMACSignature(secret []byte, method, pathAndQuery, date, host, hash string) string {
	m := hmac.New(sha256.New, secret)
	io.WriteString(m, method+"\n"+pathAndQuery+"\n"+date+";"+host+";"+hash)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// keyValue is one key-value of the data plane's answers.
type keyValue struct {
	Key   string  `json:"key"`
	Label *string `json:"label"`
	Value *string `json:"value"`
	ETag  string  `json:"etag"`
}

func (a *AppConfiguration) labelParam() string {
	if a.Label == "" {
		return "\x00" // the key-values with no label
	}
	return a.Label
}

func (a *AppConfiguration) get(ctx context.Context, path string, q url.Values, ifNoneMatch string) (*http.Response, error) {
	q.Set("api-version", appConfigAPIVersion)
	u := a.Endpoint + path + "?" + q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/vnd.microsoft.appconfig.kv+json, application/vnd.microsoft.appconfig.kvset+json, application/problem+json")
	if ifNoneMatch != "" {
		req.Header.Set("If-None-Match", ifNoneMatch)
	}
	if err := a.Authorize(ctx, req); err != nil {
		return nil, fmt.Errorf("settings source: App Configuration credential: %w", err)
	}
	c := a.Client
	if c == nil {
		c = http.DefaultClient
	}
	return c.Do(req)
}

// Read polls the sentinel; when its ETag is not have, it lists the keys
// under the prefix.
func (a *AppConfiguration) Read(ctx context.Context, have string) (*Document, error) {
	sentinel := a.Prefix + "Sentinel"
	resp, err := a.get(ctx, "/kv/"+url.PathEscape(sentinel), url.Values{"label": {a.labelParam()}}, have)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument))
	resp.Body.Close()
	switch {
	case err != nil:
		return nil, err
	case resp.StatusCode == http.StatusNotModified:
		return nil, nil
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("settings source: App Configuration: no sentinel key %s (label %q): create it, and change it after the others", sentinel, a.Label)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("settings source: App Configuration: sentinel %s answered %d: %.200s", sentinel, resp.StatusCode, body)
	}
	var s keyValue
	if err := json.Unmarshal(body, &s); err != nil {
		return nil, fmt.Errorf("settings source: App Configuration: sentinel %s: %v", sentinel, err)
	}
	version := resp.Header.Get("ETag")
	if version == "" {
		version = `"` + s.ETag + `"`
	}
	vals := map[string]string{}
	var bad []string
	next := ""
	for page := 0; ; page++ {
		var r *http.Response
		if next == "" {
			r, err = a.get(ctx, "/kv", url.Values{"key": {a.Prefix + "*"}, "label": {a.labelParam()}}, "")
		} else {
			r, err = a.getLink(ctx, next)
		}
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(io.LimitReader(r.Body, maxDocument+1))
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		if r.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("settings source: App Configuration: listing %s* answered %d: %.200s", a.Prefix, r.StatusCode, b)
		}
		var set struct {
			Items    []keyValue `json:"items"`
			NextLink string     `json:"@nextLink"`
		}
		if err := json.Unmarshal(b, &set); err != nil {
			return nil, fmt.Errorf("settings source: App Configuration: listing %s*: %v", a.Prefix, err)
		}
		for _, kv := range set.Items {
			name, ok := strings.CutPrefix(kv.Key, a.Prefix)
			if !ok || name == "Sentinel" {
				continue
			}
			if !slices.Contains(Names(), name) {
				bad = append(bad, quoteKey(kv.Key))
				continue
			}
			if kv.Value != nil {
				vals[name] = *kv.Value
			}
		}
		if set.NextLink == "" {
			break
		}
		if page > 100 {
			return nil, errors.New("settings source: App Configuration: more than 100 pages of keys")
		}
		next = set.NextLink
	}
	if len(bad) > 0 {
		return nil, &DocumentError{Version: version, Err: fmt.Errorf("settings document: unknown setting %s", strings.Join(bad, ", "))}
	}
	return &Document{Values: vals, Version: version}, nil
}

// getLink follows an @nextLink, a path and query on the same store.
func (a *AppConfiguration) getLink(ctx context.Context, link string) (*http.Response, error) {
	u, err := url.Parse(link)
	if err != nil || u.IsAbs() || !strings.HasPrefix(u.Path, "/kv") {
		return nil, fmt.Errorf("settings source: App Configuration: a @nextLink %q not on the store", link)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.Endpoint+u.RequestURI(), nil)
	if err != nil {
		return nil, err
	}
	if err := a.Authorize(ctx, req); err != nil {
		return nil, err
	}
	c := a.Client
	if c == nil {
		c = http.DefaultClient
	}
	return c.Do(req)
}

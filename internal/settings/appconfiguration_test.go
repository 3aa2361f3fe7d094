package settings

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// appConfigStandIn stands in for an App Configuration store (no emulator of
// it runs here). It checks each request as the service documents it: the
// HMAC-SHA256 signature over method, path and query, x-ms-date, host and
// x-ms-content-sha256 (a date at most 15 minutes off), api-version, the
// label filter, the key filter, and it answers the sentinel's If-None-Match
// 304 when its ETag did not change.
type appConfigStandIn struct {
	t      *testing.T
	id     string
	secret []byte
	label  string

	mu       sync.Mutex
	kvs      map[string]string // key → value, under the label
	etags    map[string]int
	requests []string
}

func (s *appConfigStandIn) set(key, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kvs[key] = value
	s.etags[key]++
}

func (s *appConfigStandIn) etag(key string) string { return fmt.Sprintf("%s-%d", key, s.etags[key]) }

func (s *appConfigStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r.Method+" "+r.URL.Path+" "+r.Header.Get("If-None-Match"))
	fail := func(code int, msg string) {
		s.t.Errorf("App Configuration stand-in: %s %s: %s", r.Method, r.URL, msg)
		http.Error(w, msg, code)
	}
	date, hash := r.Header.Get("x-ms-date"), r.Header.Get("x-ms-content-sha256")
	empty := sha256.Sum256(nil)
	if hash != base64.StdEncoding.EncodeToString(empty[:]) {
		fail(http.StatusUnauthorized, "x-ms-content-sha256 is not the base64 SHA-256 of the empty body")
		return
	}
	d, err := time.Parse(http.TimeFormat, date)
	if err != nil || time.Since(d).Abs() > 15*time.Minute {
		fail(http.StatusUnauthorized, "x-ms-date missing or more than 15 minutes off")
		return
	}
	want := "HMAC-SHA256 Credential=" + s.id + "&SignedHeaders=x-ms-date;host;x-ms-content-sha256&Signature=" +
		HMACSignature(s.secret, r.Method, r.URL.RequestURI(), date, r.Host, hash)
	if r.Header.Get("Authorization") != want {
		fail(http.StatusUnauthorized, "bad signature: "+r.Header.Get("Authorization"))
		return
	}
	q := r.URL.Query()
	label := "\x00"
	if s.label != "" {
		label = s.label
	}
	if q.Get("api-version") != "1.0" || q.Get("label") != label {
		fail(http.StatusBadRequest, fmt.Sprintf("api-version %q, label %q; want 1.0 and %q", q.Get("api-version"), q.Get("label"), label))
		return
	}
	kv := func(k string) map[string]any {
		return map[string]any{"key": k, "label": s.label, "value": s.kvs[k], "etag": s.etag(k)}
	}
	switch {
	case strings.HasPrefix(r.URL.Path, "/kv/"):
		k := strings.TrimPrefix(r.URL.Path, "/kv/")
		if _, ok := s.kvs[k]; !ok {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		w.Header().Set("ETag", `"`+s.etag(k)+`"`)
		if r.Header.Get("If-None-Match") == `"`+s.etag(k)+`"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		json.NewEncoder(w).Encode(kv(k))
	case r.URL.Path == "/kv":
		prefix, ok := strings.CutSuffix(q.Get("key"), "*")
		if !ok || prefix != "Warm:" {
			fail(http.StatusBadRequest, "key filter "+q.Get("key")+"; want Warm:*")
			return
		}
		items := []map[string]any{}
		for k := range s.kvs {
			if strings.HasPrefix(k, prefix) {
				items = append(items, kv(k))
			}
		}
		json.NewEncoder(w).Encode(map[string]any{"items": items})
	default:
		fail(http.StatusNotFound, "no such path")
	}
}

// TestAppConfiguration reads settings from a stand-in App Configuration
// store with SimpleL7Proxy's layout, signed with an access key: the keys
// under Warm: are the document; a poll is one conditional GET of
// Warm:Sentinel while it does not change; changing the sentinel reloads
// every key.
func TestAppConfiguration(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	st := &appConfigStandIn{t: t, id: "key-id", secret: secret, label: "prod", kvs: map[string]string{}, etags: map[string]int{}}
	st.set("Warm:DefaultTTLSecs", "60")
	st.set("Warm:Sentinel", "1")
	st.set("Other:Timeout", "x") // outside the prefix
	srv := httptest.NewServer(st)
	defer srv.Close()
	conn := "Endpoint=" + srv.URL + ";Id=key-id;Secret=" + base64.StdEncoding.EncodeToString(secret)
	endpoint, id, sec, err := ParseAppConfigConnectionString(conn)
	if err != nil {
		t.Fatal(err)
	}
	src := &AppConfiguration{Endpoint: endpoint, Prefix: DefaultPrefix, Label: "prod", Authorize: HMACSigner(id, sec, time.Now)}
	var applied []*Settings
	r := &Reloader{Source: src, Env: env(map[string]string{"Hosts": "http://a"}), Apply: func(s *Settings) error { applied = append(applied, s); return nil }}
	s, _, err := r.Start(context.Background())
	if err != nil || s.DefaultTTLSecs.D().Seconds() != 60 {
		t.Fatalf("start: %v, %v; want the store's 60 s TTL", s, err)
	}
	n := len(st.requests)
	for range 3 {
		r.Refresh(context.Background())
	}
	if polls := st.requests[n:]; len(polls) != 3 || len(applied) != 0 {
		t.Errorf("three polls of an unchanged store: requests %q, applied %d; want three conditional sentinel reads, nothing applied", polls, len(applied))
	}
	st.set("Warm:DefaultTTLSecs", "30")
	r.Refresh(context.Background())
	if len(applied) != 0 {
		t.Errorf("a key changed without the sentinel: applied; want nothing until the sentinel changes")
	}
	st.set("Warm:Sentinel", "2")
	r.Refresh(context.Background())
	if len(applied) != 1 || applied[0].DefaultTTLSecs.D().Seconds() != 30 || r.View().Source.Version != `"Warm:Sentinel-2"` {
		t.Errorf("sentinel changed: applied %v, view %+v; want the 30 s TTL, version the sentinel's ETag", applied, r.View().Source)
	}
	st.set("Warm:Bogus", "1")
	st.set("Warm:Sentinel", "3")
	r.Refresh(context.Background())
	if r.Counters()["settings_rejected"] != 1 || r.Settings().DefaultTTLSecs.D().Seconds() != 30 {
		t.Errorf("an unknown key: counters %v; want the document rejected, the settings kept", r.Counters())
	}
	if v := r.View(); strings.Contains(fmt.Sprint(v), base64.StdEncoding.EncodeToString(secret)) {
		t.Errorf("the view shows the access key: %+v", v)
	}
	if got := Redact(conn); strings.Contains(got, base64.StdEncoding.EncodeToString(secret)) {
		t.Errorf("Redact(%q) = %q", conn, got)
	}
	for _, bad := range []string{"Endpoint=https://x.azconfig.io;Id=a", "Endpoint=;Id=a;Secret=AAAA", "Id=a;Secret=!!"} {
		if _, _, _, err := ParseAppConfigConnectionString(bad); err == nil {
			t.Errorf("ParseAppConfigConnectionString(%q): no error", bad)
		}
	}
}

func FuzzParseAppConfigConnectionString(f *testing.F) {
	f.Add("Endpoint=https://x.azconfig.io;Id=abc;Secret=AAAA")
	f.Add("Endpoint=;Id=;Secret=")
	f.Fuzz(func(t *testing.T, s string) {
		endpoint, id, secret, err := ParseAppConfigConnectionString(s)
		if err == nil && (endpoint == "" || id == "" || len(secret) == 0) {
			t.Fatalf("%q: accepted without endpoint, id or secret", s)
		}
	})
}

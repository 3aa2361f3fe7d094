package filestore

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

var timeFar = time.Now().Add(24 * time.Hour)

// errorDoc is the contract's error document.
type errorDoc struct {
	Error struct {
		Code     string `json:"code"`
		Message  string `json:"message"`
		Attempts []any  `json:"attempts"`
	} `json:"error"`
}

func mustSign(tb testing.TB, s *Store, key string, expiry time.Time) string {
	tb.Helper()
	u, err := s.SignURL(context.Background(), key, expiry)
	if err != nil {
		tb.Fatalf("SignURL(%q): %v", key, err)
	}
	return u
}

func TestSignedURL(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, t.TempDir())
	srv := httptest.NewServer(s)
	defer srv.Close()

	blobs := map[string]struct{ body, ct string }{
		"results/a/data":       {`{"answer":42}`, "application/json; charset=utf-8"},
		"results/b/data":       {"other", "text/plain"},
		"results/c d/ü?#&.bin": {"odd key", ""},
	}
	for key, b := range blobs {
		if err := s.WriteBlob(ctx, key, strings.NewReader(b.body), b.ct, true); err != nil {
			t.Fatal(err)
		}
	}
	urlA := mustSign(t, s, "results/a/data", timeFar)
	urlB := mustSign(t, s, "results/b/data", timeFar)
	_, queryA, _ := strings.Cut(urlA, "?")

	tests := []struct {
		name     string
		method   string
		url      string
		status   int
		code     string
		body, ct string
	}{
		{"valid", "GET", urlA, 200, "", `{"answer":42}`, "application/json; charset=utf-8"},
		{"valid HEAD", "HEAD", urlA, 200, "", "", "application/json; charset=utf-8"},
		{"other blob", "GET", urlB, 200, "", "other", "text/plain"},
		{"escaped key, no content type", "GET", mustSign(t, s, "results/c d/ü?#&.bin", timeFar), 200, "", "odd key", "application/octet-stream"},
		{"A's signature on B", "GET", "/_gateway/blobs/results/b/data?" + queryA, 403, "InvalidSignature", "", ""},
		{"expired", "GET", mustSign(t, s, "results/a/data", time.Now().Add(-time.Second)), 403, "URLExpired", "", ""},
		{"expiry moved", "GET", strings.Replace(urlA, "se=", "se=1", 1), 403, "InvalidSignature", "", ""},
		{"no signature", "GET", "/_gateway/blobs/results/a/data", 403, "InvalidSignature", "", ""},
		{"signature twice", "GET", urlA + "&sig=x", 403, "InvalidSignature", "", ""},
		{"signature of other store", "GET", mustSign(t, mustOpen(t, t.TempDir()), "results/a/data", timeFar), 403, "InvalidSignature", "", ""},
		{"PUT", "PUT", urlA, 405, "MethodNotAllowed", "", ""},
		{"DELETE", "DELETE", urlA, 405, "MethodNotAllowed", "", ""},
		{"unknown blob", "GET", mustSign(t, s, "results/none/data", timeFar), 404, "NotFound", "", ""},
		{"path escape", "GET", "/_gateway/blobs/results/../../signing.key?" + queryA, 403, "InvalidSignature", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, srv.URL+tt.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status {
				t.Fatalf("status = %d, want %d (body %s)", resp.StatusCode, tt.status, body)
			}
			if got := resp.Header.Get("X-Attempts"); got != "0" {
				t.Errorf("x-Attempts = %q, want 0", got)
			}
			if tt.code == "" {
				if string(body) != tt.body {
					t.Errorf("body = %q, want %q", body, tt.body)
				}
				if got := resp.Header.Get("Content-Type"); got != tt.ct {
					t.Errorf("Content-Type = %q, want %q", got, tt.ct)
				}
				return
			}
			checkErrorResponse(t, resp, body, tt.code)
		})
	}
}

func checkErrorResponse(tb testing.TB, resp *http.Response, body []byte, code string) {
	tb.Helper()
	if got := resp.Header.Get("Content-Type"); got != "application/json" {
		tb.Errorf("Content-Type = %q, want application/json", got)
	}
	if got := resp.Header.Get("X-Gateway-Error"); got != code {
		tb.Errorf("x-Gateway-Error = %q, want %q", got, code)
	}
	var doc errorDoc
	if err := json.Unmarshal(body, &doc); err != nil {
		tb.Fatalf("body %s: %v", body, err)
	}
	if doc.Error.Code != code || doc.Error.Message == "" || doc.Error.Attempts == nil || len(doc.Error.Attempts) != 0 {
		tb.Errorf("body = %s, want code %q, a message and attempts []", body, code)
	}
}

// TestSignatureTampering changes each character of a valid signature, to
// every other URL-safe character, and expects 403 for every one.
func TestSignatureTampering(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	if err := s.WriteBlob(context.Background(), "c/blob", strings.NewReader("data"), "", true); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	signed := mustSign(t, s, "c/blob", timeFar)
	u, err := url.Parse(signed)
	if err != nil {
		t.Fatal(err)
	}
	sig := u.Query().Get("sig")
	if len(sig) != 43 {
		t.Fatalf("sig %q: %d characters, want 43", sig, len(sig))
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~"
	get := func(sig string) *http.Response {
		q := u.Query()
		q.Set("sig", sig)
		resp, err := http.Get(srv.URL + u.Path + "?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := get(sig); resp.StatusCode != 200 {
		t.Fatalf("untouched signature: status %d, want 200", resp.StatusCode)
	}
	for i := range len(sig) {
		for _, c := range []byte(alphabet) {
			if c == sig[i] {
				continue
			}
			bad := sig[:i] + string(c) + sig[i+1:]
			if resp := get(bad); resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Gateway-Error") != "InvalidSignature" {
				t.Errorf("sig[%d] = %q: status %d %s, want 403 InvalidSignature", i, c, resp.StatusCode, resp.Header.Get("X-Gateway-Error"))
			}
		}
	}
	for _, bad := range []string{"", sig[1:], sig + "A", sig + "=", strings.ToUpper(sig)} {
		if resp := get(bad); resp.StatusCode != http.StatusForbidden {
			t.Errorf("sig %q: status %d, want 403", bad, resp.StatusCode)
		}
	}
	// One character percent-encoded decodes to the same signature, but is
	// not the signature as written: refused.
	raw := func(query string) *http.Response {
		resp, err := http.Get(srv.URL + u.Path + "?" + query)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	se := u.Query().Get("se")
	for _, i := range []int{0, len(sig) / 2, len(sig) - 1} {
		enc := sig[:i] + fmt.Sprintf("%%%02X", sig[i]) + sig[i+1:]
		if resp := raw("se=" + se + "&sig=" + enc); resp.StatusCode != http.StatusForbidden {
			t.Errorf("sig with byte %d percent-encoded (%s): status %d, want 403", i, enc, resp.StatusCode)
		}
	}
	for _, q := range []string{"se=" + fmt.Sprintf("%%%02X", se[0]) + se[1:] + "&sig=" + sig, "s%65=" + se + "&sig=" + sig, "se=" + se + "&s%69g=" + sig} {
		if resp := raw(q); resp.StatusCode != http.StatusForbidden {
			t.Errorf("query %s: status %d, want 403", q, resp.StatusCode)
		}
	}
	if resp := raw("se=" + se + "&sig=" + sig + "&x=1"); resp.StatusCode != 200 {
		t.Errorf("raw query as signed, plus an unrelated parameter: status %d, want 200", resp.StatusCode)
	}
}

func TestSignURLSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	signed := mustSign(t, mustOpen(t, dir), "c/blob", timeFar)
	u, _ := url.Parse(signed)
	if key, d := mustOpen(t, dir).verify(u.Path, u.RawQuery, time.Now()); d != nil || key != "c/blob" {
		t.Errorf("verify after reopen = %q, %+v; want c/blob", key, d)
	}
}

// FuzzVerify feeds arbitrary URLs to the verifier: it must never panic, and
// it may accept only what SignURL would have produced for the key.
func FuzzVerify(f *testing.F) {
	s := mustOpen(f, f.TempDir())
	now := time.Unix(1_700_000_000, 0)
	for _, key := range []string{"c/blob", "results/x y/ü", "a/b/c/d"} {
		u, _ := s.SignURL(context.Background(), key, now.Add(time.Hour))
		f.Add(u)
	}
	f.Add("/_gateway/blobs/c/blob?se=99999999999&sig=")
	f.Add("/_gateway/blobs/../x?se=1;2&sig=%zz")
	f.Add("/other")
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		key, d := s.verify(u.Path, u.RawQuery, now)
		if d != nil {
			if d.status != 403 && d.status != 404 || d.code == "" {
				t.Fatalf("denial %+v", d)
			}
			return
		}
		if err := checkKey(key); err != nil {
			t.Fatalf("accepted an invalid key: %v", err)
		}
		se, err := parseExpiry(u.Query().Get("se"))
		if err != nil || !time.Unix(se, 0).After(now) {
			t.Fatalf("accepted se %q at %v", u.Query().Get("se"), now)
		}
		if u.Query().Get("sig") != s.sign(key, se) {
			t.Fatalf("accepted a signature SignURL does not make")
		}
	})
}

// FuzzSignRoundTrip checks that every URL SignURL makes verifies for its key
// until its expiry, and not after.
func FuzzSignRoundTrip(f *testing.F) {
	s := mustOpen(f, f.TempDir())
	f.Add("c/blob", int64(1_700_000_000))
	f.Add("results/ü ?#&%2F/data", int64(1))
	f.Add("a/b", int64(1<<62))
	f.Fuzz(func(t *testing.T, key string, se int64) {
		signed, err := s.SignURL(context.Background(), key, time.Unix(se, 0))
		if checkKey(key) != nil || se < 0 {
			if err == nil {
				t.Fatalf("SignURL(%q, %d) = %q, want an error", key, se, signed)
			}
			return
		}
		if err != nil {
			t.Fatalf("SignURL(%q, %d): %v", key, se, err)
		}
		u, err := url.Parse(signed)
		if err != nil {
			t.Fatalf("SignURL made %q: %v", signed, err)
		}
		got, d := s.verify(u.Path, u.RawQuery, time.Unix(se-1, 0))
		if d != nil || got != key {
			t.Fatalf("verify(%q) before expiry = %q, %+v; want %q", signed, got, d, key)
		}
		if _, d := s.verify(u.Path, u.RawQuery, time.Unix(se, 0)); d == nil || d.code != codeURLExpired {
			t.Fatalf("verify(%q) at expiry = %+v, want URLExpired", signed, d)
		}
	})
}

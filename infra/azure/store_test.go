package azure_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"fngateway/core/async"
	"fngateway/infra/azure"
	"fngateway/internal/emulators"
	"fngateway/internal/testutil"
)

// TestStore runs what is specific to the Blob Store against one Azurite
// (key rules, SAS URLs); the semantics core relies on are checked by
// core/async/porttest in TestStorePort. Subtests use their own containers and
// run in parallel.
func TestStore(t *testing.T) {
	t.Parallel()
	az := emulators.StartAzurite(t)
	store := newAccount(t, az).Store()

	t.Run("InvalidKey", func(t *testing.T) {
		t.Parallel()
		ctx := testutil.Context(t)
		for _, key := range []string{"", "nocontainer", "UPPER/blob", "ab/blob", "good-container/", "bad--name/blob"} {
			_, _, err := store.Get(ctx, key)
			if err == nil || errors.Is(err, async.ErrNotFound) {
				t.Errorf("Get(%q) error = %v, want an invalid-key error", key, err)
			}
			if _, err := store.Put(ctx, key, nil, ""); err == nil || !strings.Contains(err.Error(), "invalid key") {
				t.Errorf("Put(%q) error = %v, want an invalid-key error", key, err)
			}
		}
	})

	t.Run("SignURL", func(t *testing.T) {
		t.Parallel()
		testSignURL(t, store, http.DefaultClient)
	})
}

// testSignURL checks SignURL's URLs with plain HTTP requests through
// client: they read their one blob and nothing else, and a changed
// signature is refused.
func testSignURL(t *testing.T, store *azure.Store, client *http.Client) {
	ctx := testutil.Context(t)
	c := testutil.UniqueName("sas")
	keyA, keyB := c+"/req/a/data", c+"/req/b/data"
	bodyA := []byte("result body A \x00\xff")
	for key, body := range map[string][]byte{keyA: bodyA, keyB: []byte("B")} {
		if err := store.WriteBlob(ctx, key, bytes.NewReader(body), "application/x-test", true); err != nil {
			t.Fatalf("WriteBlob(%s): %v", key, err)
		}
	}
	signedA, err := store.SignURL(ctx, keyA, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatalf("SignURL: %v", err)
	}
	u, err := url.Parse(signedA)
	if err != nil || !u.IsAbs() {
		t.Fatalf("SignURL = %q: want an absolute URL (parse error %v)", signedA, err)
	}
	signedB, err := store.SignURL(ctx, keyB, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatalf("SignURL: %v", err)
	}
	uB, _ := url.Parse(signedB)

	tampered := *u
	q := tampered.Query()
	sig := []byte(q.Get("sig"))
	if len(sig) == 0 {
		t.Fatalf("SignURL = %q: no sig parameter", signedA)
	}
	if sig[0] == 'A' { // one character changed, still base64
		sig[0] = 'B'
	} else {
		sig[0] = 'A'
	}
	q.Set("sig", string(sig))
	tampered.RawQuery = q.Encode()

	aForB := *u
	aForB.Path, aForB.RawPath = uB.Path, uB.RawPath

	tests := []struct {
		name, method, url string
		wantStatus        int
		wantBody          []byte
	}{
		{"read", http.MethodGet, signedA, http.StatusOK, bodyA},
		{"write refused", http.MethodPut, signedA, http.StatusForbidden, nil},
		{"delete refused", http.MethodDelete, signedA, http.StatusForbidden, nil},
		{"tampered signature", http.MethodGet, tampered.String(), http.StatusForbidden, nil},
		{"signature of A for B", http.MethodGet, aForB.String(), http.StatusForbidden, nil},
		{"no signature", http.MethodGet, (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String(), 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(ctx, tt.method, tt.url, strings.NewReader("overwrite"))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("x-ms-blob-type", "BlockBlob")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", tt.method, err)
			}
			defer resp.Body.Close()
			got, _ := io.ReadAll(resp.Body)
			if tt.wantStatus == 0 { // any refusal
				if resp.StatusCode < 400 {
					t.Fatalf("%s unsigned: status %d, want a refusal", tt.method, resp.StatusCode)
				}
				return
			}
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("%s: status %d, want %d; body %.300s", tt.method, resp.StatusCode, tt.wantStatus, got)
			}
			if tt.wantBody != nil && !bytes.Equal(got, tt.wantBody) {
				t.Fatalf("%s: body %q, want %q", tt.method, got, tt.wantBody)
			}
		})
	}

	// The refused writes left A alone.
	data, _, err := store.Get(ctx, keyA)
	if err != nil || !bytes.Equal(data, bodyA) {
		t.Fatalf("after refused writes Get = %q, %v; want %q", data, err, bodyA)
	}
	if _, err := store.SignURL(ctx, keyA, time.Now().Add(-time.Second)); err == nil {
		t.Fatal("SignURL with a past expiry: no error")
	}
}

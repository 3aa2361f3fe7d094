package azure_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"fngateway/core"
	"fngateway/infra/azure"
	"fngateway/internal/emulators"
)

// TestStore runs the Store against one Azurite; subtests use their own
// containers and run in parallel.
func TestStore(t *testing.T) {
	t.Parallel()
	az := emulators.StartAzurite(t)
	store := newAccount(t, az).Store()

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		c := uniqueName("nf")
		if _, err := store.Put(ctx, c+"/present", []byte("x"), ""); err != nil {
			t.Fatalf("Put: %v", err)
		}
		for _, key := range []string{
			uniqueName("nocontainer") + "/record.json", // container missing
			c + "/absent.json",                         // blob missing
		} {
			if _, _, err := store.Get(ctx, key); !errors.Is(err, core.ErrNotFound) {
				t.Errorf("Get(%q) error = %v, want ErrNotFound", key, err)
			}
			if _, err := store.OpenBlob(ctx, key); !errors.Is(err, core.ErrNotFound) {
				t.Errorf("OpenBlob(%q) error = %v, want ErrNotFound", key, err)
			}
		}
	})

	t.Run("PutConditions", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		key := uniqueName("put") + "/records/a.json" // container made on demand
		v1, err := store.Put(ctx, key, []byte(`{"n":1}`), "")
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		if _, err := store.Put(ctx, key, []byte(`{"n":9}`), ""); !errors.Is(err, core.ErrConflict) {
			t.Fatalf("create again: error = %v, want ErrConflict", err)
		}
		v2, err := store.Put(ctx, key, []byte(`{"n":2}`), v1)
		if err != nil {
			t.Fatalf("update at v1: %v", err)
		}
		if v2 == v1 {
			t.Fatalf("update: version stayed %s", v1)
		}
		if _, err := store.Put(ctx, key, []byte(`{"n":9}`), v1); !errors.Is(err, core.ErrConflict) {
			t.Fatalf("update at stale v1: error = %v, want ErrConflict", err)
		}
		data, v, err := store.Get(ctx, key)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if got, want := string(data), `{"n":2}`; got != want || v != v2 {
			t.Fatalf("Get = %q at %s, want %q at %s", got, v, want, v2)
		}
		if _, err := store.Put(ctx, uniqueName("gone")+"/a.json", []byte("x"), v2); !errors.Is(err, core.ErrConflict) {
			t.Fatalf("update in a missing container: error = %v, want ErrConflict", err)
		}
	})

	t.Run("PutRace", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		key := uniqueName("race") + "/record.json"
		v0, err := store.Put(ctx, key, []byte("v0"), "")
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		const writers = 20
		var wg sync.WaitGroup
		errs := make([]error, writers)
		versions := make([]string, writers)
		for i := range writers {
			wg.Go(func() {
				versions[i], errs[i] = store.Put(ctx, key, fmt.Appendf(nil, "writer %d", i), v0)
			})
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("writers %d and %d both won", winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, core.ErrConflict):
				t.Fatalf("writer %d: error = %v, want nil or ErrConflict", i, err)
			}
		}
		if winner < 0 {
			t.Fatal("no writer won")
		}
		data, v, err := store.Get(ctx, key)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if got, want := string(data), fmt.Sprintf("writer %d", winner); got != want || v != versions[winner] {
			t.Fatalf("Get = %q at %s, want %q at %s", got, v, want, versions[winner])
		}
	})

	t.Run("BlobStream", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		key := uniqueName("blobs") + "/results/data"
		const size = 16 << 20
		if err := store.WriteBlob(ctx, key, generated(1, size), "application/octet-stream", true); err != nil {
			t.Fatalf("WriteBlob: %v", err)
		}
		err := store.WriteBlob(ctx, key, generated(2, size), "application/octet-stream", true)
		if !errors.Is(err, core.ErrConflict) {
			t.Fatalf("WriteBlob create again: error = %v, want ErrConflict", err)
		}
		wantSum, _ := digest(t, generated(1, size))
		rc, err := store.OpenBlob(ctx, key)
		if err != nil {
			t.Fatalf("OpenBlob: %v", err)
		}
		gotSum, n := digest(t, rc)
		_ = rc.Close()
		if n != size || gotSum != wantSum {
			t.Fatalf("read back %d bytes (sha256 %x), want %d bytes (sha256 %x): the failed create changed it or the stream broke", n, gotSum[:6], size, wantSum[:6])
		}

		// Without create, WriteBlob replaces.
		if err := store.WriteBlob(ctx, key, strings.NewReader("small"), "text/plain", false); err != nil {
			t.Fatalf("WriteBlob replace: %v", err)
		}
		rc, err = store.OpenBlob(ctx, key)
		if err != nil {
			t.Fatalf("OpenBlob: %v", err)
		}
		defer rc.Close()
		if got, _ := io.ReadAll(rc); string(got) != "small" {
			t.Fatalf("after replace read %q, want %q", got, "small")
		}
	})

	t.Run("InvalidKey", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		for _, key := range []string{"", "nocontainer", "UPPER/blob", "ab/blob", "good-container/", "bad--name/blob"} {
			_, _, err := store.Get(ctx, key)
			if err == nil || errors.Is(err, core.ErrNotFound) {
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
	ctx := testContext(t)
	c := uniqueName("sas")
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

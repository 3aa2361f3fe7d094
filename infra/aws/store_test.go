package aws

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"fngateway/core/async"
	"fngateway/internal/emulators"
	"fngateway/internal/testutil"
)

// TestStore runs the Store against one versitygw; subtests use buckets or
// containers of their own and run in parallel. What every Store must do
// (not found, conditional writes and their races, blobs created once,
// whole or not at all) is core/async/porttest's, run by TestStorePort; here is
// what is S3's own: missing buckets, ETags, multipart uploads, prefixes.
func TestStore(t *testing.T) {
	t.Parallel()
	v := emulators.StartVersitygw(t)
	store := newStoreOn(t, v, "s3://"+testutil.UniqueName("store"))

	t.Run("MissingBucket", func(t *testing.T) {
		t.Parallel()
		ctx := testutil.Context(t)
		missing := newStoreOn(t, v, "s3://"+testutil.UniqueName("nobucket"))
		if _, _, err := missing.Get(ctx, "c/record.json"); !errors.Is(err, async.ErrNotFound) {
			t.Errorf("Get in a missing bucket: error = %v, want ErrNotFound", err)
		}
		if _, err := missing.OpenBlob(ctx, "c/record.json"); !errors.Is(err, async.ErrNotFound) {
			t.Errorf("OpenBlob in a missing bucket: error = %v, want ErrNotFound", err)
		}
		v1, err := store.Put(ctx, testutil.UniqueName("c")+"/a.json", []byte("x"), "")
		if err != nil {
			t.Fatalf("Put: %v", err)
		}
		if _, err := missing.Put(ctx, "c/a.json", []byte("x"), v1); !errors.Is(err, async.ErrConflict) {
			t.Errorf("update in a missing bucket: error = %v, want ErrConflict", err)
		}
	})

	t.Run("SameBytesSameVersion", func(t *testing.T) {
		t.Parallel()
		ctx := testutil.Context(t)
		// S3's version of an object is the MD5 of its bytes: writing the
		// same bytes again keeps the version, so a second writer holding
		// it still succeeds, rightly, as the object holds what it read.
		key := testutil.UniqueName("same") + "/r.json"
		v1, err := store.Put(ctx, key, []byte("same"), "")
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		v2, err := store.Put(ctx, key, []byte("same"), v1)
		if err != nil {
			t.Fatalf("rewrite: %v", err)
		}
		if v2 != v1 {
			t.Logf("rewriting the same bytes changed the version (%s → %s)", v1, v2)
		}
		v3, err := store.Put(ctx, key, []byte("other"), v1)
		if v2 == v1 && err != nil {
			t.Fatalf("update at %s, still the version: %v", v1, err)
		}
		if v2 != v1 && !errors.Is(err, async.ErrConflict) {
			t.Fatalf("update at the replaced %s: error = %v, want ErrConflict", v1, err)
		}
		if err == nil && v3 == v1 {
			t.Fatalf("update to other bytes kept version %s", v1)
		}
	})

	t.Run("BlobRoundTrip", func(t *testing.T) {
		t.Parallel()
		ctx := testutil.Context(t)
		small := newStoreOn(t, v, "s3://"+testutil.UniqueName("blobs"))
		small.PartSize = minPartSize
		for _, size := range []int64{0, 1, minPartSize - 1, minPartSize, 2*minPartSize + 12345} {
			key := testutil.UniqueName("blob") + "/data"
			if err := small.WriteBlob(ctx, key, generated(uint64(size), size), "application/x-test", true); err != nil {
				t.Fatalf("WriteBlob(%d bytes): %v", size, err)
			}
			r, err := small.OpenBlob(ctx, key)
			if err != nil {
				t.Fatalf("OpenBlob(%d bytes): %v", size, err)
			}
			got, n := digest(t, r)
			_ = r.Close()
			want, _ := digest(t, generated(uint64(size), size))
			if n != size || got != want {
				t.Errorf("blob of %d bytes read back as %d bytes, digest equal %v", size, n, got == want)
			}
		}
	})

	t.Run("BlobCreateOnce", func(t *testing.T) {
		t.Parallel()
		ctx := testutil.Context(t)
		s := newStoreOn(t, v, "s3://"+testutil.UniqueName("once"))
		s.PartSize = minPartSize
		for _, size := range []int64{10, 2*minPartSize + 1} { // one PutObject; a multipart upload
			key := testutil.UniqueName("once") + "/data"
			if err := s.WriteBlob(ctx, key, generated(1, size), "", true); err != nil {
				t.Fatalf("first write of %d bytes: %v", size, err)
			}
			if err := s.WriteBlob(ctx, key, generated(2, size), "", true); !errors.Is(err, async.ErrConflict) {
				t.Fatalf("second create of %d bytes: error = %v, want ErrConflict", size, err)
			}
			checkBlob(t, s, key, 1, size)
			if err := s.WriteBlob(ctx, key, generated(3, size), "", false); err != nil {
				t.Fatalf("replace of %d bytes: %v", size, err)
			}
			checkBlob(t, s, key, 3, size)
		}
		checkNoUploads(t, s)
	})

	t.Run("BlobFailedStream", func(t *testing.T) {
		t.Parallel()
		ctx := testutil.Context(t)
		s := newStoreOn(t, v, "s3://"+testutil.UniqueName("fail"))
		s.PartSize = minPartSize
		key := testutil.UniqueName("fail") + "/data"
		boom := errors.New("client went away")
		r := io.MultiReader(generated(4, 2*minPartSize+7), errReader{boom})
		if err := s.WriteBlob(ctx, key, r, "", true); !errors.Is(err, boom) {
			t.Fatalf("WriteBlob of a failing stream: error = %v, want %v", err, boom)
		}
		if _, err := s.OpenBlob(ctx, key); !errors.Is(err, async.ErrNotFound) {
			t.Fatalf("after a failed write, OpenBlob error = %v, want ErrNotFound (no partial blob)", err)
		}
		checkNoUploads(t, s)
	})

	t.Run("Prefix", func(t *testing.T) {
		t.Parallel()
		ctx := testutil.Context(t)
		bucket := testutil.UniqueName("prefix")
		prefixed := newStoreOn(t, v, "s3://"+bucket+"/pre/fix/")
		if _, err := prefixed.Put(ctx, "c/k.json", []byte("p"), ""); err != nil {
			t.Fatalf("Put: %v", err)
		}
		whole := newStoreOn(t, v, "s3://"+bucket)
		data, _, err := whole.Get(ctx, "pre/fix/c/k.json")
		if err != nil || string(data) != "p" {
			t.Fatalf("object under the prefix: %q, %v; want %q", data, err, "p")
		}
		if _, _, err := whole.Get(ctx, "c/k.json"); !errors.Is(err, async.ErrNotFound) {
			t.Fatalf("object outside the prefix: error = %v, want ErrNotFound", err)
		}
	})

	t.Run("InvalidKeys", func(t *testing.T) {
		t.Parallel()
		ctx := testutil.Context(t)
		for _, key := range []string{"", "nocontainer", "/name", "c/", "c//x", "c/../x", "c/./x", "c/\xff", "c/" + strings.Repeat("x", maxKeyBytes)} {
			if _, err := store.Put(ctx, key, []byte("x"), ""); err == nil || errors.Is(err, async.ErrConflict) {
				t.Errorf("Put(%q): error = %v, want an invalid key error", key, err)
			}
			if _, err := store.SignURL(ctx, key, time.Now().Add(time.Hour)); err == nil {
				t.Errorf("SignURL(%q): no error", key)
			}
		}
	})
}

// TestSignURL fetches presigned URLs from versitygw with a plain client.
func TestSignURL(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := testutil.Context(t)
	c := testutil.UniqueName("sign")
	size := int64(3<<20 + 17)
	if err := s.WriteBlob(ctx, c+"/a/data", generated(7, size), "application/x-result", true); err != nil {
		t.Fatalf("WriteBlob: %v", err)
	}
	if err := s.WriteBlob(ctx, c+"/b/data", strings.NewReader("other"), "", true); err != nil {
		t.Fatalf("WriteBlob: %v", err)
	}
	expiry := time.Now().Add(time.Hour)
	signed, err := s.SignURL(ctx, c+"/a/data", expiry)
	if err != nil {
		t.Fatalf("SignURL: %v", err)
	}
	get := func(u string) (int, []byte, http.Header) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("GET %s: read: %v", u, err)
		}
		return resp.StatusCode, body, resp.Header
	}

	t.Run("ExactBytes", func(t *testing.T) {
		status, body, h := get(signed)
		if status != http.StatusOK {
			t.Fatalf("GET presigned: %d %s", status, body)
		}
		got, n := digest(t, bytes.NewReader(body))
		want, _ := digest(t, generated(7, size))
		if n != size || got != want {
			t.Fatalf("GET presigned: %d bytes, digest equal %v; want %d bytes", n, got == want, size)
		}
		if ct := h.Get("Content-Type"); ct != "application/x-result" {
			t.Errorf("Content-Type = %q, want application/x-result", ct)
		}
	})

	t.Run("Lifetime", func(t *testing.T) {
		u, _ := url.Parse(signed)
		q := u.Query()
		if got, want := q.Get("X-Amz-Expires"), "3599"; got != want && got != "3600" {
			t.Errorf("X-Amz-Expires = %q, want about %s", got, want)
		}
		far, err := s.SignURL(ctx, c+"/a/data", time.Now().Add(30*24*time.Hour))
		if err != nil {
			t.Fatalf("SignURL 30 days: %v", err)
		}
		fu, _ := url.Parse(far)
		if got := fu.Query().Get("X-Amz-Expires"); got != "604800" && got != "604799" {
			t.Errorf("30-day expiry: X-Amz-Expires = %q, want 604800 (7 days, the most)", got)
		}
		if _, err := s.SignURL(ctx, c+"/a/data", time.Now().Add(-time.Second)); err == nil {
			t.Error("SignURL with a past expiry: no error")
		}
	})

	t.Run("Tampered", func(t *testing.T) {
		u, _ := url.Parse(signed)
		q := u.Query()
		sig := q.Get("X-Amz-Signature")
		if sig == "" {
			t.Fatalf("no X-Amz-Signature in %s", signed)
		}
		flip := "0"
		if sig[0] == '0' {
			flip = "1"
		}
		q.Set("X-Amz-Signature", flip+sig[1:])
		u.RawQuery = q.Encode()
		if status, body, _ := get(u.String()); status != http.StatusForbidden {
			t.Errorf("tampered signature: %d %s, want 403", status, body)
		}
		// The signature is for its one object only.
		other, _ := url.Parse(signed)
		other.Path = strings.Replace(other.Path, "/a/data", "/b/data", 1)
		other.RawPath = ""
		if status, body, _ := get(other.String()); status != http.StatusForbidden {
			t.Errorf("signature moved to another object: %d %s, want 403", status, body)
		}
		// Nor can its expiry be stretched.
		longer, _ := url.Parse(signed)
		lq := longer.Query()
		lq.Set("X-Amz-Expires", "7200")
		longer.RawQuery = lq.Encode()
		if status, body, _ := get(longer.String()); status != http.StatusForbidden {
			t.Errorf("stretched expiry: %d %s, want 403", status, body)
		}
	})

	t.Run("Expires", func(t *testing.T) {
		// A short-lived URL works until its expiry: the GET is judged only
		// when it ended two seconds before the lifetime's whole seconds. S3
		// counts in whole seconds: X-Amz-Expires is the lifetime left at the
		// signing cut to whole seconds (up to a second less), counted from an
		// X-Amz-Date cut to the second (up to a second before the signing).
		// A loaded machine that took longer tries again with twice the
		// lifetime, so no load makes it fail wrongly.
		var short string
		for life := 3 * time.Second; ; life *= 2 {
			if life > time.Minute {
				t.Fatal("no GET ended within a minute of its URL's signing")
			}
			signed := time.Now()
			u, err := s.SignURL(ctx, c+"/b/data", signed.Add(life))
			if err != nil {
				t.Fatalf("SignURL: %v", err)
			}
			status, body, _ := get(u)
			if time.Since(signed) > life.Truncate(time.Second)-2*time.Second {
				continue
			}
			if status != http.StatusOK || string(body) != "other" {
				t.Fatalf("GET before expiry: %d %q", status, body)
			}
			short = u
			break
		}
		testutil.Eventually(t, 10*time.Second+time.Minute, "a short-lived URL refused", func() bool {
			status, _, _ := get(short)
			return status == http.StatusForbidden
		})
	})
}

// TestStoreCreatesBucket writes first with each operation that can meet a
// missing bucket.
func TestStoreCreatesBucket(t *testing.T) {
	t.Parallel()
	v := emulators.StartVersitygw(t)
	ctx := testutil.Context(t)
	for _, tc := range []struct {
		name  string
		write func(s *Store) error
	}{
		{"Put", func(s *Store) error { _, err := s.Put(ctx, "c/k", []byte("x"), ""); return err }},
		{"WriteBlob", func(s *Store) error { return s.WriteBlob(ctx, "c/k", strings.NewReader("x"), "", true) }},
		{"WriteBlobMultipart", func(s *Store) error {
			return s.WriteBlob(ctx, "c/k", generated(1, minPartSize+1), "", true)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStoreOn(t, v, "s3://"+testutil.UniqueName("new"))
			s.PartSize = minPartSize
			if err := tc.write(s); err != nil {
				t.Fatalf("first write to a missing bucket: %v", err)
			}
			r, err := s.OpenBlob(ctx, "c/k")
			if err != nil {
				t.Fatalf("OpenBlob: %v", err)
			}
			_ = r.Close()
		})
	}
}

// TestStoreDown: an unreachable server fails fast with an error that is
// neither ErrNotFound nor ErrConflict.
func TestStoreDown(t *testing.T) {
	t.Parallel()
	v := emulators.StartVersitygw(t)
	s := newStoreOn(t, v, "s3://"+testutil.UniqueName("down"))
	v.Stop()
	ctx := testutil.Context(t)
	start := time.Now()
	_, err := s.Put(ctx, "c/k", []byte("x"), "")
	if err == nil || errors.Is(err, async.ErrConflict) || errors.Is(err, async.ErrNotFound) {
		t.Fatalf("Put with the server down: error = %v, want a plain failure", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Put with the server down took %v, want about a second", d)
	}
	if _, _, err := s.Get(ctx, "c/k"); err == nil || errors.Is(err, async.ErrNotFound) {
		t.Fatalf("Get with the server down: error = %v, want a plain failure", err)
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// checkBlob checks that the blob at key holds generated(seed, size).
func checkBlob(tb testing.TB, s *Store, key string, seed uint64, size int64) {
	tb.Helper()
	r, err := s.OpenBlob(testutil.Context(tb), key)
	if err != nil {
		tb.Fatalf("OpenBlob(%s): %v", key, err)
	}
	defer r.Close()
	got, n := digest(tb, r)
	want, _ := digest(tb, generated(seed, size))
	if n != size || got != want {
		tb.Fatalf("blob %s: %d bytes, want %d bytes of seed %d (digest equal %v)", key, n, size, seed, got == want)
	}
}

// checkNoUploads checks that no multipart upload was left behind.
func checkNoUploads(tb testing.TB, s *Store) {
	tb.Helper()
	out, err := s.client.ListMultipartUploads(context.WithoutCancel(testutil.Context(tb)), &s3.ListMultipartUploadsInput{Bucket: &s.bucket})
	if err != nil {
		tb.Fatalf("ListMultipartUploads: %v", err)
	}
	if len(out.Uploads) != 0 {
		tb.Fatalf("%d multipart uploads left behind", len(out.Uploads))
	}
}

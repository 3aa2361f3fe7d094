package filestore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"fngateway/core/async"
)

func TestWriteBlob(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, t.TempDir())
	const key = "results/id1/data"
	if _, err := s.OpenBlob(ctx, key); !errors.Is(err, async.ErrNotFound) {
		t.Fatalf("OpenBlob missing: err = %v, want ErrNotFound", err)
	}
	tests := []struct {
		name   string
		body   string
		create bool
		want   error
		stored string
	}{
		{"create", "first", true, nil, "first"},
		{"create again", "second", true, async.ErrConflict, "first"},
		{"replace", "third", false, nil, "third"},
		{"create after replace", "fourth", true, async.ErrConflict, "third"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.WriteBlob(ctx, key, strings.NewReader(tt.body), "text/plain", tt.create)
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Fatalf("WriteBlob = %v, want %v", err, tt.want)
			}
			if got := readBlob(t, s, key); got != tt.stored {
				t.Errorf("blob = %q, want %q", got, tt.stored)
			}
		})
	}
	b, err := s.openBlob(key)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got, want := b.contentType, "text/plain"; got != want {
		t.Errorf("content type = %q, want %q", got, want)
	}
	// A blob is an object too: Get sees its bytes and version.
	data, v, err := s.Get(ctx, key)
	if err != nil || string(data) != "third" || v != b.version {
		t.Errorf("Get of a blob = %q, %s, %v; want %q, %s", data, v, err, "third", b.version)
	}
}

// failingReader returns err after n bytes.
type failingReader struct {
	n   int
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, f.err
	}
	k := min(len(p), f.n)
	clear(p[:k])
	f.n -= k
	return k, nil
}

func TestWriteBlobWholeOrNothing(t *testing.T) {
	errBroken := errors.New("client went away")
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		r    io.Reader
		want error
	}{
		{"reader fails", context.Background(), &failingReader{n: 1 << 20, err: errBroken}, errBroken},
		{"context canceled", canceled, strings.NewReader("x"), context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustOpen(t, t.TempDir())
			for _, create := range []bool{true, false} {
				if err := s.WriteBlob(tt.ctx, "c/partial", tt.r, "", create); !errors.Is(err, tt.want) {
					t.Errorf("WriteBlob(create %v) = %v, want %v", create, err, tt.want)
				}
			}
			if _, err := s.OpenBlob(context.Background(), "c/partial"); !errors.Is(err, async.ErrNotFound) {
				t.Errorf("OpenBlob after a failed write: err = %v, want ErrNotFound", err)
			}
			left, _ := filepath.Glob(filepath.Join(s.objects, "c", "*"))
			if len(left) != 0 {
				t.Errorf("files left behind: %v", left)
			}
		})
	}
}

func TestWriteBlobLarge(t *testing.T) {
	const size = 32 << 20
	ctx := context.Background()
	s := mustOpen(t, t.TempDir())
	src := io.LimitReader(rand.NewChaCha8([32]byte{1}), size)
	sum := sha256.New()

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := s.WriteBlob(ctx, "big/blob", io.TeeReader(src, sum), "application/x-test", true); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(4<<20); got > limit {
		t.Errorf("WriteBlob of %d bytes allocated %d bytes, want under %d (streaming)", size, got, limit)
	}

	rc, err := s.OpenBlob(ctx, "big/blob")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	back := sha256.New()
	n, err := io.Copy(back, rc)
	if err != nil {
		t.Fatal(err)
	}
	if n != size || !bytes.Equal(back.Sum(nil), sum.Sum(nil)) {
		t.Errorf("read back %d bytes (hash match %v), want %d identical bytes", n, bytes.Equal(back.Sum(nil), sum.Sum(nil)), size)
	}
}

// readBlob returns the whole blob at key.
func readBlob(tb testing.TB, s *Store, key string) string {
	tb.Helper()
	rc, err := s.OpenBlob(context.Background(), key)
	if err != nil {
		tb.Fatalf("OpenBlob(%q): %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

func TestBlobFilePermissions(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	if err := s.WriteBlob(context.Background(), "c/p", strings.NewReader("secret"), "", true); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(s.objects, "c", "p"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got&0o077 != 0 {
		t.Errorf("blob mode = %v, want no group or other access", got)
	}
}

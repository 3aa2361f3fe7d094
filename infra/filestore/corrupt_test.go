package filestore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fngateway/core/async"
)

// TestCorruptObjects: a record or blob file damaged while the store runs is
// reported with async.ErrCorruptRecord, the sentinel core branches on (before
// it was the store's own "malformed record", which core did not know, so a
// status URI answered 503 forever), and a symlink is never followed, not
// even to a valid record of the store.
func TestCorruptObjects(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		damage func(t *testing.T, s *Store, path string)
	}{
		{"random bytes", func(t *testing.T, _ *Store, path string) { writeFile(t, path, []byte("\x8f\x00garbage\xff\n\n")) }},
		{"emptied", func(t *testing.T, _ *Store, path string) { writeFile(t, path, nil) }},
		{"symlink to a valid record", func(t *testing.T, s *Store, path string) {
			if _, err := s.Put(ctx, "c/other", []byte("secret"), ""); err != nil && !errors.Is(err, async.ErrConflict) {
				t.Fatal(err)
			}
			os.Remove(path)
			if err := os.Symlink(s.path("c/other"), path); err != nil {
				t.Fatal(err)
			}
		}},
		{"symlink outside the store", func(t *testing.T, _ *Store, path string) {
			os.Remove(path)
			if err := os.Symlink("/dev/zero", path); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustOpen(t, t.TempDir())
			if _, err := s.Put(ctx, "c/rec", []byte("{}"), ""); err != nil {
				t.Fatal(err)
			}
			if err := s.WriteBlob(ctx, "c/blob", strings.NewReader("body"), "text/plain", true); err != nil {
				t.Fatal(err)
			}
			tt.damage(t, s, s.path("c/rec"))
			tt.damage(t, s, s.path("c/blob"))

			if _, _, err := s.Get(ctx, "c/rec"); !errors.Is(err, async.ErrCorruptRecord) {
				t.Errorf("Get = %v; want async.ErrCorruptRecord", err)
			}
			if _, err := s.Put(ctx, "c/rec", []byte("{}"), "1-x"); !errors.Is(err, async.ErrCorruptRecord) {
				t.Errorf("Put over it = %v; want async.ErrCorruptRecord", err)
			}
			if rc, err := s.OpenBlob(ctx, "c/blob"); !errors.Is(err, async.ErrCorruptRecord) {
				if rc != nil {
					rc.Close()
				}
				t.Errorf("OpenBlob = %v; want async.ErrCorruptRecord", err)
			}
			// Replacing a damaged blob writes the store's own file; a
			// symlink's target is left alone.
			if err := s.WriteBlob(ctx, "c/blob", strings.NewReader("new"), "text/plain", false); err != nil {
				t.Fatalf("WriteBlob over it: %v", err)
			}
			rc, err := s.OpenBlob(ctx, "c/blob")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(rc)
			rc.Close()
			if string(b) != "new" {
				t.Errorf("blob = %q; want new", b)
			}
			if fi, err := os.Lstat(s.path("c/blob")); err != nil || !fi.Mode().IsRegular() {
				t.Errorf("the blob is not a regular file after the write: %v", err)
			}
		})
	}
}

// TestCorruptObjectSignedURL: a blob replaced by a symlink is not served
// through its signed URL: the link's target is never read.
func TestCorruptObjectSignedURL(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, t.TempDir())
	if err := s.WriteBlob(ctx, "c/blob", strings.NewReader("body"), "text/plain", true); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "target")
	secret := []byte("must not be served")
	writeFile(t, target, secret)
	os.Remove(s.path("c/blob"))
	if err := os.Symlink(target, s.path("c/blob")); err != nil {
		t.Fatal(err)
	}
	_, err := s.openBlob("c/blob")
	if !errors.Is(err, async.ErrCorruptRecord) {
		t.Fatalf("openBlob = %v; want async.ErrCorruptRecord", err)
	}
	if bytes.Contains([]byte(err.Error()), secret) {
		t.Errorf("the error shows the target's content: %v", err)
	}
}

package filestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"fngateway/core/async"
)

// maxContentType bounds the content type stored with a blob.
const maxContentType = 1024

// WriteBlob streams r into the blob at key, holding only a small buffer in
// memory, and stores contentType with it. The blob appears whole or not at
// all. With create set it fails with an error wrapping async.ErrConflict if
// the blob exists; otherwise it replaces it. A blob gets a version like a
// record, so Get and Put work on it too.
func (s *Store) WriteBlob(ctx context.Context, key string, r io.Reader, contentType string, create bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkKey(key); err != nil {
		return fmt.Errorf("write blob: %w", err)
	}
	if len(contentType) > maxContentType {
		return fmt.Errorf("write blob %s: content type longer than %d bytes", key, maxContentType)
	}
	path := s.path(key)
	cur, err := readObjectHeader(path)
	switch {
	case err == nil && create:
		// Checked again atomically at commit; this only saves the copy.
		return fmt.Errorf("write blob %s: already exists: %w", key, async.ErrConflict)
	case err != nil && !errors.Is(err, async.ErrNotFound):
		cur = objectHeader{}
	}
	hdr, err := encodeHeader(&objectHeader{Version: nextVersion(cur.Version), ContentType: contentType})
	if err != nil {
		return fmt.Errorf("write blob %s: %w", key, err)
	}
	dir := filepath.Dir(path)
	if err := s.ensureDir(dir); err != nil {
		return fmt.Errorf("write blob %s: %w", key, err)
	}
	tmp, err := stage(ctx, dir, hdr, r)
	if err != nil {
		return fmt.Errorf("write blob %s: %w", key, err)
	}
	mu := s.lock(key)
	mu.Lock()
	err = commit(tmp, path, create)
	mu.Unlock()
	if errors.Is(err, async.ErrConflict) {
		return fmt.Errorf("write blob %s: already exists: %w", key, err)
	}
	if err != nil {
		return fmt.Errorf("write blob %s: %w", key, err)
	}
	return nil
}

// OpenBlob opens the blob at key for reading. It returns an error wrapping
// async.ErrNotFound when the blob is missing. The caller must close it.
func (s *Store) OpenBlob(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkKey(key); err != nil {
		return nil, fmt.Errorf("open blob: %w", err)
	}
	b, err := s.openBlob(key)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// blob is an open blob: its bytes, seekable, and what its header says.
type blob struct {
	*io.SectionReader
	f           *os.File
	contentType string
	version     string
	modTime     time.Time
}

func (b *blob) Close() error { return b.f.Close() }

// openBlob opens the blob at key, a key that checkKey accepts.
func (s *Store) openBlob(key string) (*blob, error) {
	f, err := openObject(s.path(key))
	if err != nil {
		return nil, fmt.Errorf("open blob %s: %w", key, err)
	}
	var h objectHeader
	off, err := readHeader(f, &h)
	var fi os.FileInfo
	if err == nil {
		fi, err = f.Stat()
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open blob %s: %w", key, err)
	}
	return &blob{
		SectionReader: io.NewSectionReader(f, off, fi.Size()-off),
		f:             f,
		contentType:   h.ContentType,
		version:       h.Version,
		modTime:       fi.ModTime(),
	}, nil
}

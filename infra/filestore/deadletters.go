package filestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"fngateway/core/async"
)

var _ async.DeadLetters = (*Quarantine)(nil)

// Quarantine is the file store's dead letters: the files in quarantine/,
// each a queue message file set aside whole (see errQuarantined and
// Store.Quarantine). It is safe for concurrent use; the file system is
// its only state.
type Quarantine struct {
	dir string
}

// DeadLetters returns the store's quarantine, its dead letters.
func (s *Store) DeadLetters() *Quarantine { return &Quarantine{dir: s.quarantine} }

// OpenBeside opens the store in dir for a tool that works beside a gateway
// running on it (the dead-letter command): unlike Open it neither loads nor
// tidies queue/, so it removes no temporary file the gateway is writing.
// Use it only to read records (Get), to add messages (Enqueue: a new file
// the gateway's Receive picks up) and for its Quarantine; its own Receive
// sees only what it enqueued itself.
func OpenBeside(dir string) (*Store, error) {
	s, err := newStore(dir)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{s.objects, s.queueDir, s.quarantine} {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("open file store %s: %s is not a directory of a store (%v)", dir, d, err)
		}
	}
	return s, nil
}

// List returns up to max quarantined files, oldest name first (hold is
// ignored: files cannot be hidden; run one redrive at a time). A file that
// cannot be read as a message is returned with Problem saying why and its
// raw bytes (up to 4 KiB) as Body, so an operator can see it.
func (q *Quarantine) List(ctx context.Context, max int, _ time.Duration) ([]async.DeadLetter, error) {
	entries, err := os.ReadDir(q.dir)
	if err != nil {
		return nil, fmt.Errorf("list quarantine: %w", err)
	}
	out := []async.DeadLetter{}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if len(out) >= max {
			break
		}
		if strings.HasPrefix(e.Name(), tempPrefix) {
			continue
		}
		out = append(out, q.read(e.Name()))
	}
	slices.SortFunc(out, func(a, b async.DeadLetter) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// read reads the quarantined file name as a dead letter.
func (q *Quarantine) read(name string) async.DeadLetter {
	d := async.DeadLetter{ID: name}
	f, err := openNoFollow(filepath.Join(q.dir, name))
	if err != nil {
		d.Problem = fmt.Sprintf("quarantine/%s: %v", name, err)
		return d
	}
	defer f.Close()
	var h messageHeader
	off, err := readHeader(f, &h)
	if err == nil {
		_, err = f.Seek(off, io.SeekStart)
	}
	var body []byte
	if err == nil {
		body, err = io.ReadAll(io.LimitReader(f, maxQuarantinedBody))
	}
	if err != nil {
		d.Problem = fmt.Sprintf("quarantine/%s is not a message file the store can read: %v", name, err)
		f.Seek(0, io.SeekStart)
		d.Body, _ = io.ReadAll(io.LimitReader(f, 4<<10))
		return d
	}
	d.Body, d.Deliveries, d.SentAt = body, h.DequeueCount, time.Unix(0, h.EnqueuedAt).UTC()
	return d
}

// maxQuarantinedBody bounds the body read from a quarantined file: a
// continuation is a few dozen bytes.
const maxQuarantinedBody = 64 << 10

// Delete removes the quarantined file d names; one already gone is no
// error.
func (q *Quarantine) Delete(_ context.Context, d async.DeadLetter) error {
	if d.ID == "" || d.ID != filepath.Base(d.ID) || strings.HasPrefix(d.ID, ".") {
		return fmt.Errorf("delete quarantined file %q: not a file name", d.ID)
	}
	if err := os.Remove(filepath.Join(q.dir, d.ID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete quarantined file: %w", err)
	}
	return syncDir(q.dir)
}

// Release does nothing: List hides nothing.
func (q *Quarantine) Release(context.Context, async.DeadLetter) error { return nil }

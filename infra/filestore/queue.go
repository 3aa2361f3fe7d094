package filestore

import (
	"bytes"
	"cmp"
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

	"fngateway/core"
)

const msgSuffix = ".msg"

// validID reports whether id is a message id: 32 lowercase hex digits.
func validID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for _, c := range []byte(id) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func (s *Store) msgPath(id string) string { return filepath.Join(s.queueDir, id+msgSuffix) }

// loadQueue builds the queue's index from queue/: leftover temporary files
// are removed and undecodable messages moved to quarantine/.
func (s *Store) loadQueue() error {
	entries, err := os.ReadDir(s.queueDir)
	if err != nil {
		return fmt.Errorf("load queue: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(s.queueDir, name)
		if strings.HasPrefix(name, tempPrefix) {
			os.Remove(path)
			continue
		}
		id, ok := strings.CutSuffix(name, msgSuffix)
		if !ok || !validID(id) || !e.Type().IsRegular() {
			continue
		}
		h, err := readMessageHeader(path)
		if err == nil && h.ID != id {
			err = fmt.Errorf("%w: id %s in file %s", errBadRecord, h.ID, name)
		}
		if errors.Is(err, errBadRecord) {
			if err := os.Rename(path, filepath.Join(s.quarantine, name)); err != nil {
				return fmt.Errorf("load queue: quarantine %s: %w", name, err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("load queue: %s: %w", name, err)
		}
		s.msgs[id] = &h
		s.lastEnqueued = max(s.lastEnqueued, h.EnqueuedAt)
	}
	return nil
}

func readMessageHeader(path string) (messageHeader, error) {
	var h messageHeader
	f, err := os.Open(path)
	if err != nil {
		return h, err
	}
	defer f.Close()
	_, err = readHeader(f, &h)
	return h, err
}

// writeMessage writes the message file for h and body, replacing any.
func (s *Store) writeMessage(ctx context.Context, h *messageHeader, body []byte) error {
	hdr, err := encodeHeader(h)
	if err != nil {
		return err
	}
	tmp, err := stage(ctx, s.queueDir, hdr, bytes.NewReader(body))
	if err != nil {
		return err
	}
	return commit(tmp, s.msgPath(h.ID), false)
}

// Enqueue adds a message with body that becomes visible after delay (a
// negative delay counts as none). The message is on disk when Enqueue
// returns, so it survives a restart.
func (s *Store) Enqueue(ctx context.Context, body []byte, delay time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := time.Now()
	s.qmu.Lock()
	// EnqueuedAt orders messages that become visible together; keep it
	// strictly increasing even when the clock does not move.
	s.lastEnqueued = max(now.UnixNano(), s.lastEnqueued+1)
	h := &messageHeader{
		ID:         randomHex(16),
		EnqueuedAt: s.lastEnqueued,
		VisibleAt:  now.Add(max(delay, 0)).UnixNano(),
	}
	s.qmu.Unlock()
	if err := s.writeMessage(ctx, h, body); err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	s.qmu.Lock()
	s.msgs[h.ID] = h
	s.qmu.Unlock()
	return nil
}

// Receive returns up to limit visible messages, oldest visible first, and
// hides each for visibility (0: visible again at once). Each delivery gets
// a fresh Receipt and counts in DequeueCount; the change is on disk before
// Receive returns. It returns an empty slice when none wait. The index is
// in memory, so polling an idle queue costs no disk access.
func (s *Store) Receive(ctx context.Context, limit int, visibility time.Duration) ([]core.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit < 1 {
		return nil, fmt.Errorf("receive: limit %d: want at least 1", limit)
	}
	if visibility < 0 {
		return nil, fmt.Errorf("receive: visibility %s: want zero or more", visibility)
	}
	now := time.Now()
	s.qmu.Lock()
	defer s.qmu.Unlock()
	var due []*messageHeader
	for _, h := range s.msgs {
		if h.VisibleAt <= now.UnixNano() {
			due = append(due, h)
		}
	}
	slices.SortFunc(due, func(a, b *messageHeader) int {
		return cmp.Or(cmp.Compare(a.VisibleAt, b.VisibleAt), cmp.Compare(a.EnqueuedAt, b.EnqueuedAt), strings.Compare(a.ID, b.ID))
	})
	out := []core.Message{}
	for _, h := range due[:min(len(due), limit)] {
		body, err := s.readBody(h.ID)
		if errors.Is(err, fs.ErrNotExist) {
			delete(s.msgs, h.ID)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("receive %s: %w", h.ID, err)
		}
		next := *h
		next.Receipt = randomHex(16)
		next.DequeueCount++
		next.VisibleAt = now.Add(visibility).UnixNano()
		if err := s.writeMessage(ctx, &next, body); err != nil {
			return nil, fmt.Errorf("receive %s: %w", h.ID, err)
		}
		*h = next
		out = append(out, core.Message{ID: h.ID, Receipt: h.Receipt, Body: body, DequeueCount: h.DequeueCount})
	}
	return out, nil
}

// readBody reads the body of the message id from disk.
func (s *Store) readBody(id string) ([]byte, error) {
	f, err := os.Open(s.msgPath(id))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var h messageHeader
	off, err := readHeader(f, &h)
	if err != nil {
		return nil, err
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}

// Complete deletes the message m was received as, if m.Receipt is its
// latest delivery's receipt. A receipt from an earlier delivery returns an
// error wrapping core.ErrConflict and deletes nothing; a message already
// deleted returns one wrapping core.ErrNotFound.
func (s *Store) Complete(ctx context.Context, m core.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.qmu.Lock()
	defer s.qmu.Unlock()
	h, ok := s.msgs[m.ID]
	if !ok {
		return fmt.Errorf("complete message %q: %w", m.ID, core.ErrNotFound)
	}
	if m.Receipt == "" || m.Receipt != h.Receipt {
		return fmt.Errorf("complete message %s: receipt is not the latest delivery's: %w", m.ID, core.ErrConflict)
	}
	if err := os.Remove(s.msgPath(m.ID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("complete message %s: %w", m.ID, err)
	}
	delete(s.msgs, m.ID)
	if err := syncDir(s.queueDir); err != nil {
		return fmt.Errorf("complete message %s: %w", m.ID, err)
	}
	return nil
}

// NextVisible returns when the next queued message becomes visible (a
// time not after now if one waits already), and false when the queue is
// empty. It reads only memory, so a poller may call it freely to decide
// how long to wait.
func (s *Store) NextVisible() (time.Time, bool) {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	var next int64
	found := false
	for _, h := range s.msgs {
		if !found || h.VisibleAt < next {
			next, found = h.VisibleAt, true
		}
	}
	if !found {
		return time.Time{}, false
	}
	return time.Unix(0, next), true
}

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

	"fngateway/core/async"
)

var _ async.VisibilityExtender = (*Store)(nil)

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

// errQuarantined is wrapped by the error Receive returns for a queue
// message file it set aside, whole, in quarantine/: a file the store cannot
// read as a message it wrote (random bytes, emptied, truncated), or a
// symlink or other file that is not a regular one. Such a file is moved
// aside the first time it is met, so it is reported once and never blocks
// the messages behind it.
var errQuarantined = errors.New("queue message file quarantined")

// loadQueue builds the queue's index from queue/: leftover temporary files
// are removed, and message files that cannot be decoded or are not regular
// files are moved to quarantine/ and reported by the next Receive.
func (s *Store) loadQueue() error {
	if fi, err := os.Stat(s.queueDir); err == nil {
		s.queueMod = fi.ModTime()
	}
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
		if !ok || !validID(id) || e.IsDir() {
			continue
		}
		h, err := readMessageHeader(path)
		if err == nil && h.ID != id {
			err = fmt.Errorf("%w: id %s in file %s", async.ErrCorruptRecord, h.ID, name)
		}
		if errors.Is(err, async.ErrCorruptRecord) {
			qerr := s.quarantineFile(name, err)
			if !errors.Is(qerr, errQuarantined) {
				return fmt.Errorf("load queue: %w", qerr)
			}
			s.quarantined = append(s.quarantined, qerr)
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

// quarantineFile moves the queue file name, found unreadable for cause, to
// quarantine/ (replacing an earlier file of that name there) and returns
// the error that reports it, wrapping errQuarantined, or the error of a
// move that failed.
func (s *Store) quarantineFile(name string, cause error) error {
	dst := filepath.Join(s.quarantine, name)
	if err := os.Rename(filepath.Join(s.queueDir, name), dst); err != nil {
		return fmt.Errorf("quarantine queue file %s: %w", name, err)
	}
	if err := syncDir(s.queueDir); err != nil {
		return fmt.Errorf("quarantine queue file %s: %w", name, err)
	}
	err := fmt.Errorf("%w: queue/%s moved to quarantine/%s: %w", errQuarantined, name, name, cause)
	if d := (&Quarantine{dir: s.quarantine}).read(name); d.Problem == "" {
		if id, ok := async.ContinuationID(d.Body); ok {
			return &SetAsideError{RequestID: id, err: err}
		}
	}
	return err
}

// SetAsideError reports a queue message file set aside in quarantine/
// whose body, still readable, names the async request RequestID: no
// delivery will continue that request, so the worker ends it
// (async.Async.EndSetAside) rather than leave it pending until its expiry.
type SetAsideError struct {
	RequestID string
	err       error
}

func (e *SetAsideError) Error() string { return e.err.Error() }

func (e *SetAsideError) Unwrap() error { return e.err }

// SetAsideRequest returns the request id the set-aside message names.
func (e *SetAsideError) SetAsideRequest() string { return e.RequestID }

func readMessageHeader(path string) (messageHeader, error) {
	var h messageHeader
	f, err := openNoFollow(path)
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
// in memory, so polling an idle queue costs one stat of queue/ (see
// adopt: files another process added are read then).
//
// A message file that cannot be read as a message (see errQuarantined) is
// moved to quarantine/ at once and left out: Receive then returns the
// messages it could read together with an error wrapping errQuarantined
// that names each file set aside, once (those found by Open included).
//
// The deliveries are taken in memory under the queue's lock and written to
// disk after it is released, so a Receive that syncs many files never
// holds up Enqueue. A delivery that cannot be written is put back,
// visible, and left out; Receive fails only if none could be.
func (s *Store) Receive(ctx context.Context, limit int, visibility time.Duration) ([]async.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit < 1 {
		return nil, fmt.Errorf("receive: limit %d: want at least 1", limit)
	}
	if visibility < 0 {
		return nil, fmt.Errorf("receive: visibility %s: want zero or more", visibility)
	}
	s.adopt()
	now := time.Now()
	type delivery struct{ prev, next messageHeader }
	var taken []delivery
	s.qmu.Lock()
	var due []*messageHeader
	for _, h := range s.msgs {
		if h.VisibleAt <= now.UnixNano() {
			due = append(due, h)
		}
	}
	slices.SortFunc(due, func(a, b *messageHeader) int {
		return cmp.Or(cmp.Compare(a.VisibleAt, b.VisibleAt), cmp.Compare(a.EnqueuedAt, b.EnqueuedAt), strings.Compare(a.ID, b.ID))
	})
	for _, h := range due[:min(len(due), limit)] {
		next := *h
		next.Receipt = randomHex(16)
		next.DequeueCount++
		next.VisibleAt = now.Add(visibility).UnixNano()
		taken = append(taken, delivery{prev: *h, next: next})
		*h = next
	}
	s.qmu.Unlock()

	out := []async.Message{}
	var firstErr error
	quarantined := s.takeQuarantined()
	for _, d := range taken {
		body, err := s.readBody(d.next.ID)
		if err == nil {
			err = s.writeMessage(ctx, &d.next, body)
		}
		if err == nil {
			out = append(out, async.Message{ID: d.next.ID, Receipt: d.next.Receipt, Body: body, DequeueCount: d.next.DequeueCount})
			continue
		}
		corrupt := errors.Is(err, async.ErrCorruptRecord)
		s.qmu.Lock()
		if h, ok := s.msgs[d.next.ID]; ok && h.Receipt == d.next.Receipt {
			if errors.Is(err, fs.ErrNotExist) || corrupt {
				delete(s.msgs, d.next.ID) // completed meanwhile, or set aside below
			} else {
				*h = d.prev
			}
		}
		s.qmu.Unlock()
		if corrupt {
			// Set aside at once: put back, it would come first again.
			quarantined = append(quarantined, s.quarantineFile(d.next.ID+msgSuffix, err))
			continue
		}
		if !errors.Is(err, fs.ErrNotExist) && firstErr == nil {
			firstErr = fmt.Errorf("receive %s: %w", d.next.ID, err)
		}
	}
	if len(quarantined) > 0 {
		// Reported with the messages that could be read, which still run.
		return out, errors.Join(append(quarantined, firstErr)...)
	}
	if len(out) == 0 && firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

// adopt adds to the index the message files another process wrote into
// queue/ since it was last read (the dead-letter command's redrive), when
// queue/'s modification time says it changed: one stat per Receive
// otherwise. Files it cannot read are left for Open to set aside.
func (s *Store) adopt() {
	fi, err := os.Stat(s.queueDir)
	if err != nil {
		return
	}
	s.qmu.Lock()
	same := fi.ModTime().Equal(s.queueMod)
	s.queueMod = fi.ModTime()
	s.qmu.Unlock()
	if same {
		return
	}
	entries, err := os.ReadDir(s.queueDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), msgSuffix)
		if !ok || !validID(id) || e.IsDir() {
			continue
		}
		s.qmu.Lock()
		_, known := s.msgs[id]
		s.qmu.Unlock()
		if known {
			continue
		}
		h, err := readMessageHeader(s.msgPath(id))
		if err != nil || h.ID != id {
			continue
		}
		s.qmu.Lock()
		if _, known := s.msgs[id]; !known {
			// A file completed meanwhile is dropped by Receive when its
			// body is found missing.
			s.msgs[id] = &h
			s.lastEnqueued = max(s.lastEnqueued, h.EnqueuedAt)
		}
		s.qmu.Unlock()
	}
}

// takeQuarantined returns, once, the reports of the files loadQueue set
// aside.
func (s *Store) takeQuarantined() []error {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	q := s.quarantined
	s.quarantined = nil
	return q
}

// Extend hides the received message m for visibility from now (0: visible
// again at once), keeping its receipt. The change is made in memory only:
// on disk the message keeps the visibility of its delivery, so after a
// restart (its worker gone) it is visible again by then. A message that is
// gone is an error wrapping async.ErrNotFound; a receipt that is not the
// latest delivery's, one wrapping async.ErrConflict.
func (s *Store) Extend(ctx context.Context, m async.Message, visibility time.Duration) (async.Message, error) {
	if err := ctx.Err(); err != nil {
		return m, err
	}
	if visibility < 0 {
		return m, fmt.Errorf("extend message %s: visibility %s: want zero or more", m.ID, visibility)
	}
	s.qmu.Lock()
	defer s.qmu.Unlock()
	h, ok := s.msgs[m.ID]
	if !ok {
		return m, fmt.Errorf("extend message %q: %w", m.ID, async.ErrNotFound)
	}
	if m.Receipt == "" || m.Receipt != h.Receipt {
		return m, fmt.Errorf("extend message %s: receipt is not the latest delivery's: %w", m.ID, async.ErrConflict)
	}
	h.VisibleAt = time.Now().Add(visibility).UnixNano()
	return m, nil
}

// readBody reads the body of the message id from disk.
func (s *Store) readBody(id string) ([]byte, error) {
	f, err := openNoFollow(s.msgPath(id))
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
// error wrapping async.ErrConflict and deletes nothing; a message already
// deleted returns one wrapping async.ErrNotFound.
func (s *Store) Complete(ctx context.Context, m async.Message) error {
	return s.settle(ctx, m, "complete", func() error {
		if err := os.Remove(s.msgPath(m.ID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	})
}

// settle ends the delivery m: under the queue's lock it checks that m's
// receipt is its latest delivery's, runs remove (which takes the message's
// file away) and forgets the message; the directory is synced outside the
// lock, which Enqueue needs. op names the operation in errors.
func (s *Store) settle(ctx context.Context, m async.Message, op string, remove func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.qmu.Lock()
	h, ok := s.msgs[m.ID]
	if !ok {
		s.qmu.Unlock()
		return fmt.Errorf("%s message %q: %w", op, m.ID, async.ErrNotFound)
	}
	if m.Receipt == "" || m.Receipt != h.Receipt {
		s.qmu.Unlock()
		return fmt.Errorf("%s message %s: receipt is not the latest delivery's: %w", op, m.ID, async.ErrConflict)
	}
	if err := remove(); err != nil {
		s.qmu.Unlock()
		return fmt.Errorf("%s message %s: %w", op, m.ID, err)
	}
	delete(s.msgs, m.ID)
	s.qmu.Unlock()
	if err := syncDir(s.queueDir); err != nil {
		return fmt.Errorf("%s message %s: %w", op, m.ID, err)
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

// Quarantine sets the received message m aside: its file moves to
// quarantine/, whole, for an operator to inspect, and it is never delivered
// again. The local worker calls it for a message whose body is not a
// continuation it can decode (async.ErrBadMessage), so that the message is
// logged once rather than on every delivery. A receipt that is not the
// latest delivery's is an error wrapping async.ErrConflict; a message
// already gone, one wrapping async.ErrNotFound.
func (s *Store) Quarantine(ctx context.Context, m async.Message) error {
	return s.settle(ctx, m, "quarantine", func() error {
		return os.Rename(s.msgPath(m.ID), filepath.Join(s.quarantine, m.ID+msgSuffix))
	})
}

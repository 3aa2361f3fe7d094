package filestore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"fngateway/core"
	"fngateway/core/async"
)

// defaultSweepEvery and defaultSweepBatch are RunSweeper's defaults: a
// pass every minute, examining at most 256 records and index entries.
const (
	defaultSweepEvery = time.Minute
	defaultSweepBatch = 256
)

// Sweep deletes what expired async requests left in the store: once a
// request is past its expiry plus its read grace (core.ReadGrace), its record, request
// body, result blobs and idempotency index entry (core.Garbage
// decides). The cloud stores get the same from lifecycle rules.
//
// Work is bounded: one call examines at most batch objects (records and
// index entries; the names of a directory are listed whole), and the next
// call continues after the last one examined, starting over once a
// directory is done. An object that cannot be read or deleted does not end
// the pass: a corrupt one (async.ErrCorruptRecord) is kept for inspection
// and passed over silently, as core.Garbage keeps what it cannot decode;
// any other failure is passed over too and returned, joined, at the end.
// It returns how many objects it deleted. Sweep may run alongside every
// other method.
func (s *Store) Sweep(ctx context.Context, now time.Time, batch int) (deleted int, err error) {
	if batch < 1 {
		return 0, fmt.Errorf("sweep: batch %d: want at least 1", batch)
	}
	s.sweepMu.Lock()
	defer s.sweepMu.Unlock()
	if s.sweepAfter == nil {
		s.sweepAfter = map[string]string{}
	}
	var errs []error
	for _, prefix := range async.SweepPrefixes() {
		if batch == 0 {
			break
		}
		n, examined, err := s.sweepPrefix(ctx, prefix, now, batch, &errs)
		deleted += n
		batch -= examined
		if err != nil {
			return deleted, errors.Join(append(errs, err)...)
		}
	}
	return deleted, errors.Join(errs...)
}

// maxSweepErrors bounds the failures one pass keeps to return.
const maxSweepErrors = 10

// sweepPrefix examines up to batch objects directly under prefix after
// the prefix's cursor. The failures of single objects go to errs (at most
// maxSweepErrors of them), and the pass goes on; err is what ended it.
func (s *Store) sweepPrefix(ctx context.Context, prefix string, now time.Time, batch int, errs *[]error) (deleted, examined int, err error) {
	fail := func(err error) {
		if len(*errs) < maxSweepErrors {
			*errs = append(*errs, fmt.Errorf("sweep: %w", err))
		}
	}
	dir := s.path(strings.TrimSuffix(prefix, "/"))
	entries, err := os.ReadDir(dir) // sorted by name
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("sweep %s: %w", prefix, err)
	}
	after := s.sweepAfter[prefix]
	start, _ := slices.BinarySearchFunc(entries, after, func(e os.DirEntry, name string) int {
		return strings.Compare(e.Name(), name)
	})
	for _, e := range entries[start:] {
		if examined == batch {
			return deleted, examined, nil
		}
		name := e.Name()
		if name == after || strings.HasPrefix(name, ".") || !e.Type().IsRegular() {
			continue
		}
		if err := ctx.Err(); err != nil {
			return deleted, examined, err
		}
		examined++
		s.sweepAfter[prefix] = name
		key := prefix + name
		data, _, err := s.Get(ctx, key)
		switch {
		case errors.Is(err, async.ErrNotFound), errors.Is(err, async.ErrCorruptRecord):
			continue
		case err != nil:
			if cerr := ctx.Err(); cerr != nil {
				return deleted, examined, cerr
			}
			fail(err)
			continue
		}
		for _, k := range async.Garbage(key, data, now) {
			ok, err := s.remove(k)
			if err != nil {
				// The object's own key comes last: what is left is
				// found again by the next pass.
				fail(err)
				break
			}
			if ok {
				deleted++
			}
		}
	}
	s.sweepAfter[prefix] = "" // done: the next pass starts over
	return deleted, examined, nil
}

// remove deletes the object at key, if any, and then its directory if
// that is a request's own (<container>/<id>/…, named by 32 hex digits)
// and now empty. It reports
// whether there was an object.
func (s *Store) remove(key string) (bool, error) {
	if err := checkKey(key); err != nil {
		return false, fmt.Errorf("remove: %w", err)
	}
	path := s.path(key)
	mu := s.lock(key)
	mu.Lock()
	err := os.Remove(path)
	mu.Unlock()
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("remove %s: %w", key, err)
	}
	if dir := filepath.Dir(path); validID(filepath.Base(dir)) && dir != s.objects {
		os.Remove(dir) // fails, harmlessly, unless empty
	}
	return true, nil
}

// RunSweeper calls Sweep every interval (zero: defaultSweepEvery) with
// batch (zero: defaultSweepBatch) until ctx ends. A failed pass goes to
// report, if set, and the next pass tries again.
func (s *Store) RunSweeper(ctx context.Context, every time.Duration, batch int, report func(error)) {
	if every <= 0 {
		every = defaultSweepEvery
	}
	if batch <= 0 {
		batch = defaultSweepBatch
	}
	stop := core.Beat(ctx, every, func(ctx context.Context) bool {
		if _, err := s.Sweep(ctx, time.Now(), batch); err != nil && ctx.Err() == nil && report != nil {
			report(err)
		}
		return true
	})
	<-ctx.Done()
	stop()
}

package async

import (
	"context"
	"errors"
	"fmt"
	"time"

	"fngateway/core"
)

// records reads and writes the records of a Store, and keeps the leases
// of the claims written in them: the I/O around the pure transitions of
// state.go. A records is a plain value over its Store.
type records struct{ store Store }

// load reads and decodes the record of id.
func (rs records) load(ctx context.Context, id string) (*asyncRecord, error) {
	data, _, err := rs.store.Get(ctx, asyncRecordKey(id))
	if err != nil {
		return nil, err
	}
	r, err := decodeAsyncRecord(data)
	if err != nil {
		return nil, err
	}
	if r.ID != id {
		return nil, fmt.Errorf("%w: record of %s names %s", errBadRecord, id, r.ID)
	}
	return r, nil
}

// loadReadable reads the record of id for a reader, what naming the read
// in its errors: an unknown or abandoned record (a submission that failed)
// is an error wrapping ErrNotFound, one that cannot be decoded an *Error
// with ReasonCorruptRecord wrapping errBadRecord.
func (rs records) loadReadable(ctx context.Context, id, what string) (*asyncRecord, error) {
	rec, err := rs.load(ctx, id)
	if errors.Is(err, ErrNotFound) || err == nil && rec.State == StateAbandoned {
		return nil, fmt.Errorf("%s %s: %w", what, id, ErrNotFound)
	}
	if errors.Is(err, errBadRecord) {
		return nil, &core.Error{Reason: core.ReasonCorruptRecord, Message: "the record of async request " + id + " cannot be read; it will not complete", Err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, id, err)
	}
	return rec, nil
}

// cancelling reports whether the record of id is cancelling. A record that
// cannot be read is not.
func (rs records) cancelling(ctx context.Context, id string) bool {
	rec, err := rs.load(ctx, id)
	return err == nil && rec.State == StateCancelling
}

// update is the read-modify-write of a record: fn changes the record
// read, which is written back only if nobody wrote it meanwhile; on a
// conflict fn runs again on the new version. An error from fn ends the
// update without writing and is returned with the record fn saw.
func (rs records) update(ctx context.Context, id string, fn func(*asyncRecord) error) (*asyncRecord, error) {
	key := asyncRecordKey(id)
	for try := 1; ; try++ {
		data, version, err := rs.store.Get(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("read record: %w", err)
		}
		r, err := decodeAsyncRecord(data)
		if err != nil {
			return nil, err
		}
		if r.ID != id {
			return nil, fmt.Errorf("%w: record of %s names %s", errBadRecord, id, r.ID)
		}
		before := r.State
		if err := fn(r); err != nil {
			return r, err
		}
		if r.State != before {
			r.Changed = time.Now().UTC()
		}
		enc, err := r.Encode()
		if err != nil {
			return nil, err
		}
		_, err = rs.store.Put(ctx, key, enc, version)
		if err == nil {
			return r, nil
		}
		if !errors.Is(err, ErrConflict) || try >= maxUpdateTries {
			return nil, fmt.Errorf("write record: %w", err)
		}
	}
}

// keepLease is the claim's heartbeat: it renews the lease of owner on
// record id every third of a lease until stop is called, never past limit
// (zero: no limit). If the lease turns out to be lost, it calls
// lose(ErrLeaseLost) and stops. If it finds the client asked to cancel, it
// calls lose(ErrCancelRequested) once and goes on renewing: the holder
// writes the cancellation. A renewal that fails otherwise is tried again
// at the next beat, so two can fail before the lease lapses.
func (rs records) keepLease(ctx context.Context, id, owner string, lease time.Duration, limit time.Time, lose context.CancelCauseFunc) (stop func()) {
	told := false // of a cancel request
	return core.Beat(context.WithoutCancel(ctx), lease/3, func(ctx context.Context) bool {
		until := time.Now().Add(lease)
		if !limit.IsZero() && limit.Before(until) {
			until = limit
		}
		rec, err := rs.update(ctx, id, func(r *asyncRecord) error { return r.renew(owner, until) })
		if rec != nil && rec.State == StateCancelling && !told && !errors.Is(err, ErrLeaseLost) {
			told = true
			lose(ErrCancelRequested)
		}
		switch {
		case errors.Is(err, ErrLeaseLost), errors.Is(err, ErrNotFound):
			lose(ErrLeaseLost)
			return false
		case err == nil || errors.Is(err, errNoop):
			// Once the lease reaches the limit, nothing is left to renew.
			return limit.IsZero() || until.Before(limit)
		}
		return true // tried again at the next beat
	})
}

package async

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"fngateway/core"
)

// Cancellation (docs/async-api.md#cancellation): DELETE on a status URI asks to cancel. The
// record goes from queued or running to cancelling; whoever holds the claim
// then writes the cancellation (409 Canceled) as the one result, by the
// same commit protocol as any result, so exactly one result exists whether
// the cancellation or the backend's answer wins the race. A cancelling
// record that nobody holds is settled by the canceller itself.
//
// How the holder learns of it: on the instance that took the DELETE, at
// once (its in-process attempt or queue continuation listens for it, see
// cancelListeners); on any other, at its next lease renewal (every third of
// a lease, 5 s by default), and at its checkpoint, which writes the
// cancellation instead of handing on.

// ErrCancelRequested is the cause with which a continuation's work context
// ends when its client asked to cancel: the in-flight attempt is cancelled
// (the backend sees its connection closed) and the holder writes the
// cancellation.
var ErrCancelRequested = errors.New("async request cancelled by its client")

// cancelOutcome is what a cancel request did to a record.
type cancelOutcome int

const (
	// cancelFinished: the request had finished; nothing changes.
	cancelFinished cancelOutcome = iota
	// cancelMarked: the record is now cancelling.
	cancelMarked
	// cancelPending: the record was cancelling already.
	cancelPending
)

// errNotCancelled ends a cancel update that must not write.
var errNotCancelled = errors.New("not cancelled")

// Cancel asks to cancel async request id, as DELETE on its status URI
// does, and returns the view after it, with finished set when the request
// had finished before (nothing changed then). Errors are those of Status:
// ErrNotFound for an unknown id, *Error with ReasonExpired or
// ReasonCorruptRecord.
//
// Cancel belongs to the submitter (docs/async-api.md#cancellation): a request scoped to a
// caller is cancelled only by the same caller — the verified identity in
// ctx (WithCaller), else the scope headers in h, the DELETE's headers — and
// is ErrNotFound to anyone else, as an unknown id is, whatever its state.
//
// A pending request becomes cancelling: its holder, if any, is told (at
// once on this instance, at its next lease renewal on another) and writes
// the cancellation; a request nobody holds (queued, checkpointed, or its
// holder dead) is settled here. The view may still be pending: the
// cancellation takes effect shortly.
func (a *Async) Cancel(ctx context.Context, id string, h http.Header) (v *StatusView, finished bool, err error) {
	if !validAsyncID(id) {
		return nil, false, fmt.Errorf("async cancel: malformed id: %w", ErrNotFound)
	}
	e := a.engine()
	if rec, err := e.records.load(ctx, id); err == nil && rec.Submitter != "" && rec.Submitter != e.idempotency().callerScope(ctx, h) {
		return nil, false, fmt.Errorf("async cancel %s: another caller's request: %w", id, ErrNotFound)
	}
	// Status first: it answers unknown, expired and corrupt requests.
	v, err = a.Status(ctx, id)
	if err != nil {
		return nil, false, err
	}
	if v.State.Done() {
		return v, true, nil
	}
	now := time.Now()
	var outcome cancelOutcome
	rec, err := e.records.update(ctx, id, func(r *asyncRecord) error {
		if r.State == StateAbandoned {
			return ErrNotFound
		}
		outcome = r.requestCancel(now)
		if outcome != cancelMarked {
			return errNotCancelled
		}
		return nil
	})
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, false, fmt.Errorf("async cancel %s: %w", id, ErrNotFound)
	case errors.Is(err, errNotCancelled):
	case err != nil:
		return nil, false, fmt.Errorf("async cancel %s: %w", id, err)
	}
	if outcome == cancelFinished {
		v, err = a.Status(ctx, id)
		return v, err == nil, err
	}
	e.cancels.tell(id)
	if rec.cancelUnheld(now) {
		// Nobody will write the cancellation: write it here. Should this
		// fail, the request's message (queued, or coming back) does.
		if err := (worker{e}).continueRequest(ctx, id); err != nil {
			e.onError.report(ctx, id, fmt.Errorf("async %s: writing the cancellation: %w", id, err))
		}
	}
	v, err = a.Status(ctx, id)
	return v, false, err
}

// commitCancel writes the cancellation as the result of the request s
// holds: the error document as the data blob, 409 Canceled in the header
// blob. It writes under its own context: the work context has ended with
// the cancel.
func (s *continuation) commitCancel(ctx context.Context, all []core.Attempt) error {
	s.cancelTried = true
	ctx, cancel := cleanupContext(ctx)
	defer cancel()
	e := &core.Error{Reason: core.ReasonCanceled, Message: "the client cancelled the request (DELETE on its status URI)", Attempts: all}
	header := http.Header{
		"Content-Type":    {"application/json"},
		"X-Gateway-Error": {e.Reason.Code()},
		"X-Attempts":      {strconv.Itoa(len(all))},
	}
	if ok, err := s.holds(ctx, all); !ok {
		return err
	}
	if err := s.store.WriteBlob(ctx, asyncDataKey(s.rec.Container, s.rec.ID), bytes.NewReader(e.JSON()), "application/json", false); err != nil {
		return errors.Join(fmt.Errorf("continuation %s: write the cancellation: %w", s.rec.ID, err), s.handOn(ctx, all, false))
	}
	return s.publish(ctx, e.HTTPStatus(), header, all)
}

// cancelListeners are the continuations this instance runs, by id: what
// Cancel tells at once. The zero value is ready; its methods are safe for
// concurrent use.
type cancelListeners struct {
	mu   sync.Mutex
	next uint64
	byID map[string]map[uint64]context.CancelCauseFunc
}

// listen registers cancel to be called with ErrCancelRequested when
// request id is cancelled on this instance, until the returned function
// is called.
func (l *cancelListeners) listen(id string, cancel context.CancelCauseFunc) (unlisten func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byID == nil {
		l.byID = map[string]map[uint64]context.CancelCauseFunc{}
	}
	l.next++
	n := l.next
	if l.byID[id] == nil {
		l.byID[id] = map[uint64]context.CancelCauseFunc{}
	}
	l.byID[id][n] = cancel
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.byID[id], n)
		if len(l.byID[id]) == 0 {
			delete(l.byID, id)
		}
	}
}

// tell cancels the work on request id that runs on this instance.
func (l *cancelListeners) tell(id string) {
	l.mu.Lock()
	fns := make([]context.CancelCauseFunc, 0, len(l.byID[id]))
	for _, f := range l.byID[id] {
		fns = append(fns, f)
	}
	l.mu.Unlock()
	for _, f := range fns {
		f(ErrCancelRequested)
	}
}

// trimCode bounds a gateway error code kept in a record.
func trimCode(code string) string {
	if len(code) > 64 {
		return code[:64]
	}
	return code
}

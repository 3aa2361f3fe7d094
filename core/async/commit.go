package async

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"fngateway/core"
)

// continuation is one request's processing while its claim is held: the
// record as claimed, the claim's owner token and the signal that stops
// the work, with the engine's ports. It owns the steps of the commit
// protocol (protocol.go): checking the claim, writing the data blob, then
// the header blob, then the record; or handing the request on. It is used
// by one goroutine.
type continuation struct {
	engine
	rec      *asyncRecord // as claimed
	owner    string
	inflight bool // Finish of an inflight claim, not a queue worker
	// stopped fires when the work must stop: ErrLeaseLost when the lease
	// is lost, ErrCancelRequested when the client cancels, and
	// context.Canceled at the end.
	stopped *causeSignal
	endOnce sync.Once
	endFn   func()

	// cancelTried is set once the continuation set out to write the
	// cancellation, so that a failure on the way hands on plainly.
	cancelTried bool
}

// end stops renewing the lease and ends the work.
func (s *continuation) end() { s.endOnce.Do(s.endFn) }

// lost reports whether the lease was lost to another worker.
func (s *continuation) lost() bool { return errors.Is(s.stopped.Cause(), ErrLeaseLost) }

// work returns ctx, ended too, with the cause, once the continuation's work
// must stop (stopped). Call done when the work is over.
func (s *continuation) work(ctx context.Context) (work context.Context, done func()) {
	work, cancel := context.WithCancelCause(ctx)
	if cause := s.stopped.Cause(); cause != nil {
		cancel(cause)
	}
	unhook := s.stopped.onFire(func(cause error) { cancel(cause) })
	return work, func() { unhook(); cancel(context.Canceled) }
}

// lostLease ends a continuation whose lease another worker took. A queue worker
// leaves a message delayed to the new lease's end, as for any live lease
// (its own delivery may be the one the queue would redeliver); Finish
// reports ErrLeaseLost.
func (s *continuation) lostLease(ctx context.Context) error {
	s.end()
	if s.inflight {
		return ErrLeaseLost
	}
	ctx, cancel := cleanupContext(ctx)
	defer cancel()
	rec, err := s.records.load(ctx, s.rec.ID)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("continuation %s: lease lost: %w", s.rec.ID, err)
	case rec.State.Done():
		return nil
	}
	var wait time.Duration
	if rec.Claim != nil {
		wait = time.Until(rec.Claim.Until)
	}
	return s.requeue(ctx, s.rec.ID, wait)
}

// settle turns the outcome of the attempts into the result, or hands the
// request on.
func (s *continuation) settle(ctx context.Context, res *core.Result, ferr error) error {
	if ferr == nil && (res == nil || res.Response == nil) {
		ferr = &core.Error{Reason: core.ReasonNone, Message: "the attempts gave no result"}
	}
	if ferr != nil {
		var e *core.Error
		if !errors.As(ferr, &e) {
			e = &core.Error{Reason: core.ReasonNone, Err: ferr}
		}
		all := joinAttempts(s.rec.Attempts, e.Attempts)
		switch {
		case s.lost():
			return s.lostLease(ctx)
		case e.Reason == core.ReasonFunctionLimit:
			return s.handOn(ctx, all, true)
		case e.Reason == core.ReasonClientGone && errors.Is(ferr, ErrCancelRequested):
			// The client cancelled: handOn writes the cancellation.
			return s.handOn(ctx, all, false)
		case e.Reason == core.ReasonClientGone:
			// The invocation's context ended: hand on, and have the
			// queue deliver again.
			herr := s.handOn(ctx, all, false)
			if s.inflight {
				return herr
			}
			return errors.Join(fmt.Errorf("continuation %s interrupted: %w", s.rec.ID, ferr), herr)
		}
		return s.commitError(ctx, &core.Error{Reason: e.Reason, Message: e.Message, Attempts: all, Err: e.Err})
	}

	resp := res.Response
	defer resp.Body.Close()
	all := joinAttempts(s.rec.Attempts, res.Attempts)
	header := resp.Header.Clone()
	if header == nil {
		header = http.Header{}
	}
	core.RemoveHopHeaders(header)
	header.Set("X-Attempts", strconv.Itoa(len(all)))
	ct := resp.Header.Get("Content-Type")
	if ct == "" {
		ct = "application/octet-stream"
	}
	// Step 2: the data blob, streamed from the backend, by the holder only.
	if ok, err := s.holds(ctx, all); !ok {
		return err
	}
	work, done := s.work(ctx)
	err := s.store.WriteBlob(work, asyncDataKey(s.rec.Container, s.rec.ID), resp.Body, ct, false)
	done()
	if err != nil {
		cut := core.StreamCut(resp.Body)
		switch {
		case s.lost():
			return s.lostLease(ctx)
		case errors.Is(cut, core.ErrFunctionLimit):
			return s.handOn(ctx, all, true)
		case errors.Is(cut, core.ErrIdleTimeout):
			return s.commitError(ctx, &core.Error{Reason: core.ReasonAttemptTimeout,
				Message:  fmt.Sprintf("the backend's response body (status %d) stalled longer than the idle limit", resp.StatusCode),
				Attempts: all, Err: cut})
		case s.records.cancelling(ctx, s.rec.ID):
			// The cancel cut the body: handOn writes the cancellation.
			return s.handOn(ctx, all, false)
		}
		return errors.Join(fmt.Errorf("continuation %s: write result body: %w", s.rec.ID, err), s.handOn(ctx, all, false))
	}
	return s.publish(ctx, resp.StatusCode, header, all)
}

// commitError writes e as the result: the error document as the data blob,
// its status in the header blob.
func (s *continuation) commitError(ctx context.Context, e *core.Error) error {
	header := http.Header{
		"Content-Type":    {"application/json"},
		"X-Gateway-Error": {e.Reason.Code()},
		"X-Attempts":      {strconv.Itoa(len(e.Attempts))},
	}
	if ok, err := s.holds(ctx, e.Attempts); !ok {
		return err
	}
	work, done := s.work(ctx)
	err := s.store.WriteBlob(work, asyncDataKey(s.rec.Container, s.rec.ID), bytes.NewReader(e.JSON()), "application/json", false)
	done()
	if err != nil {
		if s.lost() {
			return s.lostLease(ctx)
		}
		return errors.Join(fmt.Errorf("continuation %s: write result body: %w", s.rec.ID, err), s.handOn(ctx, e.Attempts, false))
	}
	return s.publish(ctx, e.HTTPStatus(), header, e.Attempts)
}

// publish commits the result whose data blob is written: step 3 (the
// header blob, created only if absent) and step 4 (the record marked done).
func (s *continuation) publish(ctx context.Context, status int, header http.Header, all []core.Attempt) error {
	id := s.rec.ID
	// Commit only while still the holder: a successor, once it claimed,
	// may be writing the data blob.
	if ok, err := s.holds(ctx, all); !ok {
		return err
	}
	completed := time.Now().UTC().Truncate(time.Second)
	if all == nil {
		all = []core.Attempt{}
	}
	hb, err := json.Marshal(resultHeader{Status: status, Headers: header, ID: id, CompletedAt: completed.Format(time.RFC3339), Attempts: storedAttempts(all)})
	if err != nil {
		return fmt.Errorf("continuation %s: encode result header: %w", id, err)
	}
	err = s.store.WriteBlob(ctx, asyncHeaderKey(s.rec.Container, id), bytes.NewReader(hb), "application/json", true)
	s.end()
	switch {
	case errors.Is(err, ErrConflict):
		// Another holder committed first: its result stands.
		_, err := s.adoptResult(ctx)
		return err
	case err != nil:
		// Whether the header was written is unknown: the next holder
		// finds out.
		return errors.Join(fmt.Errorf("continuation %s: write result header: %w", id, err), s.handOn(ctx, all, false))
	}
	return s.finalize(ctx, id, status, header.Get("X-Gateway-Error"), completed, all)
}

// holds checks, just before a result write, that s still holds the claim
// (its lease may have lapsed, as long as nobody took it over). If it does
// not, or the check fails, it ends the continuation as lostLease or handOn does
// and returns false with what the caller must return.
func (s *continuation) holds(ctx context.Context, all []core.Attempt) (bool, error) {
	rec, err := s.records.load(ctx, s.rec.ID)
	if err != nil {
		return false, errors.Join(fmt.Errorf("continuation %s: check claim: %w", s.rec.ID, err), s.handOn(ctx, all, false))
	}
	if !rec.held(s.owner) {
		return false, s.lostLease(ctx)
	}
	return true, nil
}

// adoptResult marks the record done from an existing header blob. It
// reports whether there was one.
func (s *continuation) adoptResult(ctx context.Context) (bool, error) {
	rc, err := s.store.OpenBlob(ctx, asyncHeaderKey(s.rec.Container, s.rec.ID))
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer rc.Close()
	var h resultHeader
	if err := json.NewDecoder(io.LimitReader(rc, maxHeaderBlobBytes)).Decode(&h); err != nil {
		return true, fmt.Errorf("decode result header: %w", err)
	}
	s.end()
	completed, err := time.Parse(time.RFC3339, h.CompletedAt)
	if err != nil || !storableTime(completed) {
		completed = time.Now()
	}
	status := h.Status
	if status < 100 || status > 999 {
		status = http.StatusInternalServerError
	}
	return true, s.finalize(ctx, s.rec.ID, status, h.Headers.Get("X-Gateway-Error"), completed.UTC(), h.Attempts)
}

// finalize marks the record done with its committed result, releasing the
// claim whoever holds it (the header blob decides), and sends the final
// notification.
func (s *continuation) finalize(ctx context.Context, id string, status int, gatewayCode string, completed time.Time, all []core.Attempt) error {
	state := resultState(status, gatewayCode)
	var topic string
	end := End{ID: id, State: state, Status: status, Code: gatewayCode}
	_, err := s.records.update(ctx, id, func(r *asyncRecord) error {
		topic = r.Topic
		err := r.commit(state, recordResult{Status: status, CompletedAt: completed, Code: trimCode(gatewayCode)}, all)
		end.Attempts, end.Arrival = len(r.Attempts), r.Arrival
		return err
	})
	if errors.Is(err, errNoop) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("continuation %s: mark done: %w", id, err)
	}
	s.countEnd(state)
	if s.onEnd != nil {
		end.Completed = time.Now()
		s.onEnd(ctx, end)
	}
	s.notes.notify(ctx, topic, id, state.notification())
	return nil
}

// countEnd counts an async request's ending in Stats, by its final state.
func (s *continuation) countEnd(state State) {
	if s.stats == nil {
		return
	}
	switch state {
	case StateSucceeded:
		s.stats.AsyncSucceeded.Add(1)
	case StateFailed:
		s.stats.AsyncFailed.Add(1)
	case StateCanceled:
		s.stats.AsyncCanceled.Add(1)
	case StateExpired:
		s.stats.AsyncExpired.Add(1)
	}
}

// handOn releases the claim, keeping the attempts so far. A checkpoint (the
// execution limit cut the work) counts itself and enqueues the next
// continuation; so does an inflight claim, which has no delivery of its own
// for the queue to repeat. A queue worker's other hand-ons rely on its
// delivery coming back.
func (s *continuation) handOn(ctx context.Context, all []core.Attempt, checkpoint bool) error {
	ctx, cancel := cleanupContext(ctx)
	defer cancel()
	if !s.cancelTried && s.records.cancelling(ctx, s.rec.ID) {
		// A request whose client asked to cancel is not handed on, nor
		// resumed from a checkpoint: the holder writes the cancellation.
		return s.commitCancel(ctx, all)
	}
	s.end()
	_, err := s.records.update(ctx, s.rec.ID, func(r *asyncRecord) error { return r.release(s.owner, all, checkpoint) })
	if errors.Is(err, ErrLeaseLost) {
		return s.lostLease(ctx)
	}
	if err != nil {
		return fmt.Errorf("continuation %s: release claim: %w", s.rec.ID, err)
	}
	if checkpoint || s.inflight {
		if err := s.queue.Enqueue(ctx, wireContinuation{ID: s.rec.ID}.Encode(), 0); err != nil {
			return fmt.Errorf("continuation %s: enqueue the next continuation: %w", s.rec.ID, err)
		}
	}
	return nil
}

// joinAttempts returns a new timeline: prev, then more.
func joinAttempts(prev, more []core.Attempt) []core.Attempt {
	out := make([]core.Attempt, 0, len(prev)+len(more))
	return append(append(out, prev...), more...)
}

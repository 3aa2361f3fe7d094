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

// errLeased ends a claim attempt that found a live lease held by another.
var errLeased = errors.New("record leased by another worker")

// errBodyLost is the cause of a stored request body that cannot be read
// back whole: the request can never be sent again.
var errBodyLost = errors.New("stored request body is missing or truncated")

// Process runs one continuation message in a fresh invocation. ctx's
// deadline, if any, is the invocation's: the attempts stop Margin before it,
// and an attempt cut there is checkpointed (its timeline kept in the record,
// the claim released) and continued by a new message.
//
// It returns nil when the message is done with: the result was written, the
// request was handed on, the message names an unknown or finished request
// or one whose record cannot be decoded (a terminal state, given to
// OnError), or another worker holds a live lease (a message delayed to the lease's
// end is left for it). A message that cannot be decoded is an error wrapping
// ErrBadMessage; any other error is transient, and the queue should deliver
// the message again.
func (a *Async) Process(ctx context.Context, msg []byte) error {
	c, err := decodeContinuation(msg)
	if err != nil {
		return fmt.Errorf("process continuation: %w", err)
	}
	return a.continueRequest(ctx, c.ID)
}

// session is a claim held while a continuation runs.
type session struct {
	rec      *asyncRecord // as claimed
	owner    string
	inflight bool // Finish of an inflight claim, not a queue worker
	// stopped fires when the work must stop: ErrLeaseLost when the lease
	// is lost, ErrCancelRequested when the client cancels, and
	// context.Canceled at the end.
	stopped *causeSignal
	endOnce sync.Once
	endFn   func()

	// cancelTried is set once the session set out to write the
	// cancellation, so that a failure on the way hands on plainly.
	cancelTried bool
}

// end stops renewing the lease and ends the work.
func (s *session) end() { s.endOnce.Do(s.endFn) }

// lost reports whether the lease was lost to another worker.
func (s *session) lost() bool { return errors.Is(s.stopped.Cause(), ErrLeaseLost) }

// work returns ctx, ended too, with the cause, once the session's work
// must stop (stopped). Call done when the work is over.
func (s *session) work(ctx context.Context) (work context.Context, done func()) {
	work, cancel := context.WithCancelCause(ctx)
	if cause := s.stopped.Cause(); cause != nil {
		cancel(cause)
	}
	unhook := s.stopped.onFire(func(cause error) { cancel(cause) })
	return work, func() { unhook(); cancel(context.Canceled) }
}

func (a *Async) continueRequest(ctx context.Context, id string) error {
	now := time.Now()
	owner := newAsyncID()
	deadline, _ := ctx.Deadline()
	until := now.Add(a.leaseLen())
	if !deadline.IsZero() && deadline.Before(until) {
		until = deadline
	}
	var first, seen bool
	rec, err := a.records().update(ctx, id, func(r *asyncRecord) (err error) {
		first, seen, err = r.claim(owner, now, until)
		return err
	})
	switch {
	case errors.Is(err, ErrNotFound), errors.Is(err, errNoop):
		return nil
	case errors.Is(err, errBadRecord):
		// Terminal: no delivery can ever decode it. The message is
		// settled; the status URI answers CorruptRecord.
		a.reportCorrupt(ctx, id, err)
		return nil
	case errors.Is(err, errLeased):
		return a.requeue(ctx, id, rec.Claim.Until.Sub(now))
	case err != nil:
		return fmt.Errorf("claim %s: %w", id, err)
	}
	ctx, endObs := a.startContinuation(ctx, rec)
	defer endObs()

	stopped := newCauseSignal()
	stop := a.records().keepLease(ctx, id, owner, a.leaseLen(), deadline, stopped.fire)
	unlisten := a.cancels.listen(id, stopped.fire)
	s := &session{rec: rec, owner: owner, stopped: stopped, endFn: func() { unlisten(); stop(); stopped.fire(context.Canceled) }}
	defer s.end()
	if first {
		a.notify(ctx, rec.Topic, id, notifyProcessing)
	}
	if seen {
		// An earlier holder may have committed and died before marking
		// the record done.
		done, err := a.adoptResult(ctx, s)
		if err != nil {
			return errors.Join(fmt.Errorf("continuation %s: read result header: %w", id, err), a.handOn(ctx, s, rec.Attempts, false))
		}
		if done {
			return nil
		}
	}
	if rec.State == StateCancelling {
		// Cancelled before this delivery: not sent (again), not resumed.
		return a.commitCancel(ctx, s, rec.Attempts)
	}
	if !now.Before(rec.Expiry) {
		e := &core.Error{Reason: core.ReasonTTLExpired, Message: "the request expired before any attempt started", Attempts: rec.Attempts}
		if len(rec.Attempts) > 0 {
			e.Message = "the request expired before it could be completed"
		}
		return a.commitError(ctx, s, e)
	}
	limit := core.Budget{}.WithLimit(deadline, a.Margin).Limit
	req, body, err := a.rebuild(ctx, rec, limit)
	switch {
	case errors.Is(err, ErrNotFound), errors.Is(err, errBodyLost):
		return a.commitError(ctx, s, &core.Error{Reason: core.ReasonNone, Message: "the stored request body is missing", Attempts: rec.Attempts, Err: err})
	case err != nil:
		return errors.Join(fmt.Errorf("continuation %s: %w", id, err), a.handOn(ctx, s, rec.Attempts, false))
	}
	if body != nil {
		defer body.Close()
	}
	work, done := s.work(ctx)
	defer done()
	res, ferr := a.forwarder().Forward(work, req)
	return a.settleObserved(ctx, s, res, ferr)
}

// reportCorrupt reports the undecodable record of id to OnError once:
// the first delivery that finds it leaves a mark (gateway/corrupt/<id>,
// created once, naming the error), and later ones, such as a message
// delayed for an in-flight claim, settle silently. Should the mark not be
// writable, it reports anyway.
func (a *Async) reportCorrupt(ctx context.Context, id string, cause error) {
	mark, _ := json.Marshal(map[string]string{"id": id, "err": cause.Error(), "at": time.Now().UTC().Format(time.RFC3339)})
	if _, err := a.Store.Put(ctx, asyncCorruptPrefix+id, mark, ""); errors.Is(err, ErrConflict) {
		return
	}
	a.report(ctx, id, fmt.Errorf("continuation %s: the record cannot be decoded, its message is settled: %w", id, cause))
}

// rebuild makes the request to send again from its record: the route
// resolved anew by path, the attempts already counted taken off its
// MaxAttempts and its host rotation continued, and the body read back. An
// attempt cut by the execution limit does not count: it was not the
// backend's failure. The Closer, if any, is a streamed body's blob.
func (a *Async) rebuild(ctx context.Context, rec *asyncRecord, limit time.Time) (*core.Request, io.Closer, error) {
	if a.Router == nil {
		return nil, nil, errors.New("async: no Router")
	}
	route := *a.Router.Match(rec.Request.Path)
	prior := 0
	for _, at := range rec.Attempts {
		if at.Outcome != core.OutcomeFunctionLimit {
			prior++
		}
	}
	if prior > 0 && len(route.Hosts) > 0 {
		route.MaxAttempts = max(route.MaxAttempts-prior, 1)
		k := prior % len(route.Hosts)
		route.Hosts = append(append(core.HostList{}, route.Hosts[k:]...), route.Hosts[:k]...)
	}
	sn := rec.Request
	req := &core.Request{
		Method: sn.Method, Path: sn.Path, RawQuery: sn.RawQuery, Header: sn.Header,
		Host: sn.Host, RemoteAddr: sn.RemoteAddr, Proto: sn.Proto,
		IdempotencyKey: sn.IdempotencyKey, ClientKey: sn.ClientKey,
		Route:  &route,
		Budget: core.Budget{Arrival: rec.Arrival, TTL: rec.Expiry, Timeout: a.Timeout, Limit: limit},
	}
	if req.Header == nil {
		req.Header = http.Header{}
	}
	if sn.BodySize == 0 {
		return req, nil, nil
	}
	rc, err := a.Store.OpenBlob(ctx, asyncBodyKey(rec.ID))
	if err != nil {
		return nil, nil, fmt.Errorf("open request body: %w", err)
	}
	if sn.BodyStreamed {
		req.Header.Set("Content-Length", strconv.FormatInt(sn.BodySize, 10))
		req.BodyStream = rc
		return req, rc, nil
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, sn.BodySize+1))
	if err != nil {
		return nil, nil, fmt.Errorf("read request body: %w", err)
	}
	if int64(len(b)) != sn.BodySize {
		return nil, nil, fmt.Errorf("%w: %d bytes, want %d", errBodyLost, len(b), sn.BodySize)
	}
	req.Body = b
	return req, nil, nil
}

// requeue leaves a message for request id, visible after wait.
func (a *Async) requeue(ctx context.Context, id string, wait time.Duration) error {
	if err := a.Queue.Enqueue(ctx, wireContinuation{ID: id}.Encode(), queueDelay(wait)); err != nil {
		return fmt.Errorf("re-enqueue continuation %s: %w", id, err)
	}
	return nil
}

// lostLease ends a session whose lease another worker took. A queue worker
// leaves a message delayed to the new lease's end, as for any live lease
// (its own delivery may be the one the queue would redeliver); Finish
// reports ErrLeaseLost.
func (a *Async) lostLease(ctx context.Context, s *session) error {
	s.end()
	if s.inflight {
		return ErrLeaseLost
	}
	ctx, cancel := cleanupContext(ctx)
	defer cancel()
	rec, err := a.records().load(ctx, s.rec.ID)
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
	return a.requeue(ctx, s.rec.ID, wait)
}

// settle turns the outcome of the attempts into the result, or hands the
// request on.
func (a *Async) settle(ctx context.Context, s *session, res *core.Result, ferr error) error {
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
			return a.lostLease(ctx, s)
		case e.Reason == core.ReasonFunctionLimit:
			return a.handOn(ctx, s, all, true)
		case e.Reason == core.ReasonClientGone && errors.Is(ferr, ErrCancelRequested):
			// The client cancelled: handOn writes the cancellation.
			return a.handOn(ctx, s, all, false)
		case e.Reason == core.ReasonClientGone:
			// The invocation's context ended: hand on, and have the
			// queue deliver again.
			herr := a.handOn(ctx, s, all, false)
			if s.inflight {
				return herr
			}
			return errors.Join(fmt.Errorf("continuation %s interrupted: %w", s.rec.ID, ferr), herr)
		}
		return a.commitError(ctx, s, &core.Error{Reason: e.Reason, Message: e.Message, Attempts: all, Err: e.Err})
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
	if ok, err := a.holds(ctx, s, all); !ok {
		return err
	}
	work, done := s.work(ctx)
	err := a.Store.WriteBlob(work, asyncDataKey(s.rec.Container, s.rec.ID), resp.Body, ct, false)
	done()
	if err != nil {
		cut := core.StreamCut(resp.Body)
		switch {
		case s.lost():
			return a.lostLease(ctx, s)
		case errors.Is(cut, core.ErrFunctionLimit):
			return a.handOn(ctx, s, all, true)
		case errors.Is(cut, core.ErrIdleTimeout):
			return a.commitError(ctx, s, &core.Error{Reason: core.ReasonAttemptTimeout,
				Message:  fmt.Sprintf("the backend's response body (status %d) stalled longer than the idle limit", resp.StatusCode),
				Attempts: all, Err: cut})
		case a.cancelling(ctx, s.rec.ID):
			// The cancel cut the body: handOn writes the cancellation.
			return a.handOn(ctx, s, all, false)
		}
		return errors.Join(fmt.Errorf("continuation %s: write result body: %w", s.rec.ID, err), a.handOn(ctx, s, all, false))
	}
	return a.publish(ctx, s, resp.StatusCode, header, all)
}

// commitError writes e as the result: the error document as the data blob,
// its status in the header blob.
func (a *Async) commitError(ctx context.Context, s *session, e *core.Error) error {
	header := http.Header{
		"Content-Type":    {"application/json"},
		"X-Gateway-Error": {e.Reason.Code()},
		"X-Attempts":      {strconv.Itoa(len(e.Attempts))},
	}
	if ok, err := a.holds(ctx, s, e.Attempts); !ok {
		return err
	}
	work, done := s.work(ctx)
	err := a.Store.WriteBlob(work, asyncDataKey(s.rec.Container, s.rec.ID), bytes.NewReader(e.JSON()), "application/json", false)
	done()
	if err != nil {
		if s.lost() {
			return a.lostLease(ctx, s)
		}
		return errors.Join(fmt.Errorf("continuation %s: write result body: %w", s.rec.ID, err), a.handOn(ctx, s, e.Attempts, false))
	}
	return a.publish(ctx, s, e.HTTPStatus(), header, e.Attempts)
}

// publish commits the result whose data blob is written: step 3 (the
// header blob, created only if absent) and step 4 (the record marked done).
func (a *Async) publish(ctx context.Context, s *session, status int, header http.Header, all []core.Attempt) error {
	id := s.rec.ID
	// Commit only while still the holder: a successor, once it claimed,
	// may be writing the data blob.
	if ok, err := a.holds(ctx, s, all); !ok {
		return err
	}
	completed := time.Now().UTC().Truncate(time.Second)
	if all == nil {
		all = []core.Attempt{}
	}
	hb, err := json.Marshal(resultHeader{Status: status, Headers: header, ID: id, CompletedAt: completed.Format(time.RFC3339), Attempts: all})
	if err != nil {
		return fmt.Errorf("continuation %s: encode result header: %w", id, err)
	}
	err = a.Store.WriteBlob(ctx, asyncHeaderKey(s.rec.Container, id), bytes.NewReader(hb), "application/json", true)
	s.end()
	switch {
	case errors.Is(err, ErrConflict):
		// Another holder committed first: its result stands.
		_, err := a.adoptResult(ctx, s)
		return err
	case err != nil:
		// Whether the header was written is unknown: the next holder
		// finds out.
		return errors.Join(fmt.Errorf("continuation %s: write result header: %w", id, err), a.handOn(ctx, s, all, false))
	}
	return a.finalize(ctx, id, status, header.Get("X-Gateway-Error"), completed, all)
}

// holds checks, just before a result write, that s still holds the claim
// (its lease may have lapsed, as long as nobody took it over). If it does
// not, or the check fails, it ends the session as lostLease or handOn does
// and returns false with what the caller must return.
func (a *Async) holds(ctx context.Context, s *session, all []core.Attempt) (bool, error) {
	rec, err := a.records().load(ctx, s.rec.ID)
	if err != nil {
		return false, errors.Join(fmt.Errorf("continuation %s: check claim: %w", s.rec.ID, err), a.handOn(ctx, s, all, false))
	}
	if !rec.held(s.owner) {
		return false, a.lostLease(ctx, s)
	}
	return true, nil
}

// adoptResult marks the record done from an existing header blob. It
// reports whether there was one.
func (a *Async) adoptResult(ctx context.Context, s *session) (bool, error) {
	rc, err := a.Store.OpenBlob(ctx, asyncHeaderKey(s.rec.Container, s.rec.ID))
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
	return true, a.finalize(ctx, s.rec.ID, status, h.Headers.Get("X-Gateway-Error"), completed.UTC(), h.Attempts)
}

// finalize marks the record done with its committed result, releasing the
// claim whoever holds it (the header blob decides), and sends the final
// notification.
func (a *Async) finalize(ctx context.Context, id string, status int, gatewayCode string, completed time.Time, all []core.Attempt) error {
	state := resultState(status, gatewayCode)
	var topic string
	end := End{ID: id, State: state, Status: status, Code: gatewayCode}
	_, err := a.records().update(ctx, id, func(r *asyncRecord) error {
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
	a.countEnd(state)
	if a.OnEnd != nil {
		end.Completed = time.Now()
		a.OnEnd(ctx, end)
	}
	a.notify(ctx, topic, id, state.notification())
	return nil
}

// countEnd counts an async request's ending in Stats, by its final state.
func (a *Async) countEnd(state State) {
	if a.Stats == nil {
		return
	}
	switch state {
	case StateSucceeded:
		a.Stats.AsyncSucceeded.Add(1)
	case StateFailed:
		a.Stats.AsyncFailed.Add(1)
	case StateCanceled:
		a.Stats.AsyncCanceled.Add(1)
	case StateExpired:
		a.Stats.AsyncExpired.Add(1)
	}
}

// handOn releases the claim, keeping the attempts so far. A checkpoint (the
// execution limit cut the work) counts itself and enqueues the next
// continuation; so does an inflight claim, which has no delivery of its own
// for the queue to repeat. A queue worker's other hand-ons rely on its
// delivery coming back.
func (a *Async) handOn(ctx context.Context, s *session, all []core.Attempt, checkpoint bool) error {
	ctx, cancel := cleanupContext(ctx)
	defer cancel()
	if !s.cancelTried && a.cancelling(ctx, s.rec.ID) {
		// A request whose client asked to cancel is not handed on, nor
		// resumed from a checkpoint: the holder writes the cancellation.
		return a.commitCancel(ctx, s, all)
	}
	s.end()
	_, err := a.records().update(ctx, s.rec.ID, func(r *asyncRecord) error { return r.release(s.owner, all, checkpoint) })
	if errors.Is(err, ErrLeaseLost) {
		return a.lostLease(ctx, s)
	}
	if err != nil {
		return fmt.Errorf("continuation %s: release claim: %w", s.rec.ID, err)
	}
	if checkpoint || s.inflight {
		if err := a.Queue.Enqueue(ctx, wireContinuation{ID: s.rec.ID}.Encode(), 0); err != nil {
			return fmt.Errorf("continuation %s: enqueue the next continuation: %w", s.rec.ID, err)
		}
	}
	return nil
}

// Finish ends the inflight claim c with the outcome of the caller's Forward
// call: res and err as Forward returned them (Finish closes res's body). A
// backend response or a final error becomes the one result. An attempt cut
// by the execution limit or by cancellation is handed on instead: a queue
// worker sends the request again, with the same Idempotency-Key.
//
// ctx should outlive the client's request (context.WithoutCancel). Finish
// returns ErrLeaseLost, writing nothing, if the lease lapsed and a queue
// worker took the request over. A claim can be finished once.
func (a *Async) Finish(ctx context.Context, c *Claim, res *core.Result, err error) error {
	closeRes := func() {
		if res != nil && res.Response != nil && res.Response.Body != nil {
			res.Response.Body.Close()
		}
	}
	if c == nil || c.a != a {
		closeRes()
		return errors.New("async finish: not a claim of this engine")
	}
	if !c.finished.CompareAndSwap(false, true) {
		closeRes()
		return errors.New("async finish: claim already finished")
	}
	stopped := newCauseSignal()
	unhook := c.lost.onFire(stopped.fire)
	s := &session{rec: c.rec, owner: c.owner, inflight: true, stopped: stopped,
		endFn: func() { c.stop(); unhook(); stopped.fire(context.Canceled) }}
	defer s.end()
	if s.lost() || errors.Is(c.lost.Cause(), ErrLeaseLost) {
		s.end()
		closeRes()
		return ErrLeaseLost
	}
	return a.settleObserved(ctx, s, res, err)
}

// joinAttempts returns a new timeline: prev, then more.
func joinAttempts(prev, more []core.Attempt) []core.Attempt {
	out := make([]core.Attempt, 0, len(prev)+len(more))
	return append(append(out, prev...), more...)
}

package async

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
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
	return worker{a.engine()}.continueRequest(ctx, c.ID)
}

// worker claims requests for their continuations: a queue delivery's, or
// the canceller's of a request nobody holds.
type worker struct{ engine }

// continueRequest claims request id and continues it: the commit protocol's
// step 1, then the attempts and the result, run by a continuation.
func (w worker) continueRequest(ctx context.Context, id string) error {
	now := time.Now()
	owner := newAsyncID()
	deadline, _ := ctx.Deadline()
	until := now.Add(w.lease)
	if !deadline.IsZero() && deadline.Before(until) {
		until = deadline
	}
	var first, seen bool
	rec, err := w.records.update(ctx, id, func(r *asyncRecord) (err error) {
		first, seen, err = r.claim(owner, now, until)
		return err
	})
	switch {
	case errors.Is(err, ErrNotFound), errors.Is(err, errNoop):
		return nil
	case errors.Is(err, errBadRecord):
		// Terminal: no delivery can ever decode it. The message is
		// settled; the status URI answers CorruptRecord.
		w.reportCorrupt(ctx, id, err)
		return nil
	case errors.Is(err, errLeased):
		return w.requeue(ctx, id, rec.Claim.Until.Sub(now))
	case err != nil:
		return fmt.Errorf("claim %s: %w", id, err)
	}
	if rec.RequestID != "" {
		ctx = core.WithRequestID(ctx, rec.RequestID) // the continuation's lines and notifications name it
	}
	ctx, endObs := w.startContinuation(ctx, rec)
	defer endObs()

	stopped := newCauseSignal()
	stop := w.records.keepLease(ctx, id, owner, w.lease, deadline, stopped.fire)
	unlisten := w.cancels.listen(id, stopped.fire)
	s := &continuation{engine: w.engine, rec: rec, owner: owner, stopped: stopped, endFn: func() { unlisten(); stop(); stopped.fire(context.Canceled) }}
	defer s.end()
	if first {
		w.notes.notify(ctx, rec.Topic, id, notifyProcessing)
	}
	if seen {
		// An earlier holder may have committed and died before marking
		// the record done.
		done, err := s.adoptResult(ctx)
		if err != nil {
			return errors.Join(fmt.Errorf("continuation %s: read result header: %w", id, err), s.handOn(ctx, rec.Attempts, false))
		}
		if done {
			return nil
		}
	}
	if rec.State == StateCancelling {
		// Cancelled before this delivery: not sent (again), not resumed.
		return s.commitCancel(ctx, rec.Attempts)
	}
	if !now.Before(rec.Expiry) {
		e := &core.Error{Reason: core.ReasonTTLExpired, Message: "the request expired before any attempt started", Attempts: rec.Attempts}
		if len(rec.Attempts) > 0 {
			e.Message = "the request expired before it could be completed"
		}
		return s.commitError(ctx, e)
	}
	limit := core.Budget{}.WithLimit(deadline, w.margin).Limit
	req, body, err := w.rebuild(ctx, rec, limit)
	switch {
	case errors.Is(err, ErrNotFound), errors.Is(err, errBodyLost):
		return s.commitError(ctx, &core.Error{Reason: core.ReasonNone, Message: "the stored request body is missing", Attempts: rec.Attempts, Err: err})
	case err != nil:
		return errors.Join(fmt.Errorf("continuation %s: %w", id, err), s.handOn(ctx, rec.Attempts, false))
	}
	if body != nil {
		defer body.Close()
	}
	work, done := s.work(ctx)
	defer done()
	res, ferr := w.fwd.Forward(work, req)
	return s.settleObserved(ctx, res, ferr)
}

// reportCorrupt reports the undecodable record of id to OnError once:
// the first delivery that finds it leaves a mark (gateway/corrupt/<id>,
// created once, naming the error), and later ones, such as a message
// delayed for an in-flight claim, settle silently. Should the mark not be
// writable, it reports anyway.
func (w worker) reportCorrupt(ctx context.Context, id string, cause error) {
	mark, _ := json.Marshal(map[string]string{"id": id, "err": cause.Error(), "at": time.Now().UTC().Format(time.RFC3339)})
	if _, err := w.store.Put(ctx, asyncCorruptPrefix+id, mark, ""); errors.Is(err, ErrConflict) {
		return
	}
	w.onError.report(ctx, id, fmt.Errorf("continuation %s: the record cannot be decoded, its message is settled: %w", id, cause))
}

// rebuild makes the request to send again from its record: the route
// resolved anew by path, the attempts already counted taken off its
// MaxAttempts and its host rotation continued, and the body read back. An
// attempt cut by the execution limit does not count: it was not the
// backend's failure. The Closer, if any, is a streamed body's blob.
func (w worker) rebuild(ctx context.Context, rec *asyncRecord, limit time.Time) (*core.Request, io.Closer, error) {
	if w.router == nil {
		return nil, nil, errors.New("async: no Router")
	}
	route := *w.router.Match(rec.Request.Path)
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
		IdempotencyKey: sn.IdempotencyKey, ClientKey: sn.ClientKey, RequestID: rec.RequestID,
		Route:  &route,
		Budget: core.Budget{Arrival: rec.Arrival, TTL: rec.Expiry, Timeout: w.timeout, Limit: limit},
	}
	if req.Header == nil {
		req.Header = http.Header{}
	}
	if sn.BodySize == 0 {
		return req, nil, nil
	}
	rc, err := w.store.OpenBlob(ctx, asyncBodyKey(rec.ID))
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
func (e engine) requeue(ctx context.Context, id string, wait time.Duration) error {
	if err := e.queue.Enqueue(ctx, wireContinuation{ID: id}.Encode(), queueDelay(wait)); err != nil {
		return fmt.Errorf("re-enqueue continuation %s: %w", id, err)
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
	s := &continuation{engine: a.engine(), rec: c.rec, owner: c.owner, inflight: true, stopped: stopped,
		endFn: func() { c.stop(); unhook(); stopped.fire(context.Canceled) }}
	defer s.end()
	if s.lost() || errors.Is(c.lost.Cause(), ErrLeaseLost) {
		s.end()
		closeRes()
		return ErrLeaseLost
	}
	return s.settleObserved(ctx, res, err)
}

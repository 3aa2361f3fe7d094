package async

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"fngateway/core"
)

// The store layout: records, request bodies and the idempotency index live
// in the gateway container; results in the profile's.
const (
	asyncRecordsPrefix     = "gateway/records/"
	asyncRequestsPrefix    = "gateway/requests/"
	asyncIdempotencyPrefix = "gateway/idempotency/"
	// asyncCorruptPrefix marks records found undecodable, once reported.
	asyncCorruptPrefix = "gateway/corrupt/"

	// defaultResultContainer holds async results for profiles without an
	// async-config.containername.
	defaultResultContainer = "gateway-results"
	// StatusPrefix is the path of the status URIs: StatusPrefix+id.
	StatusPrefix = "/_gateway/async/"
)

const (
	// defaultAsyncTTL is used when Async.TTL is zero (AsyncTTLSecs' default).
	defaultAsyncTTL = 24 * time.Hour
	// DefaultLease is the length of a claim's lease when Async.Lease is
	// zero. Its holder renews it every third of it (5 s) while it works,
	// so a continuation whose instance died resumes elsewhere within 15 s.
	DefaultLease = 15 * time.Second
	// defaultTriggerTimeout is used when Async.TriggerTimeout is zero
	// (AsyncTriggerTimeout's default).
	defaultTriggerTimeout = 10 * time.Second
	// maxQueueDelay is the longest delay a queue takes (SQS: 15 minutes).
	maxQueueDelay = 15 * time.Minute
	// asyncPoll is the first Retry-After of a pending request.
	asyncPoll = 2 * time.Second
	// defaultPollMax caps the Retry-After when Async.PollMax is zero
	// (AsyncPollMaxSecs' default).
	defaultPollMax = 30 * time.Second
	// cleanupTimeout bounds writes made after the caller's context ended.
	cleanupTimeout = 30 * time.Second
	// maxUpdateTries bounds the retries of a conditional record write.
	maxUpdateTries = 16
	// maxHeaderBlobBytes bounds a header blob read back.
	maxHeaderBlobBytes = 1 << 20
)

// ReadGrace is how long, at most, an async request can still be read
// after its expiry (AsyncTTLSecs from arrival): the read grace is 5
// minutes, or the request's own TTL when that is shorter (a request that
// lives 2 s is readable until 4 s after its arrival). Until its end the
// status URI answers and signs result URLs (valid at most until then);
// after it Status returns ReasonExpired (410) and the stores may delete the
// request's record, blobs and idempotency entry.
const ReadGrace = 5 * time.Minute

// readable returns when r stops being readable (readEnd), or, from then
// on, an *Error with ReasonExpired.
func (r *asyncRecord) readable(now time.Time) (end time.Time, err error) {
	end = readEnd(r.Arrival, r.Expiry)
	if !now.Before(end) {
		return end, &core.Error{Reason: core.ReasonExpired, Message: fmt.Sprintf("async request %s expired at %s (readable until %s)",
			r.ID, r.Expiry.Format(time.RFC3339), end.Format(time.RFC3339))}
	}
	return end, nil
}

// readEnd is when a request that arrived at arrival and expires at expiry
// stops being readable: its expiry plus its read grace.
func readEnd(arrival, expiry time.Time) time.Time {
	return expiry.Add(max(min(ReadGrace, expiry.Sub(arrival)), 0))
}

// ErrLeaseLost is returned by Finish when the claim's lease lapsed and a
// queue worker took the request over: the result is that worker's to write.
var ErrLeaseLost = errors.New("async lease lost to another worker")

// Async is the platform-neutral async continuation engine of docs/async-api.md:
// Submit hands a request on, Process continues it in a fresh invocation,
// Status reports on it. Its methods are safe for concurrent use once its
// fields are set.
//
// A serverless invocation cannot keep working after it answers, so Submit
// makes the request durable (body blob, record, queue message, idempotency
// entry) before it returns, and the queue delivers at least once, so
// Process may run twice for one message. How Submit and Process still give
// exactly one result, including after a crash between any two steps, is
// the commit protocol described in protocol.go.
type Async struct {
	// Store keeps records and blobs. Required.
	Store Store
	// Queue carries continuation messages. Required.
	Queue Queue
	// Notifier sends lifecycle notifications to a profile's topic. If nil,
	// none are sent.
	Notifier Notifier
	// Forwarder runs the attempts. If nil, a zero Forwarder is used.
	Forwarder *core.Forwarder
	// Router resolves the route of a stored request by its path. Required
	// by Process.
	Router *core.Router
	// TTL is AsyncTTLSecs: the expiry, counted from arrival, and the
	// lifetime of the result URLs. Zero means defaultAsyncTTL.
	TTL time.Duration
	// Timeout is AsyncTimeout: one attempt's window once async. Zero means
	// none (the TTL and the execution limit still bound attempts).
	Timeout time.Duration
	// Margin is kept free before the invocation's own deadline
	// (ctx.Deadline()) to checkpoint and hand on. Zero means none.
	Margin time.Duration
	// TriggerTimeout is AsyncTriggerTimeout: how long Run waits for the
	// backend's answer before it hands the request off. Zero means
	// defaultTriggerTimeout.
	TriggerTimeout time.Duration
	// Lease is how long a claim holds without renewal; its holder renews
	// it every third of it while it works (the heartbeat), so a holder
	// that dies is replaced within one lease. Zero means DefaultLease.
	Lease time.Duration
	// PollMax is AsyncPollMaxSecs: the longest Retry-After of a pending
	// request, whose interval grows with its age (pollPolicy). Zero means
	// defaultPollMax (30 s).
	PollMax time.Duration
	// Continuations bounds the continuations this instance works on at
	// once, in-process finishes after a 202 and queue deliveries alike
	// (MaxContinuations), and drains them on shutdown. If nil, Run never
	// finishes a request in-process: every hand-off runs from the queue.
	Continuations *Continuations
	// Stats, if set, counts hand-offs.
	Stats *core.Stats
	// Predictor, if set, hands a route's requests off at once while its
	// recent ones outlast the trigger (AsyncPredictWindow). Nil: off.
	Predictor *Predictor
	// Host states what the host can do. With WorkAfterAnswer set,
	// notifications are sent in the background, in order, off the
	// answer's path; otherwise (the zero value) before the call that
	// causes them returns.
	Host core.HostCaps
	// ScopeHeaders are the request headers whose values, hashed, scope a
	// client's Idempotency-Key together with the profile and the verified
	// caller (IdempotencyScopeHeaders; see WithCaller). If nil,
	// DefaultIdempotencyScopeHeaders.
	ScopeHeaders []string
	// OnError, if set, receives the errors core cannot return to a
	// caller: notifications that failed, and corrupt records whose
	// messages Process settled. The edge logs them. It may be called from
	// several goroutines at once. If nil, they are dropped.
	OnError func(ctx context.Context, id string, err error)
	// OnEnd, if set, is told once when an async request ends, in the
	// invocation that commits its one result: an in-process finish, a
	// queue continuation, or the DELETE that settles an unheld request
	// (docs/observability.md#when-an-async-request-ends). The edge logs it. It may be called from several
	// goroutines at once. If nil, nothing is told.
	OnEnd func(ctx context.Context, e End)

	// notes sends notifications in the background (Host.WorkAfterAnswer).
	notes notifier

	// cancels are the continuations running here, told of a Cancel.
	cancels cancelListeners

	// tuning, once Retune is called, replaces the fields it names.
	tuning atomic.Pointer[Tuning]
}

// Tuning is what a reload of the settings changes in a running engine:
// the forwarder and routes, and the async deadlines. A call that has begun
// keeps the values it began with.
type Tuning struct {
	Forwarder                    *core.Forwarder
	Router                       *core.Router
	TTL, Timeout, TriggerTimeout time.Duration
}

// Retune replaces Forwarder, Router, TTL, Timeout and TriggerTimeout for
// the calls that begin from now on; it is safe while a serves.
func (a *Async) Retune(t Tuning) { a.tuning.Store(&t) }

// tuned returns the fields Retune replaces, as they are now.
func (a *Async) tuned() Tuning {
	if t := a.tuning.Load(); t != nil {
		return *t
	}
	return Tuning{Forwarder: a.Forwarder, Router: a.Router, TTL: a.TTL, Timeout: a.Timeout, TriggerTimeout: a.TriggerTimeout}
}

// End is how an async request ended, for OnEnd.
type End struct {
	// ID is the request's id.
	ID string
	// State is its final state: succeeded, failed, expired or canceled.
	State State
	// Status is the final status: the backend's, or the gateway's error's.
	Status int
	// Code is the gateway's error code, or "" for a backend's answer.
	Code string
	// Attempts is the number of attempts, across every invocation.
	Attempts int
	// Arrival is when the request arrived; Completed when this
	// invocation committed its result (to the clock's precision, unlike
	// the header blob's whole-second completedAt).
	Arrival, Completed time.Time
}

// Accepted is what the 202 Accepted answer carries.
type Accepted struct {
	// ID is the async request's id: 32 hex digits (128 random bits).
	ID string
	// StatusURI is relative, "/_gateway/async/<id>"; the HTTP adapter makes
	// it absolute. DataURI and HeaderURI are read URLs of the result blobs,
	// valid until the request expires (they may be relative too).
	StatusURI, DataURI, HeaderURI string
	// RetryAfter is the suggested poll interval.
	RetryAfter time.Duration
	// Reason says why the request was handed off (ReasonTrigger,
	// ReasonFunctionLimit, ReasonRequeued, ReasonPredicted); empty for an
	// earlier submission's Accepted answered again.
	Reason string
}

// Claim is the hold of a submitting process on an async request it keeps
// running itself (Submit with inflight set). Until Finish is called, a
// goroutine renews its lease (at most until the request's expiry), so
// Finish must be called exactly once. A Claim is safe for concurrent use.
type Claim struct {
	a        *Async // whose Finish it is for
	id       string
	owner    string
	rec      *asyncRecord
	lost     *causeSignal // fires with ErrLeaseLost or ErrCancelRequested
	stop     func()       // stops renewing the lease
	finished atomic.Bool
}

// ID returns the async request's id.
func (c *Claim) ID() string { return c.id }

// Lost returns a channel closed when the lease was lost to a queue worker
// (the submitting process stalled past it): the in-flight attempt may stop,
// since Finish will return ErrLeaseLost. It is closed too when a lease
// renewal finds that the client asked to cancel (cause ErrCancelRequested):
// the attempt should stop, and Finish writes the cancellation.
func (c *Claim) Lost() <-chan struct{} { return c.lost.Done() }

// StatusView is what Status reports on an async request.
type StatusView struct {
	ID    string
	State State
	// Arrival and Expiry are the request's; Attempts its timeline so far;
	// Checkpoints the invocations that handed it on.
	Arrival, Expiry time.Time
	Attempts        []core.Attempt
	Checkpoints     int
	// Once done: the result's status, when it was committed, and freshly
	// signed URLs of its blobs (DataURI is the 303's Location).
	ResultStatus       int
	CompletedAt        time.Time
	DataURI, HeaderURI string
	// RetryAfter is the suggested poll interval while pending; zero when
	// done.
	RetryAfter time.Duration
	// ResultCode is the gateway's error code of a gateway-made result
	// ("" for the backend's answer); Changed is when State last changed
	// (the arrival if it never did); CancelRequested when the client asked
	// to cancel (zero: never).
	ResultCode               string
	Changed, CancelRequested time.Time

	container string // of the result blobs
}

func asyncRecordKey(id string) string { return asyncRecordsPrefix + id + ".json" }
func asyncBodyKey(id string) string   { return asyncRequestsPrefix + id }
func asyncDataKey(container, id string) string {
	return container + "/" + id + "/data"
}
func asyncHeaderKey(container, id string) string {
	return container + "/" + id + "/headers.json"
}

// queueDelay rounds d up to whole seconds (what queues take) within
// [0, maxQueueDelay].
func queueDelay(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	d = (d + time.Second - 1).Truncate(time.Second)
	return min(d, maxQueueDelay)
}

// cleanupContext is for writes that must happen even though ctx ended.
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
}

func asyncUnavailable(what string, err error) *core.Error {
	return &core.Error{Reason: core.ReasonAsyncUnavailable, Message: "the async hand-off could not be made durable: " + what, Err: err}
}

// Submit makes the continuation of req durable and returns what the 202
// answer carries. See Async for the order of writes and what a failure
// leaves behind; any store or queue failure is an *Error with
// ReasonAsyncUnavailable.
//
// profile may be nil (no profile: the default result container, no
// notifications). A client-given Idempotency-Key seen before within the same
// profile, from the same caller (see idempotency.key), returns the
// earlier submission's Accepted and a nil Claim, and
// enqueues nothing, if the request is the same (see idempotency.replay); for a
// different request it is an *Error with ReasonIdempotencyKeyReused.
//
// With inflight set, the caller (a host whose process runs on after
// answering) keeps its in-flight attempt running: the record is created
// claimed by the returned Claim, whose lease is renewed until Finish. Its
// queue message is delayed to the lease's end, so that a queue worker takes
// over only if the caller dies. A nil Claim with a nil error means an
// earlier submission owns the request: the caller must drop its attempt.
//
// req.Body is stored whole; a req.BodyStream not yet read is streamed to
// the store instead, and its continuation sends it by one attempt only.
func (a *Async) Submit(ctx context.Context, req *core.Request, profile *core.Profile, inflight bool) (*Accepted, *Claim, error) {
	return a.submit(ctx, req, profile, inflight, 0)
}

// submit is Submit with the queue message of a request not in flight
// visible only after after (a requeue).
func (a *Async) submit(ctx context.Context, req *core.Request, profile *core.Profile, inflight bool, after time.Duration) (*Accepted, *Claim, error) {
	h := handoff{a.engine()}
	ctx, end := h.start(ctx)
	acc, c, err := h.submit(ctx, req, profile, inflight, after)
	end(acc, err)
	if err != nil {
		a.Stats.CountEnd(core.ReasonOf(err))
		return nil, nil, err
	}
	if a.Stats != nil {
		a.Stats.AsyncAccepted.Add(1)
	}
	if c != nil {
		c.a = a
	}
	return acc, c, nil
}

// Status reports on async request id. An id that is malformed, unknown, or
// of a submission that failed is an error wrapping ErrNotFound. A request
// past its expiry plus its read grace (see ReadGrace) is an *Error with ReasonExpired,
// whatever its state, and nothing is signed; one whose record cannot be
// decoded is an *Error with ReasonCorruptRecord wrapping errBadRecord (it
// never completes). Once done, the view carries URLs of the result blobs
// that the store signs now, for the status URI's 303 to follow at once:
// valid for a few minutes (redirectURLLifetime), as the ones a gateway
// result URL redirects to, never past the end of the read grace.
func (a *Async) Status(ctx context.Context, id string) (*StatusView, error) {
	if !validAsyncID(id) {
		return nil, fmt.Errorf("async status: malformed id: %w", ErrNotFound)
	}
	e := a.engine()
	rec, err := e.records.loadReadable(ctx, id, "async status")
	if err != nil {
		return nil, err
	}
	now := time.Now()
	end, err := rec.readable(now)
	if err != nil {
		return nil, err
	}
	v := &StatusView{ID: id, State: rec.State, Arrival: rec.Arrival, Expiry: rec.Expiry, container: rec.Container,
		Attempts: rec.Attempts, Checkpoints: rec.Checkpoints, Changed: rec.Changed, CancelRequested: rec.CancelRequested}
	if v.Changed.IsZero() {
		v.Changed = rec.Arrival
	}
	if !rec.State.Done() || rec.Result == nil {
		v.RetryAfter = e.poll.after(now.Sub(rec.Arrival), rec.Expiry.Sub(now))
		return v, nil
	}
	v.ResultStatus, v.CompletedAt, v.ResultCode = rec.Result.Status, rec.Result.CompletedAt, rec.Result.Code
	until := redirectUntil(now, end)
	if v.DataURI, err = a.Store.SignURL(ctx, asyncDataKey(rec.Container, id), until); err != nil {
		return nil, fmt.Errorf("async status %s: sign data URL: %w", id, err)
	}
	if v.HeaderURI, err = a.Store.SignURL(ctx, asyncHeaderKey(rec.Container, id), until); err != nil {
		return nil, fmt.Errorf("async status %s: sign header URL: %w", id, err)
	}
	return v, nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

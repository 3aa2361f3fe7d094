package core

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
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
	// AsyncStatusPrefix is the path of the status URIs: AsyncStatusPrefix+id.
	AsyncStatusPrefix = "/_gateway/async/"
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
	// asyncPoll is the Retry-After of a pending request.
	asyncPoll = 2 * time.Second
	// resultURLGrace is the least lifetime of a URL signed by Status, so
	// that a result read at or near expiry can still be fetched; never past
	// the end of the request's read grace (see AsyncReadGrace).
	resultURLGrace = AsyncReadGrace
	// cleanupTimeout bounds writes made after the caller's context ended.
	cleanupTimeout = 30 * time.Second
	// maxUpdateTries bounds the retries of a conditional record write.
	maxUpdateTries = 16
	// maxHeaderBlobBytes bounds a header blob read back.
	maxHeaderBlobBytes = 1 << 20
)

// AsyncReadGrace is how long, at most, an async request can still be read
// after its expiry (AsyncTTLSecs from arrival): the read grace is 5
// minutes, or the request's own TTL when that is shorter (a request that
// lives 2 s is readable until 4 s after its arrival). Until its end the
// status URI answers and signs result URLs (valid at most until then);
// after it Status returns ReasonExpired (410) and the stores may delete the
// request's record, blobs and idempotency entry.
const AsyncReadGrace = 5 * time.Minute

// readEnd is when a request that arrived at arrival and expires at expiry
// stops being readable: its expiry plus its read grace.
func readEnd(arrival, expiry time.Time) time.Time {
	return expiry.Add(max(min(AsyncReadGrace, expiry.Sub(arrival)), 0))
}

// ErrLeaseLost is returned by Finish when the claim's lease lapsed and a
// queue worker took the request over: the result is that worker's to write.
var ErrLeaseLost = errors.New("async lease lost to another worker")

// Async is the platform-neutral async continuation engine of CONTRACT §6:
// Submit hands a request on, Process continues it in a fresh invocation,
// Status reports on it. Its methods are safe for concurrent use once its
// fields are set.
//
// A serverless invocation cannot keep working after it answers, so Submit
// makes the request durable (body blob, record, queue message, idempotency
// entry) before it returns, and the queue delivers at least once, so
// Process may run twice for one message. How Submit and Process still give
// exactly one result, including after a crash between any two steps, is
// the commit protocol described in async_protocol.go.
type Async struct {
	// Store keeps records and blobs. Required.
	Store Store
	// Queue carries continuation messages. Required.
	Queue Queue
	// Notifier sends lifecycle notifications to a profile's topic. If nil,
	// none are sent.
	Notifier Notifier
	// Forwarder runs the attempts. If nil, a zero Forwarder is used.
	Forwarder *Forwarder
	// Router resolves the route of a stored request by its path. Required
	// by Process.
	Router *Router
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
	// Continuations bounds the continuations this instance works on at
	// once, in-process finishes after a 202 and queue deliveries alike
	// (MaxContinuations), and drains them on shutdown. If nil, Run never
	// finishes a request in-process: every hand-off runs from the queue.
	Continuations *Continuations
	// Stats, if set, counts hand-offs.
	Stats *Stats
	// Host states what the host can do. With WorkAfterAnswer set,
	// notifications are sent in the background, in order, off the
	// answer's path; otherwise (the zero value) before the call that
	// causes them returns.
	Host HostCaps
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

	// notes is the background sender's queue (Host.WorkAfterAnswer).
	nmu      sync.Mutex
	npending []pendingNote
	nrunning bool
	nidle    chan struct{} // closed when the running sender stops

	// cancels are the continuations running here, told of a Cancel.
	cancels cancelListeners
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
}

// Claim is the hold of a submitting process on an async request it keeps
// running itself (Submit with inflight set). Until Finish is called, a
// goroutine renews its lease (at most until the request's expiry), so
// Finish must be called exactly once. A Claim is safe for concurrent use.
type Claim struct {
	a        *Async
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
	Attempts        []Attempt
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

// newAsyncID returns 128 random bits as 32 lowercase hex digits.
func newAsyncID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}

func (a *Async) ttl() time.Duration {
	if a.TTL > 0 {
		return a.TTL
	}
	return defaultAsyncTTL
}

// leaseLen is how long a claim lasts before it must be renewed.
func (a *Async) leaseLen() time.Duration {
	if a.Lease > 0 {
		return a.Lease
	}
	return DefaultLease
}

// retryAfter is the poll interval: 2 s, or 1 s when attempts are shorter.
func (a *Async) retryAfter() time.Duration {
	if a.Timeout > 0 && a.Timeout < asyncPoll {
		return time.Second
	}
	return asyncPoll
}

func (a *Async) forwarder() *Forwarder {
	if a.Forwarder != nil {
		return a.Forwarder
	}
	return &Forwarder{}
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

func asyncUnavailable(what string, err error) *Error {
	return &Error{Reason: ReasonAsyncUnavailable, Message: "the async hand-off could not be made durable: " + what, Err: err}
}

// Submit makes the continuation of req durable and returns what the 202
// answer carries. See Async for the order of writes and what a failure
// leaves behind; any store or queue failure is an *Error with
// ReasonAsyncUnavailable.
//
// profile may be nil (no profile: the default result container, no
// notifications). A client-given Idempotency-Key seen before within the same
// profile, from the same caller (see scopedIdempotencyKey), returns the
// earlier submission's Accepted and a nil Claim, and
// enqueues nothing, if the request is the same (see Replay); for a
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
func (a *Async) Submit(ctx context.Context, req *Request, profile *Profile, inflight bool) (*Accepted, *Claim, error) {
	ctx, end := a.startHandoff(ctx)
	acc, c, err := a.submit(ctx, req, profile, inflight)
	end(acc, err)
	if err != nil {
		a.Stats.countEnd(ReasonOf(err))
		return nil, nil, err
	}
	if a.Stats != nil {
		a.Stats.AsyncAccepted.Add(1)
	}
	return acc, c, nil
}

func (a *Async) submit(ctx context.Context, req *Request, profile *Profile, inflight bool) (*Accepted, *Claim, error) {
	now := time.Now()
	arrival := req.Budget.Arrival
	if arrival.IsZero() {
		arrival = now
	}
	expiry := arrival.Add(a.ttl())
	var profileID, topic string
	container := defaultResultContainer
	if profile != nil {
		profileID, topic = profile.UserID, profile.Async.Topic
		if c := profile.Async.ContainerName; c != "" {
			container = c
		}
	}
	if !validContainer(container) {
		return nil, nil, asyncUnavailable("result container name", fmt.Errorf("container %.70q: want 3-63 lowercase letters, digits and single hyphens", container))
	}

	// A client's key seen before returns that submission.
	var idemKey, idemVersion, fp string
	if req.ClientKey && req.IdempotencyKey != "" {
		idemKey = a.scopedIdempotencyKey(ctx, req, profileID)
		fp = requestFingerprint(req)
		prev, version, err := a.lookupIdempotent(ctx, idemKey, fp)
		if err != nil {
			return nil, nil, err
		}
		if prev != nil {
			return prev, nil, nil
		}
		idemVersion = version
	}

	id := newAsyncID()
	acc, err := a.accepted(ctx, id, container, expiry)
	if err != nil {
		return nil, nil, asyncUnavailable("sign the result URLs", err)
	}
	// 1. The request snapshot's body.
	snap := snapshotRequest(req)
	snap.Trace = traceContextOf(ctx)
	if err := a.storeBody(ctx, id, req, &snap); err != nil {
		return nil, nil, asyncUnavailable("store the request body", err)
	}
	// 2. The record.
	rec := &asyncRecord{V: recordVersion, ID: id, State: StateQueued, Profile: profileID, Topic: topic,
		Container: container, Arrival: arrival.UTC(), Expiry: expiry.UTC(), Request: snap,
		Submitter: a.submitter(ctx, req.Header)}
	var owner string
	lease := a.leaseLen()
	if inflight {
		owner = newAsyncID()
		rec.claimInflight(owner, now.Add(lease))
	}
	enc, err := rec.Encode()
	if err != nil {
		return nil, nil, asyncUnavailable("encode the record", err)
	}
	if _, err := a.Store.Put(ctx, asyncRecordKey(id), enc, ""); err != nil {
		return nil, nil, asyncUnavailable("store the record", err)
	}
	// 3. The message. An inflight claim's message waits for its lease.
	var delay time.Duration
	if inflight {
		delay = queueDelay(lease)
	}
	if err := a.Queue.Enqueue(ctx, wireContinuation{ID: id}.Encode(), delay); err != nil {
		if !a.abandon(ctx, id, owner) {
			return nil, nil, asyncUnavailable("enqueue the continuation", err)
		}
		// A worker claimed the record: the message did go out.
	}
	// 4. The idempotency index, last: an entry names a record whose
	// message went out.
	if idemKey != "" {
		other, err := a.index(ctx, idemKey, idemVersion, fp, readEnd(arrival, expiry), acc)
		var ge *Error
		switch {
		case errors.As(err, &ge) && ge.Reason == ReasonIdempotencyKeyReused:
			// A different request won the key meanwhile.
			a.abandon(ctx, id, owner)
			return nil, nil, err
		case other != nil:
			// A concurrent submission with the same key won the index.
			// Ours is abandoned; should a worker have claimed it already,
			// it runs too, with the same Idempotency-Key.
			a.abandon(ctx, id, owner)
			return other, nil, nil
		case err != nil:
			if !a.abandon(ctx, id, owner) {
				return nil, nil, asyncUnavailable("write the idempotency index", err)
			}
		}
	}
	a.notify(ctx, topic, id, notifyQueued)
	if !inflight {
		return acc, nil, nil
	}
	a.notify(ctx, topic, id, notifyProcessing)
	c := &Claim{a: a, id: id, owner: owner, rec: rec}
	c.lost = newCauseSignal()
	// Renewed up to the request's expiry: past it, a worker writes the
	// expired result should the caller never finish.
	c.stop = a.keepLease(ctx, id, owner, lease, rec.Expiry, c.lost.fire)
	return acc, c, nil
}

// accepted builds the Accepted of request id.
func (a *Async) accepted(ctx context.Context, id, container string, expiry time.Time) (*Accepted, error) {
	data, err := a.Store.SignURL(ctx, asyncDataKey(container, id), expiry)
	if err != nil {
		return nil, err
	}
	header, err := a.Store.SignURL(ctx, asyncHeaderKey(container, id), expiry)
	if err != nil {
		return nil, err
	}
	return &Accepted{ID: id, StatusURI: AsyncStatusPrefix + id, DataURI: data, HeaderURI: header, RetryAfter: a.retryAfter()}, nil
}

// snapshotRequest copies what a continuation needs of req, body aside.
func snapshotRequest(req *Request) requestSnapshot {
	return requestSnapshot{
		Method: req.Method, Path: req.Path, RawQuery: req.RawQuery, Header: req.Header.Clone(),
		Host: req.Host, RemoteAddr: req.RemoteAddr, Proto: req.Proto,
		IdempotencyKey: req.IdempotencyKey, ClientKey: req.ClientKey,
	}
}

// storeBody writes req's body, if any, to its blob and notes its size.
func (a *Async) storeBody(ctx context.Context, id string, req *Request, snap *requestSnapshot) error {
	switch {
	case req.BodyStream != nil:
		cr := &countingReader{r: req.BodyStream}
		if err := a.Store.WriteBlob(ctx, asyncBodyKey(id), cr, "application/octet-stream", true); err != nil {
			return err
		}
		snap.BodySize, snap.BodyStreamed = cr.n, cr.n > 0
	case len(req.Body) > 0:
		if err := a.Store.WriteBlob(ctx, asyncBodyKey(id), bytes.NewReader(req.Body), "application/octet-stream", true); err != nil {
			return err
		}
		snap.BodySize = int64(len(req.Body))
	}
	return nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// errMovedOn and errNoop end an update function without writing.
var (
	errMovedOn = errors.New("record moved on")
	errNoop    = errors.New("nothing to change")
)

// abandon marks the record of a failed submission abandoned, so that a
// message that went out after all changes nothing. It reports whether the
// record had moved on instead: a worker claimed it, so the message went out
// and the hand-off is durable. owner is the submission's own inflight
// claim, or "".
func (a *Async) abandon(ctx context.Context, id, owner string) (movedOn bool) {
	ctx, cancel := cleanupContext(ctx)
	defer cancel()
	_, err := a.updateRecord(ctx, id, func(r *asyncRecord) error { return r.abandon(owner) })
	return errors.Is(err, errMovedOn)
}

// Replay answers a resubmission without reaching a backend. It returns
// nil, nil when req carries no client-given Idempotency-Key, or one not seen
// before within the profile (profile may be nil) from the same caller (the
// same values of the ScopeHeaders, the same verified identity of
// WithCaller): the request is new. For
// a key seen before with the same request — method, path, query and body,
// compared by SHA-256 fingerprint — it returns the first submission's
// Accepted (same id and URIs), whatever that request's state. For a key
// seen before with a different request it returns an *Error with
// ReasonIdempotencyKeyReused and nothing of the first request. A store
// that cannot be read is an *Error with ReasonAsyncUnavailable.
//
// Call it before forwarding an async-eligible request, so that a
// resubmission never reaches the backend again. A request whose body is
// an unread BodyStream cannot be fingerprinted: with a key seen before it
// is always ReasonIdempotencyKeyReused.
func (a *Async) Replay(ctx context.Context, req *Request, profile *Profile) (*Accepted, error) {
	if !req.ClientKey || req.IdempotencyKey == "" {
		return nil, nil
	}
	var profileID string
	if profile != nil {
		profileID = profile.UserID
	}
	prev, _, err := a.lookupIdempotent(ctx, a.scopedIdempotencyKey(ctx, req, profileID), requestFingerprint(req))
	if err != nil {
		return nil, err
	}
	return prev, nil
}

// requestFingerprint identifies what a request asks for: the SHA-256 of
// its method, path, query and the SHA-256 of its body, each
// length-prefixed. It is "" for a body not read yet (a BodyStream), which
// matches no fingerprint, its own included.
func requestFingerprint(req *Request) string {
	if req.BodyStream != nil {
		return ""
	}
	body := sha256.Sum256(req.Body)
	h := sha256.New()
	for _, part := range []string{req.Method, req.Path, req.RawQuery, hex.EncodeToString(body[:])} {
		fmt.Fprintf(h, "%d:%s\n", len(part), part)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// keyReused is the error of a key used before for another request.
func keyReused() *Error {
	return &Error{Reason: ReasonIdempotencyKeyReused,
		Message: "this Idempotency-Key was used for a different request (method, path, query or body); use a new key"}
}

// lookupIdempotent returns the Accepted recorded under the index key for a
// request with fingerprint fp, or nil and the version of an entry that may
// be taken over ("" when there is none): one that is unreadable or names a
// record that is missing, abandoned or past its read grace. An entry of another fingerprint is
// an *Error with ReasonIdempotencyKeyReused; a store failure one with
// ReasonAsyncUnavailable.
func (a *Async) lookupIdempotent(ctx context.Context, key, fp string) (*Accepted, string, error) {
	data, version, err := a.Store.Get(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", asyncUnavailable("read the idempotency index", err)
	}
	var e idempotencyEntry
	if decodeStrict(data, &e) != nil || e.V != 1 || !validAsyncID(e.ID) {
		return nil, version, nil
	}
	rec, err := a.loadRecord(ctx, e.ID)
	switch {
	case errors.Is(err, ErrNotFound), errors.Is(err, errBadRecord):
		return nil, version, nil
	case err != nil:
		return nil, "", asyncUnavailable("read the idempotency index", err)
	case rec.State == StateAbandoned, !time.Now().Before(readEnd(rec.Arrival, rec.Expiry)):
		// Abandoned, or past its read grace (a store without a sweep
		// keeps it): the key is free again.
		return nil, version, nil
	}
	// Compared in constant time: the fingerprint is a digest of the body.
	if fp == "" || subtle.ConstantTimeCompare([]byte(e.Fingerprint), []byte(fp)) != 1 {
		return nil, "", keyReused()
	}
	return &Accepted{ID: e.ID, StatusURI: e.StatusURI, DataURI: e.DataURI, HeaderURI: e.HeaderURI, RetryAfter: a.retryAfter()}, "", nil
}

// index writes acc under the idempotency key (create, or take over the
// entry at version), with the request's fingerprint and the end of its
// read grace. It returns
// the Accepted of a concurrent submission of the same request that won the
// key instead, if any, or the error of lookupIdempotent for one that is
// not the same request.
func (a *Async) index(ctx context.Context, key, version, fp string, readableUntil time.Time, acc *Accepted) (*Accepted, error) {
	b, _ := json.Marshal(idempotencyEntry{V: 1, ID: acc.ID, StatusURI: acc.StatusURI, DataURI: acc.DataURI, HeaderURI: acc.HeaderURI,
		Fingerprint: fp, ReadableUntil: readableUntil.UTC()})
	_, err := a.Store.Put(ctx, key, b, version)
	if err == nil {
		return nil, nil
	}
	if !errors.Is(err, ErrConflict) {
		return nil, err
	}
	other, _, lerr := a.lookupIdempotent(ctx, key, fp)
	if lerr != nil {
		return nil, lerr
	}
	if other == nil {
		return nil, err
	}
	return other, nil
}

// loadRecord reads and decodes the record of id.
func (a *Async) loadRecord(ctx context.Context, id string) (*asyncRecord, error) {
	data, _, err := a.Store.Get(ctx, asyncRecordKey(id))
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

// updateRecord is the read-modify-write of a record: fn changes the record
// read, which is written back only if nobody wrote it meanwhile; on a
// conflict fn runs again on the new version. An error from fn ends the
// update without writing and is returned with the record fn saw.
func (a *Async) updateRecord(ctx context.Context, id string, fn func(*asyncRecord) error) (*asyncRecord, error) {
	key := asyncRecordKey(id)
	for try := 1; ; try++ {
		data, version, err := a.Store.Get(ctx, key)
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
		_, err = a.Store.Put(ctx, key, enc, version)
		if err == nil {
			return r, nil
		}
		if !errors.Is(err, ErrConflict) || try >= maxUpdateTries {
			return nil, fmt.Errorf("write record: %w", err)
		}
	}
}

// maxPendingNotes bounds the background sender's queue; beyond it a
// notification is sent by its caller.
const maxPendingNotes = 1024

// notifyTimeout bounds one notification sent in the background.
const notifyTimeout = 10 * time.Second

// pendingNote is a notification waiting for the background sender.
type pendingNote struct {
	ctx       context.Context // the cause's, without its cancellation
	topic, id string
	body      []byte
}

// notify sends a lifecycle notification when the request has a topic. A
// notification that fails does not fail the request: its error goes to
// OnError. Where the host may work after answering (Host.WorkAfterAnswer)
// it is queued for one background sender, which sends in order; otherwise
// it is sent before notify returns.
func (a *Async) notify(ctx context.Context, topic, id, status string) {
	if a.Notifier == nil || topic == "" {
		return
	}
	b, _ := json.Marshal(notification{RequestGUID: id, Status: status, Timestamp: time.Now().UTC().Format(time.RFC3339), TopicName: topic})
	n := pendingNote{ctx: context.WithoutCancel(ctx), topic: topic, id: id, body: b}
	if !a.Host.WorkAfterAnswer {
		a.sendNote(ctx, n)
		return
	}
	a.nmu.Lock()
	if len(a.npending) >= maxPendingNotes {
		a.nmu.Unlock()
		a.sendNote(ctx, n)
		return
	}
	a.npending = append(a.npending, n)
	start := !a.nrunning
	if start {
		a.nrunning, a.nidle = true, make(chan struct{})
	}
	a.nmu.Unlock()
	if start {
		go a.sendPending()
	}
}

// sendPending sends the queued notifications, oldest first, until none
// are left.
func (a *Async) sendPending() {
	for {
		a.nmu.Lock()
		if len(a.npending) == 0 {
			a.nrunning = false
			close(a.nidle)
			a.nidle = nil
			a.nmu.Unlock()
			return
		}
		n := a.npending[0]
		a.npending[0] = pendingNote{}
		a.npending = a.npending[1:]
		a.nmu.Unlock()
		ctx, cancel := context.WithTimeout(n.ctx, notifyTimeout)
		a.sendNote(ctx, n)
		cancel()
	}
}

// FlushNotifications waits until the notifications queued for the
// background sender have been sent (or have failed), or ctx ends, whose
// error it then returns. A host calls it at shutdown, after the
// continuations drained, so that notifications are not lost with the
// process.
func (a *Async) FlushNotifications(ctx context.Context) error {
	a.nmu.Lock()
	idle := a.nidle
	a.nmu.Unlock()
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (a *Async) sendNote(ctx context.Context, n pendingNote) {
	if err := a.Notifier.Notify(ctx, n.topic, n.body); err != nil {
		a.report(ctx, n.id, fmt.Errorf("async %s: notification to topic %q lost: %w", n.id, n.topic, err))
	}
}

// report hands err to OnError, if set.
func (a *Async) report(ctx context.Context, id string, err error) {
	if a.OnError != nil {
		a.OnError(ctx, id, err)
	}
}

// Status reports on async request id. An id that is malformed, unknown, or
// of a submission that failed is an error wrapping ErrNotFound. A request
// past its expiry plus its read grace (see AsyncReadGrace) is an *Error with ReasonExpired,
// whatever its state, and nothing is signed; one whose record cannot be
// decoded is an *Error with ReasonCorruptRecord wrapping errBadRecord (it
// never completes). Once done, the view carries freshly signed URLs of the
// result blobs, valid until the request expires and for at least a few
// minutes, never past the end of the read grace.
func (a *Async) Status(ctx context.Context, id string) (*StatusView, error) {
	if !validAsyncID(id) {
		return nil, fmt.Errorf("async status: malformed id: %w", ErrNotFound)
	}
	rec, err := a.loadRecord(ctx, id)
	if errors.Is(err, ErrNotFound) || err == nil && rec.State == StateAbandoned {
		return nil, fmt.Errorf("async status %s: %w", id, ErrNotFound)
	}
	if errors.Is(err, errBadRecord) {
		return nil, &Error{Reason: ReasonCorruptRecord, Message: "the record of async request " + id + " cannot be read; it will not complete", Err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("async status %s: %w", id, err)
	}
	now := time.Now()
	end := readEnd(rec.Arrival, rec.Expiry)
	if !now.Before(end) {
		return nil, &Error{Reason: ReasonExpired, Message: fmt.Sprintf("async request %s expired at %s (readable until %s)",
			id, rec.Expiry.Format(time.RFC3339), end.Format(time.RFC3339))}
	}
	v := &StatusView{ID: id, State: rec.State, Arrival: rec.Arrival, Expiry: rec.Expiry, container: rec.Container,
		Attempts: rec.Attempts, Checkpoints: rec.Checkpoints, Changed: rec.Changed, CancelRequested: rec.CancelRequested}
	if v.Changed.IsZero() {
		v.Changed = rec.Arrival
	}
	if !rec.State.Done() || rec.Result == nil {
		v.RetryAfter = a.retryAfter()
		return v, nil
	}
	v.ResultStatus, v.CompletedAt, v.ResultCode = rec.Result.Status, rec.Result.CompletedAt, rec.Result.Code
	until := rec.Expiry
	if least := now.Add(resultURLGrace); until.Before(least) {
		until = least
	}
	until = minTime(until, end)
	if v.DataURI, err = a.Store.SignURL(ctx, asyncDataKey(rec.Container, id), until); err != nil {
		return nil, fmt.Errorf("async status %s: sign data URL: %w", id, err)
	}
	if v.HeaderURI, err = a.Store.SignURL(ctx, asyncHeaderKey(rec.Container, id), until); err != nil {
		return nil, fmt.Errorf("async status %s: sign header URL: %w", id, err)
	}
	return v, nil
}

// resultState is the final state of a result: expired or failed when the
// gateway ended the request with that error code, failed when the
// backend's last answer was a server failure (5xx or 429), else succeeded.
func resultState(status int, gatewayCode string) State {
	switch {
	case gatewayCode == ReasonTTLExpired.Code():
		return StateExpired
	case gatewayCode == ReasonCanceled.Code():
		return StateCanceled
	case gatewayCode != "", status >= 500, status == http.StatusTooManyRequests:
		return StateFailed
	}
	return StateSucceeded
}

func (s State) notification() string {
	switch s {
	case StateSucceeded:
		return notifyProcessed
	case StateExpired:
		return notifyExpired
	}
	return notifyFailed
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

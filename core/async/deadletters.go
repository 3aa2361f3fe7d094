package async

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"fngateway/core"
)

// Dead letters are continuation messages a store set aside after they
// could not be delivered: the SQS dead-letter queue (moved there by the
// continuation queue's RedrivePolicy after maxReceiveCount receives), the
// Azure poison queue <queue>-poison (moved there by the Functions host after
// maxDequeueCount deliveries) and the file store's quarantine/ (messages the
// local worker or the store could not decode). Redriver lists them, shows
// one, and sends them back (docs/operations.md#dead-letters): a request already finished is
// acknowledged and never run twice, one past its expiry is reported and not
// sent.

// DeadLetter is one message held by a dead-letter store.
type DeadLetter struct {
	// ID identifies the message in its store (an SQS message id, an Azure
	// message id, a quarantined file's name); Receipt is what Delete and
	// Release need (a receipt handle, a pop receipt; "" for a file).
	ID, Receipt string
	// Body is the message's payload, decoded from any transport encoding;
	// nil when the store could not read it (see Problem).
	Body []byte
	// Deliveries counts the deliveries the store reports for the message
	// (SQS's ApproximateReceiveCount, carried into the dead-letter queue;
	// the poison queue's own dequeue count; the file's delivery count);
	// 0 when unknown.
	Deliveries int
	// SentAt is when the message was first sent, as far as the store
	// knows (zero when unknown).
	SentAt time.Time
	// Problem says why the store could not read the message, "" when it
	// could.
	Problem string
}

// DeadLetters is a dead-letter store. List holds what it returns for hold
// (the queues hide the messages they return, so that a listing can page
// through them), and the caller then deletes or releases each one. Stores
// are safe for concurrent use.
type DeadLetters interface {
	// List returns up to max dead letters, each hidden from other readers
	// for hold where the store can hide them.
	List(ctx context.Context, max int, hold time.Duration) ([]DeadLetter, error)
	// Delete removes d for good.
	Delete(ctx context.Context, d DeadLetter) error
	// Release makes d visible again at once, unchanged.
	Release(ctx context.Context, d DeadLetter) error
}

// Verdict is what a redrive does with one dead letter, decided by Decide.
type Verdict string

// The verdicts. Only VerdictSend sends; only VerdictSend and
// VerdictFinished remove the dead letter; the rest are reported and left
// in place for the operator.
const (
	// VerdictSend: the request is not finished and has not expired; its
	// continuation goes back on the continuation queue.
	VerdictSend Verdict = "send"
	// VerdictFinished: the request is finished (succeeded, failed,
	// expired with its result, cancelled, or abandoned at submission); its
	// dead letter is acknowledged (deleted) and nothing is sent.
	VerdictFinished Verdict = "finished"
	// VerdictExpired: the request is past its expiry unfinished; it is
	// reported and not sent.
	VerdictExpired Verdict = "expired"
	// VerdictUnknown: no record holds the request: swept after its expiry,
	// or a store other than the one that accepted it (check AsyncStore). It
	// is reported and not sent.
	VerdictUnknown Verdict = "unknown"
	// VerdictCorrupt: the request's record cannot be read; its status URI
	// answers CorruptRecord. Reported, not sent.
	VerdictCorrupt Verdict = "corrupt"
	// VerdictMalformed: the message is not a continuation the gateway can
	// decode. Reported, not sent.
	VerdictMalformed Verdict = "malformed"
	// VerdictNewer: the message or the request's record is in a format
	// version newer than this build reads (ErrNewerFormat); a newer
	// release's command redrives it. Reported, not sent.
	VerdictNewer Verdict = "newer-format"
)

// Sends reports whether v sends the continuation again.
func (v Verdict) Sends() bool { return v == VerdictSend }

// Removes reports whether a redrive with v deletes the dead letter.
func (v Verdict) Removes() bool { return v == VerdictSend || v == VerdictFinished }

// Decide is the redrive rule, in one place: given what the request's
// record says (found: a record exists; state its state; expiry its
// expiry) at time now, the verdict. A message that did not decode and a
// record that could not be read are decided by the caller
// (VerdictMalformed, VerdictCorrupt, VerdictNewer).
func Decide(found bool, state State, expiry, now time.Time) Verdict {
	switch {
	case !found:
		return VerdictUnknown
	case state.Done():
		return VerdictFinished
	case !now.Before(expiry):
		return VerdictExpired
	}
	return VerdictSend
}

// Letter is a dead letter with what its request's record says.
type Letter struct {
	DeadLetter
	// RequestID is the async request's id; "" for a malformed message.
	RequestID string
	// Verdict is what a redrive now does with it.
	Verdict Verdict
	// Profile, State, Arrival and Expiry are the record's (zero without
	// one).
	Profile string
	State   State
	Arrival time.Time
	Expiry  time.Time
	// Attempts are the backend attempts made so far, across invocations;
	// Checkpoints the invocations that handed the request on.
	Attempts    []core.Attempt
	Checkpoints int
	// LastError says what last went wrong, as far as the store and the
	// record tell: the message's or record's defect, or the last attempt's
	// outcome; "" when nothing did.
	LastError string
}

// Key is what an operator names the letter by: its request id, or its
// message id for a malformed message.
func (l *Letter) Key() string {
	if l.RequestID != "" {
		return l.RequestID
	}
	return l.ID
}

// Age is how long ago the request arrived (without a record: since the
// message was sent; zero when neither is known).
func (l *Letter) Age(now time.Time) time.Duration {
	switch {
	case !l.Arrival.IsZero():
		return now.Sub(l.Arrival)
	case !l.SentAt.IsZero():
		return now.Sub(l.SentAt)
	}
	return 0
}

// CanFinish reports whether the request can still finish before its
// expiry: it is not finished, and its expiry is ahead.
func (l *Letter) CanFinish() bool { return l.Verdict == VerdictSend }

// Redriver lists, shows and sends back the dead letters of the
// continuation queue. Its fields must be set; its methods may be called by
// multiple goroutines simultaneously.
type Redriver struct {
	// Store holds the continuation records.
	Store Store
	// Queue is the continuation queue redriven letters are sent to.
	Queue Queue
	// DeadLetters is where the queue's dead letters are.
	DeadLetters DeadLetters
}

// MaxDeadLetters bounds what one listing reads.
const MaxDeadLetters = 10000

// Hold is how long a listing keeps the dead letters it read hidden from
// other readers before it releases or deletes them; a command that dies
// mid-way leaves them visible again after it.
const Hold = 2 * time.Minute

// Inspect reads what the record of d's request says, at time now.
func (r *Redriver) Inspect(ctx context.Context, d DeadLetter, now time.Time) (Letter, error) {
	l := Letter{DeadLetter: d}
	if d.Problem != "" {
		l.Verdict, l.LastError = VerdictMalformed, d.Problem
		return l, nil
	}
	c, err := decodeContinuation(d.Body)
	if errors.Is(err, ErrNewerFormat) {
		l.Verdict, l.LastError = VerdictNewer, err.Error()
		return l, nil
	}
	if err != nil {
		l.Verdict, l.LastError = VerdictMalformed, err.Error()
		return l, nil
	}
	l.RequestID = c.ID
	data, _, err := r.Store.Get(ctx, asyncRecordKey(c.ID))
	if errors.Is(err, ErrNotFound) {
		l.Verdict = Decide(false, "", time.Time{}, now)
		l.LastError = "no record of the request (swept after its expiry, or AsyncStore names another store)"
		return l, nil
	}
	var rec *asyncRecord
	if err == nil {
		rec, err = decodeAsyncRecord(data)
	}
	if errors.Is(err, ErrCorruptRecord) {
		l.Verdict, l.LastError = VerdictCorrupt, err.Error()
		return l, nil
	}
	if errors.Is(err, ErrNewerFormat) {
		l.Verdict, l.LastError = VerdictNewer, err.Error()
		return l, nil
	}
	if err != nil {
		return l, fmt.Errorf("dead letter %s: read record %s: %w", d.ID, c.ID, err)
	}
	l.Profile, l.State, l.Arrival, l.Expiry = rec.Profile, rec.State, rec.Arrival, rec.Expiry
	l.Attempts, l.Checkpoints = rec.Attempts, rec.Checkpoints
	l.Verdict = Decide(true, rec.State, rec.Expiry, now)
	l.LastError = lastError(rec)
	return l, nil
}

// lastError describes what last went wrong with rec's request.
func lastError(rec *asyncRecord) string {
	if res := rec.Result; res != nil && res.Code != "" {
		return fmt.Sprintf("ended %d %s", res.Status, res.Code)
	}
	if n := len(rec.Attempts); n > 0 {
		a := rec.Attempts[n-1]
		if a.Status != 0 {
			return fmt.Sprintf("attempt %d to %s: %s %d", n, a.Host, a.Outcome, a.Status)
		}
		return fmt.Sprintf("attempt %d to %s: %s", n, a.Host, a.Outcome)
	}
	if rec.Claim != nil {
		return fmt.Sprintf("claimed until %s with no attempt recorded (its invocation ended or failed)", rec.Claim.Until.Format(time.RFC3339))
	}
	return ""
}

// List returns every dead letter (at most MaxDeadLetters), inspected at
// now, in the order the store gave them, and releases them.
func (r *Redriver) List(ctx context.Context, now time.Time) ([]Letter, error) {
	ds, err := r.DeadLetters.List(ctx, MaxDeadLetters, Hold)
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	defer r.release(ctx, ds)
	out := make([]Letter, 0, len(ds))
	for _, d := range ds {
		l, err := r.Inspect(ctx, d, now)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// release makes every d visible again, as best it can: a letter left
// hidden comes back by itself after Hold.
func (r *Redriver) release(ctx context.Context, ds []DeadLetter) {
	ctx = context.WithoutCancel(ctx)
	for _, d := range ds {
		r.DeadLetters.Release(ctx, d)
	}
}

// Outcome is what a redrive did, or with dryRun would do, with one
// request's dead letters.
type Outcome struct {
	Letter
	// Copies counts the dead letters that carried the request (a message
	// may be dead-lettered more than once); they are all removed or all
	// kept, and at most one continuation is sent for them.
	Copies int
	// Sent: the continuation went back on the queue; Removed: the dead
	// letters were deleted; Ended: the request was ended (a forced purge).
	// All false in a dry run.
	Sent, Removed, Ended bool
	// Refused says why a purge keeps the letters, "" when it does not.
	Refused string
	// Err is the failure to send or delete, nil when none.
	Err error
}

// Redrive sends back the dead letters whose key (request id or message id)
// is in keys, or every one when keys is empty: for each request, once
// whatever the copies, Decide's verdict at now is carried out. A send goes
// out before its dead letters are deleted, so a failure between the two
// leaves a copy, never nothing; the engine runs a continuation at most once
// to a result whatever the copies. With dryRun nothing is changed. keys
// that match no dead letter are an error naming them, and nothing is done.
func (r *Redriver) Redrive(ctx context.Context, keys []string, dryRun bool, now time.Time) ([]Outcome, error) {
	outs, copies, keep, err := r.gather(ctx, keys, now)
	defer func() { r.release(ctx, *keep) }()
	if err != nil {
		return nil, err
	}
	result := make([]Outcome, 0, len(outs))
	for _, o := range outs {
		if dryRun || !o.Verdict.Removes() {
			*keep = append(*keep, copies[o]...)
			result = append(result, *o)
			continue
		}
		if o.Verdict.Sends() {
			if err := r.Queue.Enqueue(ctx, wireContinuation{ID: o.RequestID}.Encode(), 0); err != nil {
				o.Err = fmt.Errorf("send continuation %s: %w", o.RequestID, err)
				*keep = append(*keep, copies[o]...)
				result = append(result, *o)
				continue
			}
			o.Sent = true
		}
		r.remove(ctx, o, copies[o])
		result = append(result, *o)
	}
	return result, nil
}

// remove deletes the copies of o's dead letter, saying in o whether all
// went (Removed) and why one did not (Err).
func (r *Redriver) remove(ctx context.Context, o *Outcome, copies []DeadLetter) {
	o.Removed = true
	for _, d := range copies {
		if err := r.DeadLetters.Delete(ctx, d); err != nil {
			o.Removed = false
			o.Err = errors.Join(o.Err, fmt.Errorf("delete dead letter %s: %w", d.ID, err))
		}
	}
}

// DefaultPurgeMinAge is the age under which Purge refuses a dead letter
// unless forced: one that young may still be under investigation.
const DefaultPurgeMinAge = time.Hour

// Purge discards the dead letters whose key (request id or message id) is
// in keys, or every one when keys is empty. It refuses, and keeps, a letter
// younger than minAge (Letter.Age; one whose age is unknown is not held)
// and one whose request can still finish
// (VerdictSend: redrive it instead), unless force; a forced purge of a
// request that can still finish ends that request first (EndSetAside), so
// that it never answers 202 running until its expiry. With dryRun nothing
// is changed. keys that match no dead letter are an error naming them.
func (r *Redriver) Purge(ctx context.Context, keys []string, dryRun, force bool, minAge time.Duration, now time.Time) ([]Outcome, error) {
	outs, copies, keep, err := r.gather(ctx, keys, now)
	defer func() { r.release(ctx, *keep) }()
	if err != nil {
		return nil, err
	}
	result := make([]Outcome, 0, len(outs))
	for _, o := range outs {
		switch {
		case !force && o.Age(now) > 0 && o.Age(now) < minAge: // an age unknown (zero) is not held against it
			o.Refused = fmt.Sprintf("younger than %s (%s old): --force to purge it", minAge, o.Age(now).Round(time.Second))
		case !force && o.Verdict.Sends():
			o.Refused = "its request can still finish: redrive it, or --force to purge it and end the request"
		}
		if dryRun || o.Refused != "" {
			*keep = append(*keep, copies[o]...)
			result = append(result, *o)
			continue
		}
		if o.Verdict.Sends() {
			a := &Async{Store: r.Store, Queue: r.Queue}
			if err := a.EndSetAside(ctx, o.RequestID, "its continuation was a dead letter, purged by an operator"); err != nil {
				o.Err = err
				*keep = append(*keep, copies[o]...)
				result = append(result, *o)
				continue
			}
			o.Ended = true
		}
		r.remove(ctx, o, copies[o])
		result = append(result, *o)
	}
	return result, nil
}

// gather lists the dead letters and groups those whose key or message id is
// in keys (every one when keys is empty) by request, inspected at now: the
// outcomes, each one's copies, and the letters to release when done (keep,
// which the caller adds to). keys that match no dead letter are an error
// naming them.
func (r *Redriver) gather(ctx context.Context, keys []string, now time.Time) ([]*Outcome, map[*Outcome][]DeadLetter, *[]DeadLetter, error) {
	keep := new([]DeadLetter)
	ds, err := r.DeadLetters.List(ctx, MaxDeadLetters, Hold)
	if err != nil {
		return nil, nil, keep, fmt.Errorf("list dead letters: %w", err)
	}
	var outs []*Outcome
	byKey := map[string]*Outcome{}
	copies := map[*Outcome][]DeadLetter{}
	for _, d := range ds {
		l, err := r.Inspect(ctx, d, now)
		if err != nil {
			*keep = ds
			return nil, nil, keep, err
		}
		if len(keys) > 0 && !slices.Contains(keys, l.Key()) && !slices.Contains(keys, l.ID) {
			*keep = append(*keep, d)
			continue
		}
		o, ok := byKey[l.Key()]
		if !ok {
			o = &Outcome{Letter: l}
			byKey[l.Key()] = o
			outs = append(outs, o)
		}
		o.Copies++
		copies[o] = append(copies[o], d)
	}
	var missing []string
	for _, k := range keys {
		found := byKey[k] != nil
		for _, o := range outs {
			found = found || slices.ContainsFunc(copies[o], func(d DeadLetter) bool { return d.ID == k })
		}
		if !found {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		for _, o := range outs {
			*keep = append(*keep, copies[o]...)
		}
		return nil, nil, keep, fmt.Errorf("no dead letter has the id %s", strings.Join(missing, ", "))
	}
	return outs, copies, keep, nil
}

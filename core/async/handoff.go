package async

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"fngateway/core"
)

// handoff makes a request's continuation durable (Submit's steps, in the
// order protocol.go gives): the body blob, the record, the queue message,
// the idempotency entry; and abandons the record of a submission that
// failed.
type handoff struct{ engine }

// submit is Submit's work: the writes of the hand-off, or the earlier
// submission a client's Idempotency-Key names. The Claim it returns is not
// yet tied to its Async (Submit does that).
func (h handoff) submit(ctx context.Context, req *core.Request, profile *core.Profile, inflight bool, after time.Duration) (*Accepted, *Claim, error) {
	now := time.Now()
	arrival := req.Budget.Arrival
	if arrival.IsZero() {
		arrival = now
	}
	expiry := arrival.Add(h.ttl)
	var profileID, topic string
	container := defaultResultContainer
	if profile != nil {
		profileID, topic = profile.UserID, profile.Async.Topic
		if c := profile.Async.ContainerName; c != "" {
			container = c
		}
	}
	if !core.ValidContainer(container) {
		return nil, nil, asyncUnavailable("result container name", fmt.Errorf("container %.70q: want 3-63 lowercase letters, digits and single hyphens", container))
	}

	// A client's key seen before returns that submission.
	var idemKey, idemVersion, fp string
	if req.ClientKey && req.IdempotencyKey != "" {
		idemKey = h.idempotency().key(ctx, req, profileID)
		fp = requestFingerprint(req)
		prev, version, err := h.idempotency().lookup(ctx, idemKey, fp)
		if err != nil {
			return nil, nil, err
		}
		if prev != nil {
			return prev, nil, nil
		}
		idemVersion = version
	}

	id := newAsyncID()
	resultKey := newResultKey()
	acc, err := h.accepted(ctx, id, container, resultKey, expiry)
	if err != nil {
		return nil, nil, asyncUnavailable("sign the result URLs", err)
	}
	// 1. The request snapshot's body.
	snap := snapshotRequest(req)
	snap.Trace = traceContextOf(ctx)
	if err := h.storeBody(ctx, id, req, &snap); err != nil {
		return nil, nil, asyncUnavailable("store the request body", err)
	}
	// 2. The record.
	rec := &asyncRecord{V: recordVersion, ID: id, State: StateQueued, Profile: profileID, Topic: topic,
		Container: container, Arrival: arrival.UTC(), Expiry: expiry.UTC(), Request: snap,
		Submitter: h.idempotency().submitter(ctx, req.Header), ResultKey: resultKey, RequestID: req.RequestID}
	var owner string
	lease := h.lease
	if inflight {
		owner = newAsyncID()
		rec.claimInflight(owner, now.Add(lease))
	}
	enc, err := rec.Encode()
	if err != nil {
		return nil, nil, asyncUnavailable("encode the record", err)
	}
	if _, err := h.store.Put(ctx, asyncRecordKey(id), enc, ""); err != nil {
		return nil, nil, asyncUnavailable("store the record", err)
	}
	// 3. The message. An inflight claim's message waits for its lease, a
	// requeued request's for its Retry-After.
	delay := queueDelay(after)
	if inflight {
		delay = queueDelay(lease)
	}
	if err := h.queue.Enqueue(ctx, wireContinuation{ID: id}.Encode(), delay); err != nil {
		if !h.abandon(ctx, id, owner) {
			return nil, nil, asyncUnavailable("enqueue the continuation", err)
		}
		// A worker claimed the record: the message did go out.
	}
	// 4. The idempotency index, last: an entry names a record whose
	// message went out.
	if idemKey != "" {
		other, err := h.idempotency().index(ctx, idemKey, idemVersion, fp, readEnd(arrival, expiry), acc)
		var ge *core.Error
		switch {
		case errors.As(err, &ge) && ge.Reason == core.ReasonIdempotencyKeyReused:
			// A different request won the key meanwhile.
			h.abandon(ctx, id, owner)
			return nil, nil, err
		case other != nil:
			// A concurrent submission with the same key won the index.
			// Ours is abandoned; should a worker have claimed it already,
			// it runs too, with the same Idempotency-Key.
			h.abandon(ctx, id, owner)
			return other, nil, nil
		case err != nil:
			if !h.abandon(ctx, id, owner) {
				return nil, nil, asyncUnavailable("write the idempotency index", err)
			}
		}
	}
	h.notes.notify(ctx, topic, id, notifyQueued)
	if !inflight {
		return acc, nil, nil
	}
	h.notes.notify(ctx, topic, id, notifyProcessing)
	c := &Claim{id: id, owner: owner, rec: rec}
	c.lost = newCauseSignal()
	// Renewed up to the request's expiry: past it, a worker writes the
	// expired result should the caller never finish.
	c.stop = h.records.keepLease(ctx, id, owner, lease, rec.Expiry, c.lost.fire)
	return acc, c, nil
}

// accepted builds the Accepted of request id, whose result key is key:
// its result URIs are the store's own URLs, valid until expiry, when the
// store's signatures last (LastingSigner), and gateway result URLs signed
// with key otherwise.
func (h handoff) accepted(ctx context.Context, id, container string, key []byte, expiry time.Time) (*Accepted, error) {
	if !lastingSigner(h.store) {
		return &Accepted{ID: id, StatusURI: StatusPrefix + id, DataURI: resultURL(key, id, ResultData),
			HeaderURI: resultURL(key, id, ResultHeaders), RetryAfter: h.retryAfter}, nil
	}
	data, err := h.store.SignURL(ctx, asyncDataKey(container, id), expiry)
	if err != nil {
		return nil, err
	}
	header, err := h.store.SignURL(ctx, asyncHeaderKey(container, id), expiry)
	if err != nil {
		return nil, err
	}
	return &Accepted{ID: id, StatusURI: StatusPrefix + id, DataURI: data, HeaderURI: header, RetryAfter: h.retryAfter}, nil
}

// snapshotRequest copies what a continuation needs of req, body aside.
func snapshotRequest(req *core.Request) requestSnapshot {
	return requestSnapshot{
		Method: req.Method, Path: req.Path, RawQuery: req.RawQuery, Header: req.Header.Clone(),
		Host: req.Host, RemoteAddr: req.RemoteAddr, Proto: req.Proto,
		IdempotencyKey: req.IdempotencyKey, ClientKey: req.ClientKey,
	}
}

// storeBody writes req's body, if any, to its blob and notes its size.
func (h handoff) storeBody(ctx context.Context, id string, req *core.Request, snap *requestSnapshot) error {
	switch {
	case req.BodyStream != nil:
		cr := &countingReader{r: req.BodyStream}
		if err := h.store.WriteBlob(ctx, asyncBodyKey(id), cr, "application/octet-stream", true); err != nil {
			return err
		}
		snap.BodySize, snap.BodyStreamed = cr.n, cr.n > 0
	case len(req.Body) > 0:
		if err := h.store.WriteBlob(ctx, asyncBodyKey(id), bytes.NewReader(req.Body), "application/octet-stream", true); err != nil {
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
func (h handoff) abandon(ctx context.Context, id, owner string) (movedOn bool) {
	ctx, cancel := cleanupContext(ctx)
	defer cancel()
	_, err := h.records.update(ctx, id, func(r *asyncRecord) error { return r.abandon(owner) })
	return errors.Is(err, errMovedOn)
}

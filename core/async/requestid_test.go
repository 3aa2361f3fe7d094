package async

import (
	"context"
	"sync"
	"testing"

	"fngateway/core"
)

// TestAsyncRequestID: the request id of an async request is stored with
// its record, sent to the backend by its continuation, carried by every
// notification and by the context of its continuation's lines (OnEnd).
func TestAsyncRequestID(t *testing.T) {
	const id = "proxy-id:42"
	e := newAsyncEnv(t, asyncOK)
	var mu sync.Mutex
	var ended []string
	e.a.OnEnd = func(ctx context.Context, _ End) {
		mu.Lock()
		defer mu.Unlock()
		ended = append(ended, core.RequestIDFrom(ctx))
	}
	req := asyncRequest()
	req.RequestID = id
	acc, c, err := e.a.Submit(core.WithRequestID(context.Background(), id), req, e.profile, false)
	if err != nil || c != nil {
		t.Fatalf("Submit: %v, claim %v", err, c)
	}
	o, ok := e.store.object(asyncRecordKey(acc.ID))
	if !ok {
		t.Fatal("no record stored")
	}
	rec, err := decodeAsyncRecord(o.data)
	if err != nil || rec.RequestID != id {
		t.Fatalf("stored record's requestId = %q (%v); want %q", rec.RequestID, err, id)
	}
	e.drain(t) // a fresh invocation: its context knows nothing of the request
	e.backend.mu.Lock()
	calls := e.backend.calls
	e.backend.mu.Unlock()
	if len(calls) != 1 || calls[0].Header.Get("X-Request-Id") != id {
		t.Errorf("continuation's attempts = %d, X-Request-Id %q; want one with %q", len(calls), calls[0].Header.Get("X-Request-Id"), id)
	}
	e.notes.mu.Lock()
	for _, n := range e.notes.sent {
		if n.RequestID != id {
			t.Errorf("notification %s carries requestId %q; want %q", n.Status, n.RequestID, id)
		}
	}
	if len(e.notes.sent) < 3 {
		t.Errorf("notifications = %+v; want Queued, Processing and AsyncProcessed", e.notes.sent)
	}
	e.notes.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	if len(ended) != 1 || ended[0] != id {
		t.Errorf("OnEnd's context carried request ids %q; want [%s]", ended, id)
	}
}

// TestRecordRefusesBadRequestID: a stored request id that the gateway could
// not have written is a corrupt record, never a line-breaking log value.
func TestRecordRefusesBadRequestID(t *testing.T) {
	e := newAsyncEnv(t, asyncOK)
	acc := e.submit(t, asyncRequest())
	o, _ := e.store.object(asyncRecordKey(acc.ID))
	rec, err := decodeAsyncRecord(o.data)
	if err != nil {
		t.Fatal(err)
	}
	rec.RequestID = "two\nlines"
	if _, err := rec.Encode(); err == nil {
		t.Error("a record with request id \"two\\nlines\" encoded; want an error")
	}
}

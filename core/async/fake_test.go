package async

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// In-memory fakes of the async ports, for the unit tests of core/async only.

// fakeStore is an in-memory Store: one map of objects, records and blobs
// alike, each with a version.
type fakeStore struct {
	mu      sync.Mutex
	objects map[string]fakeObject
	seq     int
	writes  int // successful Put and WriteBlob calls
	// fail, if set, may fail an operation ("get", "put", "write", "open",
	// "sign") on key before it happens.
	fail func(op, key string) error
	// lasting makes it a LastingSigner whose URLs last: the 202 hands
	// them out rather than gateway result URLs.
	lasting bool
}

func (s *fakeStore) SignsLastingURLs() bool { return s.lasting }

type fakeObject struct {
	data        []byte
	version     string
	contentType string
}

var _ Store = (*fakeStore)(nil)

func newFakeStore() *fakeStore { return &fakeStore{objects: map[string]fakeObject{}} }

func (s *fakeStore) check(ctx context.Context, op, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	fail := s.fail
	s.mu.Unlock()
	if fail != nil {
		return fail(op, key)
	}
	return nil
}

func (s *fakeStore) setFail(f func(op, key string) error) {
	s.mu.Lock()
	s.fail = f
	s.mu.Unlock()
}

func (s *fakeStore) Get(ctx context.Context, key string) ([]byte, string, error) {
	if err := s.check(ctx, "get", key); err != nil {
		return nil, "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objects[key]
	if !ok {
		return nil, "", ErrNotFound
	}
	return bytes.Clone(o.data), o.version, nil
}

func (s *fakeStore) Put(ctx context.Context, key string, data []byte, ifVersion string) (string, error) {
	if err := s.check(ctx, "put", key); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objects[key]
	if ifVersion == "" && ok || ifVersion != "" && (!ok || o.version != ifVersion) {
		return "", ErrConflict
	}
	return s.storeLocked(key, data, "application/json"), nil
}

func (s *fakeStore) storeLocked(key string, data []byte, ct string) string {
	s.seq++
	v := "v" + strconv.Itoa(s.seq)
	s.objects[key] = fakeObject{data: bytes.Clone(data), version: v, contentType: ct}
	s.writes++
	return v
}

func (s *fakeStore) WriteBlob(ctx context.Context, key string, r io.Reader, contentType string, create bool) error {
	if err := s.check(ctx, "write", key); err != nil {
		return err
	}
	// Whole or nothing: the blob appears only once r is read to its end.
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.objects[key]; ok && create {
		return ErrConflict
	}
	s.storeLocked(key, data, contentType)
	return nil
}

func (s *fakeStore) OpenBlob(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := s.check(ctx, "open", key); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objects[key]
	if !ok {
		return nil, ErrNotFound
	}
	return io.NopCloser(bytes.NewReader(o.data)), nil
}

func (s *fakeStore) SignURL(ctx context.Context, key string, expiry time.Time) (string, error) {
	if err := s.check(ctx, "sign", key); err != nil {
		return "", err
	}
	return "/_gateway/blobs/" + key + "?exp=" + strconv.FormatInt(expiry.Unix(), 10) + "&sig=fake", nil
}

// object returns the object at key.
func (s *fakeStore) object(key string) (fakeObject, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objects[key]
	return o, ok
}

// keys returns the keys with suffix, sorted.
func (s *fakeStore) keys(suffix string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.objects {
		if strings.HasSuffix(k, suffix) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func (s *fakeStore) writeCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes
}

// record decodes the record of id.
func (s *fakeStore) record(tb testing.TB, id string) *asyncRecord {
	tb.Helper()
	o, ok := s.object(asyncRecordKey(id))
	if !ok {
		tb.Fatalf("no record for %s", id)
	}
	r, err := decodeAsyncRecord(o.data)
	if err != nil {
		tb.Fatalf("record of %s: %v", id, err)
	}
	return r
}

// putRecord overwrites the record of r.ID, as a dead worker left it.
func (s *fakeStore) putRecord(tb testing.TB, r *asyncRecord) {
	tb.Helper()
	b, err := r.Encode()
	if err != nil {
		tb.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.storeLocked(asyncRecordKey(r.ID), b, "application/json")
}

// fakeQueue is an in-memory Queue that remembers each message's delay.
type fakeQueue struct {
	mu   sync.Mutex
	msgs []fakeMsg
	seq  int
	// fail, if set, may fail an Enqueue; with deliver set the message is
	// enqueued anyway (an ambiguous failure).
	fail    func() error
	deliver bool
}

type fakeMsg struct {
	body      []byte
	delay     time.Duration
	visibleAt time.Time
	id        string
	count     int // deliveries so far
}

var _ Queue = (*fakeQueue)(nil)

func (q *fakeQueue) Enqueue(ctx context.Context, body []byte, delay time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var err error
	if q.fail != nil {
		err = q.fail()
	}
	if err == nil || q.deliver {
		q.seq++
		q.msgs = append(q.msgs, fakeMsg{body: bytes.Clone(body), delay: delay, visibleAt: time.Now().Add(delay), id: strconv.Itoa(q.seq)})
	}
	return err
}

func (q *fakeQueue) Receive(ctx context.Context, max int, visibility time.Duration) ([]Message, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []Message
	now := time.Now()
	for i := range q.msgs {
		if len(out) == max {
			break
		}
		if m := &q.msgs[i]; !m.visibleAt.After(now) {
			m.count++
			out = append(out, Message{ID: m.id, Receipt: m.id, Body: bytes.Clone(m.body), DequeueCount: m.count})
			m.visibleAt = now.Add(visibility)
		}
	}
	return out, nil
}

func (q *fakeQueue) Complete(ctx context.Context, m Message) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := range q.msgs {
		if q.msgs[i].id == m.Receipt {
			q.msgs = append(q.msgs[:i], q.msgs[i+1:]...)
			return nil
		}
	}
	return ErrNotFound
}

// take removes and returns every message, visible or not.
func (q *fakeQueue) take() []fakeMsg {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.msgs
	q.msgs = nil
	return out
}

func (q *fakeQueue) size() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.msgs)
}

// fakeNotifier records notifications.
type fakeNotifier struct {
	mu   sync.Mutex
	sent []notification
	fail error
}

var _ Notifier = (*fakeNotifier)(nil)

func (n *fakeNotifier) Notify(ctx context.Context, topic string, body []byte) error {
	var v notification
	if err := json.Unmarshal(body, &v); err != nil {
		return err
	}
	if v.TopicName != topic {
		return fmt.Errorf("topic %q in a notification sent to %q", v.TopicName, topic)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sent = append(n.sent, v)
	return n.fail
}

// statuses returns the Status of each notification about id, in order.
func (n *fakeNotifier) statuses(id string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, v := range n.sent {
		if v.RequestGUID == id {
			out = append(out, v.Status)
		}
	}
	return out
}

// asyncBackend is a stub RoundTripper standing in for the backend.
type asyncBackend struct {
	mu    sync.Mutex
	calls []*http.Request
	fn    func(r *http.Request) (*http.Response, error)
}

func (b *asyncBackend) RoundTrip(r *http.Request) (*http.Response, error) {
	b.mu.Lock()
	b.calls = append(b.calls, r)
	b.mu.Unlock()
	return b.fn(r)
}

func (b *asyncBackend) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.calls)
}

func (b *asyncBackend) call(i int) *http.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls[i]
}

// slowBody yields data after delay, or fails when ctx ends first (as a
// transport's body does when its request is cancelled).
type slowBody struct {
	ctx   context.Context
	delay time.Duration
	data  io.Reader
	timer <-chan time.Time
	ready bool
}

func (s *slowBody) Read(p []byte) (int, error) {
	if !s.ready {
		if s.timer == nil {
			s.timer = time.After(s.delay)
		}
		select {
		case <-s.timer:
			s.ready = true
		case <-s.ctx.Done():
			return 0, s.ctx.Err()
		}
	}
	return s.data.Read(p)
}

func (s *slowBody) Close() error { return nil }

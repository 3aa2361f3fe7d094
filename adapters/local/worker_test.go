package local

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"fngateway/core"
	"fngateway/core/async"
	"fngateway/infra/filestore"
	"fngateway/internal/testutil"
)

// The embedded store sets undecodable messages aside.
var _ quarantiner = (*filestore.Store)(nil)

// syncBuffer is a log sink safe for the worker's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestWorkerBadMessage: an undecodable continuation is logged whole once
// and set aside in the store's quarantine/ at its first delivery, and its
// neighbour is processed. Before, it was logged and delivered again on
// every visibility timeout until MaxDequeue.
func TestWorkerBadMessage(t *testing.T) {
	dir := t.TempDir()
	fs, err := filestore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bad := []byte("definitely not a continuation")
	if err := fs.Enqueue(ctx, bad, 0); err != nil {
		t.Fatal(err)
	}
	// A well-formed message for an unknown request: acknowledged, nothing
	// written.
	if err := fs.Enqueue(ctx, []byte(`{"v":1,"id":"0123456789abcdef0123456789abcdef"}`), 0); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	w := &Worker{
		Queue: fs, Async: &async.Async{Store: fs, Queue: fs},
		// Each message is settled at its first delivery: a visibility of
		// seconds keeps a loaded machine from delivering one again before
		// that (a second "undecodable" line is what this test refuses).
		Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Visibility: 20 * time.Second, Poll: 5 * time.Millisecond, MaxDequeue: 3,
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { w.Run(wctx); close(done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, pending := fs.NextVisible(); !pending {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue not drained; logs:\n%s", logs.String())
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
	cancel()
	<-done

	var bodies []string
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			t.Fatalf("log line %q is not JSON", line)
		}
		if msg, _ := m["msg"].(string); strings.HasPrefix(msg, "undecodable continuation message") {
			bodies = append(bodies, m["body"].(string))
		}
	}
	if len(bodies) != 1 {
		t.Fatalf("undecodable-message lines = %d; want one (logs:\n%s)", len(bodies), logs.String())
	}
	if want := base64.StdEncoding.EncodeToString(bad); bodies[0] != want {
		t.Errorf("logged body = %q; want the whole message %q", bodies[0], want)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "quarantine", "*.msg"))
	if len(names) != 1 {
		t.Fatalf("quarantine/ holds %d message files; want the undecodable one", len(names))
	}
	if b, _ := os.ReadFile(names[0]); !bytes.HasSuffix(b, bad) {
		t.Errorf("quarantined file = %q; want the message whole", b)
	}
}

// workerEnv is a worker on a file store in front of a backend that holds
// each request for hold (or until it is cancelled).
type workerEnv struct {
	fs       *filestore.Store
	a        *async.Async
	w        *Worker
	calls    atomic.Int64
	canceled atomic.Int64
}

func newWorkerEnv(tb testing.TB, hold time.Duration, slots int) *workerEnv {
	tb.Helper()
	fs, err := filestore.Open(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	e := &workerEnv{fs: fs}
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.calls.Add(1)
		select {
		case <-time.After(hold):
			w.Write([]byte("done"))
		case <-r.Context().Done():
			e.canceled.Add(1)
		}
	}))
	tb.Cleanup(be.Close)
	hosts := core.HostList{}
	if err := hosts.Decode(be.URL); err != nil {
		tb.Fatal(err)
	}
	e.a = &async.Async{Store: fs, Queue: fs, Router: core.NewRouter(nil, core.Route{Hosts: hosts}),
		Timeout: time.Minute, Continuations: async.NewContinuations(slots)}
	e.w = &Worker{Queue: fs, Async: e.a, Visibility: 150 * time.Millisecond, Poll: 5 * time.Millisecond}
	return e
}

// submit hands a request to the queue and returns its id.
func (e *workerEnv) submit(tb testing.TB) string {
	tb.Helper()
	req := &core.Request{Method: "GET", Path: "/job", Header: http.Header{}, IdempotencyKey: "k", Budget: core.Budget{Arrival: time.Now()}}
	acc, _, err := e.a.Submit(context.Background(), req, nil, false)
	if err != nil {
		tb.Fatal(err)
	}
	return acc.ID
}

func (e *workerEnv) state(tb testing.TB, id string) (async.State, bool) {
	tb.Helper()
	v, err := e.a.Status(context.Background(), id)
	if err != nil {
		tb.Fatal(err)
	}
	return v.State, v.State.Done()
}

// waitUntil polls cond every 5 ms until it holds, or fails after 10 s.
func waitUntil(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("not within 10 s: %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}

// stubBackend is a RoundTripper that holds each request for hold (or until
// it is cancelled) without a socket, so that a worker can run inside a
// synctest bubble, where the clock is exact whatever the machine's load.
type stubBackend struct {
	hold     time.Duration
	calls    *atomic.Int64
	canceled *atomic.Int64
}

func (b stubBackend) RoundTrip(r *http.Request) (*http.Response, error) {
	b.calls.Add(1)
	select {
	case <-time.After(b.hold):
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("done")),
			ContentLength: 4, Request: r}, nil
	case <-r.Context().Done():
		b.canceled.Add(1)
		return nil, r.Context().Err()
	}
}

// newBubbleWorkerEnv is newWorkerEnv with a stubBackend in place of the
// HTTP server, for tests inside synctest.Test.
func newBubbleWorkerEnv(tb testing.TB, hold time.Duration, slots int) *workerEnv {
	tb.Helper()
	fs, err := filestore.Open(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	e := &workerEnv{fs: fs}
	hosts := core.HostList{}
	if err := hosts.Decode("http://backend.invalid"); err != nil {
		tb.Fatal(err)
	}
	e.a = &async.Async{Store: fs, Queue: fs, Router: core.NewRouter(nil, core.Route{Hosts: hosts}),
		Forwarder: &core.Forwarder{Transport: stubBackend{hold: hold, calls: &e.calls, canceled: &e.canceled}},
		Timeout:   time.Minute, Continuations: async.NewContinuations(slots)}
	e.w = &Worker{Queue: fs, Async: e.a, Visibility: 150 * time.Millisecond, Poll: 5 * time.Millisecond}
	return e
}

// TestWorkerHeartbeat: a message whose continuation outlasts its
// visibility many times over stays hidden while the work runs, and is
// delivered once. In a synctest bubble: every instant of the work is
// sampled against the message's visibility, on a clock no load can skew.
func TestWorkerHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const hold = 20 * time.Second // 133 visibilities of 150 ms
		e := newBubbleWorkerEnv(t, hold, 4)
		id := e.submit(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { e.w.Run(ctx); close(done) }()
		defer func() { cancel(); <-done }()
		synctest.Wait()
		if got := e.calls.Load(); got != 1 {
			t.Fatalf("backend calls once the worker waits = %d; want 1", got)
		}
		start := time.Now()
		for {
			if _, fin := e.state(t, id); fin {
				break
			}
			if next, ok := e.fs.NextVisible(); ok && !next.After(time.Now()) {
				t.Fatalf("the message became visible %v into its continuation", time.Since(start))
			}
			if time.Since(start) > hold+e.w.Visibility {
				t.Fatalf("not done %v after the backend was called (it answers after %v)", time.Since(start), hold)
			}
			time.Sleep(10 * time.Millisecond) // sampling, on the bubble's clock
		}
		synctest.Wait()
		if next, pending := e.fs.NextVisible(); pending {
			t.Errorf("message still queued (visible at %v) once the request is done; want it completed", next)
		}
		if e.calls.Load() != 1 {
			t.Errorf("backend calls = %d; want 1", e.calls.Load())
		}
	})
}

// TestWorkerSharesSlots: while every Continuations slot is taken (by
// in-process finishes), the worker receives nothing, however long it
// polls (a minute on the bubble's clock: 12,000 polls); once a slot is
// free it does.
func TestWorkerSharesSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newBubbleWorkerEnv(t, 0, 1)
		_, release, ok := e.a.Continuations.TryStart()
		if !ok {
			t.Fatal("no free slot")
		}
		id := e.submit(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { e.w.Run(ctx); close(done) }()
		defer func() { cancel(); <-done }()
		time.Sleep(time.Minute)
		synctest.Wait()
		if e.calls.Load() != 0 {
			t.Fatalf("backend calls with every slot taken = %d; want 0", e.calls.Load())
		}
		if next, ok := e.fs.NextVisible(); !ok || next.After(time.Now()) {
			t.Errorf("message visible at %v (queued %v); want it left visible on the queue", next, ok)
		}
		release()
		time.Sleep(time.Second)
		synctest.Wait()
		if _, fin := e.state(t, id); !fin {
			t.Errorf("request not done a second after a slot was freed")
		}
	})
}

// TestWorkerDrain: at shutdown a continuation that outlasts the grace is
// stopped; its claim is released and its message visible at once.
func TestWorkerDrain(t *testing.T) {
	e := newWorkerEnv(t, time.Hour, 4)
	id := e.submit(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.w.Run(ctx); close(done) }()
	waitUntil(t, "the backend is called", func() bool { return e.calls.Load() == 1 })
	cancel() // stop receiving
	gctx, gcancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer gcancel()
	if err := e.a.Continuations.Shutdown(gctx); !errors.Is(err, async.ErrDraining) {
		t.Errorf("Shutdown = %v; want ErrDraining", err)
	}
	<-done
	if e.canceled.Load() != 1 {
		t.Errorf("backend saw %d cancellations; want 1", e.canceled.Load())
	}
	if st, fin := e.state(t, id); fin || st != async.StateRunning {
		t.Errorf("state %s; want running (released, not finished)", st)
	}
	data, _, err := e.fs.Get(context.Background(), "gateway/records/"+id+".json")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), `"claim":{`) {
		t.Errorf("record still claimed: %s", data)
	}
	if next, ok := e.fs.NextVisible(); !ok || next.After(time.Now()) {
		t.Errorf("message visible at %v (queued %v); want now", next, ok)
	}
}

// longPollQueue is a file-store queue whose Receive waits, as SQS's long
// poll does, until the test lets it go on.
type longPollQueue struct {
	*filestore.Store
	waiting chan struct{}
	resume  chan struct{}
}

func (q *longPollQueue) Receive(ctx context.Context, max int, visibility time.Duration) ([]async.Message, error) {
	q.waiting <- struct{}{}
	select {
	case <-q.resume:
	case <-ctx.Done():
		return nil, nil
	}
	return q.Store.Receive(ctx, max, visibility)
}

// TestWorkerHoldsOneSlotWhileWaiting: while the queue long-polls, the
// worker holds one Continuations slot, not all of them, so the in-process
// finishes of hand-offs keep the rest.
func TestWorkerHoldsOneSlotWhileWaiting(t *testing.T) {
	e := newWorkerEnv(t, 0, 4)
	q := &longPollQueue{Store: e.fs, waiting: make(chan struct{}), resume: make(chan struct{})}
	e.w.Queue = q
	id := e.submit(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	<-q.waiting
	if got, want := e.a.Continuations.Free(), 3; got != want {
		t.Errorf("free slots while the worker waits on the queue = %d; want %d", got, want)
	}
	q.resume <- struct{}{}
	go func() { // later polls
		for {
			select {
			case <-q.waiting:
				select {
				case q.resume <- struct{}{}:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	waitUntil(t, "the request is done", func() bool { _, done := e.state(t, id); return done })
}

// TestWorkerNewerFormat: a continuation message, or the record it names, in
// a format version newer than this build reads (a newer release beside this
// one, or rolled back from) is left on the queue for a build that can read
// it: not quarantined, not completed, the record not marked corrupt, and one
// line says so. Before, such a message was set aside as undecodable, and a
// newer record made its request CorruptRecord for good.
func TestWorkerNewerFormat(t *testing.T) {
	dir := t.TempDir()
	fs, err := filestore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	newerMsg := []byte(`{"v":2,"id":"0123456789abcdef0123456789abcdef","next":1}`)
	id, idMsg := testutil.PutNewerRecord(t, fs, `"state":{"next":true}`)
	for _, m := range [][]byte{newerMsg, []byte(idMsg)} {
		if err := fs.Enqueue(ctx, m, 0); err != nil {
			t.Fatal(err)
		}
	}
	var logs syncBuffer
	w := &Worker{
		Queue: fs, Async: &async.Async{Store: fs, Queue: fs},
		// Seconds of visibility: each message is delivered once here.
		Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Visibility: 20 * time.Second, Poll: 5 * time.Millisecond, MaxDequeue: 1,
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { w.Run(wctx); close(done) }()
	left := func() int { return strings.Count(logs.String(), `"msg":"continuation left for a newer release`) }
	deadline := time.Now().Add(30 * time.Second)
	for left() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no two lines saying the messages are left for a newer release; logs:\n%s", logs.String())
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
	cancel()
	<-done
	if _, pending := fs.NextVisible(); !pending {
		t.Errorf("the messages are gone from the queue; want both left on it")
	}
	if names, _ := filepath.Glob(filepath.Join(dir, "quarantine", "*")); len(names) != 0 {
		t.Errorf("quarantine/ holds %v; want nothing set aside", names)
	}
	if _, _, err := fs.Get(ctx, "gateway/corrupt/"+id); !errors.Is(err, async.ErrNotFound) {
		t.Errorf("corrupt mark: %v; want none", err)
	}
	if strings.Contains(logs.String(), "undecodable") {
		t.Errorf("a message was logged as undecodable:\n%s", logs.String())
	}
}

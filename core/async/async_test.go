package async

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"fngateway/core"
	"fngateway/internal/testutil"
)

const (
	asyncTestTimeout = 30 * time.Second
	asyncTestMargin  = time.Second
	asyncTestLease   = asyncTestTimeout + asyncTestMargin
	asyncTestTTL     = time.Hour
	asyncTestKey     = "client-key-1"
	asyncContainer   = "alice-results"
)

// asyncEnv is an Async wired to in-memory fakes and a stub backend.
type asyncEnv struct {
	a       *Async
	store   *fakeStore
	queue   *fakeQueue
	notes   *fakeNotifier
	backend *asyncBackend
	profile *core.Profile
}

type backendFunc = func(r *http.Request) (*http.Response, error)

func newAsyncEnv(tb testing.TB, fn backendFunc, hosts ...string) *asyncEnv {
	tb.Helper()
	if len(hosts) == 0 {
		hosts = []string{"backend.test"}
	}
	hl := testutil.Hosts(tb, hosts...)
	e := &asyncEnv{
		store:   newFakeStore(),
		queue:   &fakeQueue{},
		notes:   &fakeNotifier{},
		backend: &asyncBackend{fn: fn},
		profile: &core.Profile{UserID: "alice", Async: core.AsyncConfig{Enabled: true, ContainerName: asyncContainer, Topic: "alice-events"}},
	}
	e.a = &Async{
		Store: e.store, Queue: e.queue, Notifier: e.notes,
		Forwarder: &core.Forwarder{Transport: e.backend},
		Router:    core.NewRouter(nil, core.Route{Hosts: hl}),
		TTL:       asyncTestTTL, Timeout: asyncTestTimeout, Margin: asyncTestMargin, Lease: asyncTestLease,
		Stats: &core.Stats{},
	}
	return e
}

func asyncRequest() *core.Request {
	return &core.Request{
		Method: "POST", Path: "/jobs", RawQuery: "n=1",
		Header: http.Header{"Content-Type": {"text/plain"}, "Idempotency-Key": {asyncTestKey}},
		Host:   "gw.example", RemoteAddr: "192.0.2.7:5555", Proto: "https",
		Body:           []byte("hello"),
		IdempotencyKey: asyncTestKey, ClientKey: true,
		Budget: core.Budget{Arrival: time.Now()},
	}
}

// asyncOK answers 200 "done:<request body>" with hop-by-hop headers that
// must not reach the stored result.
func asyncOK(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
	}
	h := http.Header{"Content-Type": {"text/plain"}, "Connection": {"X-Hop"}, "X-Hop": {"1"},
		"Keep-Alive": {"timeout=5"}, "X-Backend": {"yes"}}
	return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(strings.NewReader("done:" + string(body)))}, nil
}

func asyncStatus(code int) backendFunc {
	return func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: code, Header: http.Header{"Content-Type": {"text/plain"}},
			Body: io.NopCloser(strings.NewReader(http.StatusText(code)))}, nil
	}
}

// asyncAfter answers with then after d, unless the attempt is cancelled.
func asyncAfter(d time.Duration, then backendFunc) backendFunc {
	return func(r *http.Request) (*http.Response, error) {
		select {
		case <-time.After(d):
			return then(r)
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
}

func asyncRefused(*http.Request) (*http.Response, error) {
	return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
}

func (e *asyncEnv) submit(tb testing.TB, req *core.Request) *Accepted {
	tb.Helper()
	acc, c, err := e.a.Submit(context.Background(), req, e.profile, false)
	if err != nil {
		tb.Fatalf("Submit: %v", err)
	}
	if c != nil {
		tb.Fatalf("Submit without inflight returned a claim")
	}
	return acc
}

// takeOne removes the one queued message, checking its delay.
func (e *asyncEnv) takeOne(tb testing.TB, wantDelay time.Duration) []byte {
	tb.Helper()
	msgs := e.queue.take()
	if len(msgs) != 1 {
		tb.Fatalf("queued messages = %d; want 1", len(msgs))
	}
	if msgs[0].delay != wantDelay {
		tb.Errorf("message delay = %v; want %v", msgs[0].delay, wantDelay)
	}
	return msgs[0].body
}

// drain delivers every queued message once it is visible, as a queue
// would, until none are left.
func (e *asyncEnv) drain(tb testing.TB) {
	tb.Helper()
	for range 50 {
		msgs := e.queue.take()
		if len(msgs) == 0 {
			return
		}
		for _, m := range msgs {
			if d := time.Until(m.visibleAt); d > 0 {
				time.Sleep(d)
			}
			if err := e.a.Process(context.Background(), m.body); err != nil {
				tb.Fatalf("Process: %v", err)
			}
		}
	}
	tb.Fatal("the queue never drained")
}

// headerCount is the number of header blobs in the store.
func (e *asyncEnv) headerCount() int { return len(e.store.keys("/headers.json")) }

// result checks that request id has exactly one header blob and a data
// blob, and returns both.
func (e *asyncEnv) result(tb testing.TB, id string) (resultHeader, string) {
	tb.Helper()
	key := asyncHeaderKey(asyncContainer, id)
	n := 0
	for _, k := range e.store.keys("/headers.json") {
		if strings.Contains(k, id) {
			n++
		}
	}
	o, ok := e.store.object(key)
	if n != 1 || !ok {
		tb.Fatalf("header blobs of %s = %d (at %s: %v); want exactly 1", id, n, key, ok)
	}
	var h resultHeader
	if err := json.Unmarshal(o.data, &h); err != nil {
		tb.Fatalf("header blob: %v in %s", err, o.data)
	}
	if h.ID != id {
		tb.Errorf("header blob id = %q; want %q", h.ID, id)
	}
	if _, err := time.Parse(time.RFC3339, h.CompletedAt); err != nil {
		tb.Errorf("completedAt %q: %v", h.CompletedAt, err)
	}
	d, ok := e.store.object(asyncDataKey(asyncContainer, id))
	if !ok {
		tb.Fatalf("no data blob for %s", id)
	}
	return h, string(d.data)
}

func (e *asyncEnv) noResults(tb testing.TB) {
	tb.Helper()
	if k := e.store.keys("/headers.json"); len(k) != 0 {
		tb.Fatalf("header blobs = %v; want none", k)
	}
	if k := e.store.keys("/data"); len(k) != 0 {
		tb.Fatalf("data blobs = %v; want none", k)
	}
}

func errorCode(tb testing.TB, data string) (string, int) {
	tb.Helper()
	var b struct {
		Error struct {
			Code     string         `json:"code"`
			Attempts []core.Attempt `json:"attempts"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(data), &b); err != nil {
		tb.Fatalf("error document %q: %v", data, err)
	}
	return b.Error.Code, len(b.Error.Attempts)
}

func outcomes(as []core.Attempt) []string {
	var out []string
	for _, a := range as {
		s := string(a.Outcome)
		if a.Status != 0 {
			s += ":" + strconv.Itoa(a.Status)
		}
		out = append(out, s+"@"+strconv.FormatInt(a.DurationMs, 10))
	}
	return out
}

func TestAsyncResults(t *testing.T) {
	tests := []struct {
		name        string
		backend     backendFunc
		wantStatus  int
		wantState   State
		wantNotify  string
		wantCode    string // gateway error code, "" for a backend answer
		wantData    string // checked when wantCode is ""
		wantOutcome []string
	}{
		{"backend answers 200", asyncOK, 200, StateSucceeded, "AsyncProcessed", "", "done:hello", []string{"status:200@0"}},
		{"backend answers 404", asyncStatus(404), 404, StateSucceeded, "AsyncProcessed", "", "Not Found", []string{"status:404@0"}},
		{"backend fails 503", asyncStatus(503), 503, StateFailed, "Failed", "", "Service Unavailable", []string{"status:503@0"}},
		{"backend unreachable", asyncRefused, 502, StateFailed, "Failed", "BackendUnavailable", "", []string{"connect-error@0"}},
		{"attempt outlasts AsyncTimeout", asyncAfter(time.Hour, asyncOK), 504, StateFailed, "Failed", "AttemptTimeout", "", []string{"timeout@30000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newAsyncEnv(t, tt.backend)
				acc := e.submit(t, asyncRequest())
				if !validAsyncID(acc.ID) {
					t.Fatalf("id %q is not 32 hex digits", acc.ID)
				}
				// The fake store's signatures do not last: the 202 hands
				// out gateway result URLs signed with the record's key.
				rec := e.store.record(t, acc.ID)
				if rec.State != StateQueued || rec.Claim != nil || len(rec.ResultKey) != resultKeyLen {
					t.Errorf("record after Submit: state %s claim %+v key %d bytes; want queued, unclaimed, a %d-byte key", rec.State, rec.Claim, len(rec.ResultKey), resultKeyLen)
				}
				want := Accepted{ID: acc.ID, StatusURI: "/_gateway/async/" + acc.ID,
					DataURI:    "/_gateway/async/" + acc.ID + "/data?sig=" + resultSignature(rec.ResultKey, acc.ID, "data"),
					HeaderURI:  "/_gateway/async/" + acc.ID + "/headers?sig=" + resultSignature(rec.ResultKey, acc.ID, "headers"),
					RetryAfter: 2 * time.Second}
				if *acc != want {
					t.Errorf("Accepted = %+v; want %+v", *acc, want)
				}
				if e.queue.size() != 1 {
					t.Fatalf("queued messages = %d; want 1", e.queue.size())
				}
				e.drain(t)

				h, data := e.result(t, acc.ID)
				if h.Status != tt.wantStatus {
					t.Errorf("result status = %d; want %d", h.Status, tt.wantStatus)
				}
				if got := outcomes(h.Attempts); !reflect.DeepEqual(got, tt.wantOutcome) {
					t.Errorf("attempts = %v; want %v", got, tt.wantOutcome)
				}
				if got := h.Headers.Get("X-Attempts"); got != strconv.Itoa(len(tt.wantOutcome)) {
					t.Errorf("X-Attempts = %q; want %d", got, len(tt.wantOutcome))
				}
				if tt.wantCode == "" {
					if data != tt.wantData {
						t.Errorf("data blob = %q; want %q", data, tt.wantData)
					}
					for _, k := range []string{"Connection", "X-Hop", "Keep-Alive"} {
						if v, ok := h.Headers[k]; ok {
							t.Errorf("stored header %s: %v; hop-by-hop headers must be stripped", k, v)
						}
					}
				} else {
					if code, n := errorCode(t, data); code != tt.wantCode || n != len(tt.wantOutcome) {
						t.Errorf("error document code %s with %d attempts; want %s with %d", code, n, tt.wantCode, len(tt.wantOutcome))
					}
					if got := h.Headers.Get("X-Gateway-Error"); got != tt.wantCode {
						t.Errorf("X-Gateway-Error = %q; want %q", got, tt.wantCode)
					}
				}
				if tt.name == "backend answers 200" {
					if h.Headers.Get("X-Backend") != "yes" {
						t.Errorf("backend header lost: %v", h.Headers)
					}
					r := e.backend.call(0)
					if r.Method != "POST" || r.URL.String() != "http://backend.test/jobs?n=1" {
						t.Errorf("backend got %s %s", r.Method, r.URL)
					}
					for k, v := range map[string]string{"Idempotency-Key": asyncTestKey, "X-Forwarded-For": "192.0.2.7",
						"X-Forwarded-Host": "gw.example", "X-Forwarded-Proto": "https", "Content-Type": "text/plain"} {
						if got := r.Header.Get(k); got != v {
							t.Errorf("backend request %s = %q; want %q", k, got, v)
						}
					}
				}
				v, err := e.a.Status(context.Background(), acc.ID)
				if err != nil {
					t.Fatal(err)
				}
				wantData := "/_gateway/blobs/alice-results/" + acc.ID + "/data?exp=" + strconv.FormatInt(time.Now().Add(redirectURLLifetime).Unix(), 10) + "&sig=fake"
				if v.State != tt.wantState || v.ResultStatus != tt.wantStatus || v.DataURI != wantData || v.RetryAfter != 0 {
					t.Errorf("Status = %s %d %q retry %v; want %s %d %q 0", v.State, v.ResultStatus, v.DataURI, v.RetryAfter, tt.wantState, tt.wantStatus, wantData)
				}
				if got, want := e.notes.statuses(acc.ID), []string{"Queued", "Processing", tt.wantNotify}; !reflect.DeepEqual(got, want) {
					t.Errorf("notifications = %v; want %v", got, want)
				}
				if e.backend.count() != 1 {
					t.Errorf("backend calls = %d; want 1", e.backend.count())
				}
			})
		})
	}
}

// TestAsyncDuplicateDelivery: the same message delivered again after the
// result changes nothing.
func TestAsyncDuplicateDelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newAsyncEnv(t, asyncOK)
		acc := e.submit(t, asyncRequest())
		msg := e.takeOne(t, 0)
		if err := e.a.Process(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
		writes := e.store.writeCount()
		for i := range 3 {
			if err := e.a.Process(context.Background(), msg); err != nil {
				t.Fatalf("delivery %d: %v", i+2, err)
			}
		}
		if got := e.store.writeCount(); got != writes {
			t.Errorf("store writes after redelivery = %d; want %d (none)", got, writes)
		}
		if e.queue.size() != 0 || e.backend.count() != 1 {
			t.Errorf("queued %d, backend calls %d; want 0 and 1", e.queue.size(), e.backend.count())
		}
		h, data := e.result(t, acc.ID)
		if h.Status != 200 || data != "done:hello" {
			t.Errorf("result %d %q", h.Status, data)
		}
	})
}

// TestAsyncConcurrentWorkers: two deliveries of one message run at once;
// one claims, the other finds its live lease and leaves a message delayed to
// the lease's end.
func TestAsyncConcurrentWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newAsyncEnv(t, asyncAfter(time.Second, asyncOK))
		acc := e.submit(t, asyncRequest())
		msg := e.takeOne(t, 0)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Go(func() { errs[i] = e.a.Process(context.Background(), msg) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("worker %d: %v", i, err)
			}
		}
		if e.backend.count() != 1 {
			t.Errorf("backend calls = %d; want 1", e.backend.count())
		}
		e.takeOne(t, asyncTestLease) // the loser's message for the lease's end
		h, data := e.result(t, acc.ID)
		if h.Status != 200 || data != "done:hello" {
			t.Errorf("result %d %q", h.Status, data)
		}
	})
}

// TestAsyncTakeover: a worker claimed the request and died; once its lease
// lapses, the next delivery takes over.
func TestAsyncTakeover(t *testing.T) {
	tests := []struct {
		name      string
		left      map[string]string // blobs the dead worker wrote: "data", "headers.json"
		wantCalls int
	}{
		{"died before its attempt", nil, 1},
		{"died after its data blob", map[string]string{"data": "stale"}, 1},
		{"died after its header blob", map[string]string{"data": "done:hello",
			"headers.json": `{"status":200,"headers":{"X-Attempts":["1"]},"id":"ID","completedAt":"2000-01-01T00:00:05Z","attempts":[{"host":"backend.test","status":200,"outcome":"status","durationMs":5}]}`}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newAsyncEnv(t, asyncOK)
				acc := e.submit(t, asyncRequest())
				msg := e.takeOne(t, 0)
				rec := e.store.record(t, acc.ID)
				rec.State = StateRunning
				rec.Claim = &claimLease{Owner: newAsyncID(), Until: time.Now().Add(asyncTestLease)}
				e.store.putRecord(t, rec)
				for name, body := range tt.left {
					body = strings.ReplaceAll(body, `"ID"`, strconv.Quote(acc.ID))
					key := asyncContainer + "/" + acc.ID + "/" + name
					if err := e.store.WriteBlob(context.Background(), key, strings.NewReader(body), "", false); err != nil {
						t.Fatal(err)
					}
				}

				// While the lease lives, the work is left alone.
				if err := e.a.Process(context.Background(), msg); err != nil {
					t.Fatal(err)
				}
				if e.backend.count() != 0 {
					t.Fatalf("a live lease was not respected")
				}
				start := time.Now()
				msg = e.takeOne(t, asyncTestLease)
				time.Sleep(asyncTestLease)
				if err := e.a.Process(context.Background(), msg); err != nil {
					t.Fatal(err)
				}
				if got := time.Since(start); got != asyncTestLease {
					t.Errorf("taken over after %v; want %v", got, asyncTestLease)
				}
				if e.backend.count() != tt.wantCalls {
					t.Errorf("backend calls = %d; want %d", e.backend.count(), tt.wantCalls)
				}
				if tt.wantCalls > 0 && e.backend.call(0).Header.Get("Idempotency-Key") != asyncTestKey {
					t.Errorf("takeover sent Idempotency-Key %q; want %q", e.backend.call(0).Header.Get("Idempotency-Key"), asyncTestKey)
				}
				h, data := e.result(t, acc.ID)
				if h.Status != 200 || data != "done:hello" {
					t.Errorf("result %d %q; want 200 done:hello", h.Status, data)
				}
				if r := e.store.record(t, acc.ID); r.State != StateSucceeded || r.Claim != nil || r.Result == nil || r.Result.Status != 200 {
					t.Errorf("record %s claim %+v result %+v; want succeeded, released", r.State, r.Claim, r.Result)
				}
				if e.queue.size() != 0 {
					t.Errorf("messages left: %d", e.queue.size())
				}
			})
		})
	}
}

// TestAsyncExpiry: a request whose TTL ran out gets an expired result and no
// further attempt.
func TestAsyncExpiry(t *testing.T) {
	tests := []struct {
		name         string
		attemptFirst bool // one invocation ran out of time before expiry
		wantStatus   int
		wantCalls    int
	}{
		{"expired while queued", false, 412, 0},
		{"expired after a checkpoint", true, 504, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newAsyncEnv(t, asyncAfter(time.Minute, asyncOK))
				acc := e.submit(t, asyncRequest())
				if tt.attemptFirst {
					msg := e.takeOne(t, 0)
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					err := e.a.Process(ctx, msg)
					cancel()
					if err != nil {
						t.Fatal(err)
					}
				}
				time.Sleep(asyncTestTTL)
				e.drain(t)
				h, data := e.result(t, acc.ID)
				if h.Status != tt.wantStatus || h.Headers.Get("X-Gateway-Error") != "TTLExpired" {
					t.Errorf("result %d %v; want %d TTLExpired", h.Status, h.Headers, tt.wantStatus)
				}
				if code, n := errorCode(t, data); code != "TTLExpired" || n != tt.wantCalls {
					t.Errorf("error document %s with %d attempts; want TTLExpired with %d", code, n, tt.wantCalls)
				}
				if e.backend.count() != tt.wantCalls {
					t.Errorf("backend calls = %d; want %d", e.backend.count(), tt.wantCalls)
				}
				if v, err := e.a.Status(context.Background(), acc.ID); err != nil || v.State != StateExpired {
					t.Errorf("Status = %+v, %v; want expired", v, err)
				}
				if got := e.notes.statuses(acc.ID); got[len(got)-1] != "Expired" {
					t.Errorf("notifications = %v; want Expired last", got)
				}
			})
		})
	}
}

// TestAsyncCheckpoint: an invocation whose deadline comes before the backend
// answers checkpoints and hands on; the next invocation finishes.
func TestAsyncCheckpoint(t *testing.T) {
	slowBody := func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{},
			Body: &slowBody{ctx: r.Context(), delay: 10 * time.Second, data: strings.NewReader("late body")}}, nil
	}
	tests := []struct {
		name         string
		backend      backendFunc
		wantFirst    []string // the record's timeline after the checkpoint
		wantTimeline []string
		wantData     string
	}{
		{"attempt cut by the invocation's limit", asyncAfter(10*time.Second, asyncOK),
			[]string{"function-limit@4000"}, []string{"function-limit@4000", "status:200@10000"}, "done:hello"},
		{"body cut by the invocation's limit", slowBody,
			[]string{"status:200@0"}, []string{"status:200@0", "status:200@0"}, "late body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newAsyncEnv(t, tt.backend)
				acc := e.submit(t, asyncRequest())
				msg := e.takeOne(t, 0)

				// 5 s invocation, 1 s margin: the work stops at 4 s.
				start := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := e.a.Process(ctx, msg)
				cancel()
				if err != nil {
					t.Fatalf("first invocation: %v", err)
				}
				if got := time.Since(start); got != 4*time.Second {
					t.Errorf("first invocation handed on after %v; want 4s", got)
				}
				rec := e.store.record(t, acc.ID)
				if rec.Checkpoints != 1 || rec.Claim != nil || rec.State != StateRunning || !reflect.DeepEqual(outcomes(rec.Attempts), tt.wantFirst) {
					t.Errorf("record after checkpoint: checkpoints %d claim %+v state %s attempts %v; want 1, nil, running, %v",
						rec.Checkpoints, rec.Claim, rec.State, outcomes(rec.Attempts), tt.wantFirst)
				}
				if e.headerCount() != 0 {
					t.Fatalf("a result was written at the checkpoint")
				}
				msg = e.takeOne(t, 0)

				ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
				err = e.a.Process(ctx, msg)
				cancel()
				if err != nil {
					t.Fatalf("second invocation: %v", err)
				}
				h, data := e.result(t, acc.ID)
				if h.Status != 200 || data != tt.wantData || !reflect.DeepEqual(outcomes(h.Attempts), tt.wantTimeline) {
					t.Errorf("result %d %q %v; want 200 %q %v", h.Status, data, outcomes(h.Attempts), tt.wantData, tt.wantTimeline)
				}
				if h.Headers.Get("X-Attempts") != "2" {
					t.Errorf("X-Attempts = %q; want 2", h.Headers.Get("X-Attempts"))
				}
				if e.backend.count() != 2 || e.backend.call(1).Header.Get("Idempotency-Key") != asyncTestKey {
					t.Errorf("backend calls = %d; want 2 with the same Idempotency-Key", e.backend.count())
				}
				if rec := e.store.record(t, acc.ID); rec.State != StateSucceeded || rec.Checkpoints != 1 {
					t.Errorf("record %s checkpoints %d; want succeeded 1", rec.State, rec.Checkpoints)
				}
				if e.queue.size() != 0 {
					t.Errorf("messages left: %d", e.queue.size())
				}
			})
		})
	}
}

// TestAsyncSubmitFailures: a hand-off that cannot be made durable is a 503
// AsyncUnavailable that never produces a result, and the key stays usable.
func TestAsyncSubmitFailures(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name       string
		storeFail  string // op and key prefix failing in the store
		queueFail  bool
		delivered  bool // the failed enqueue went out anyway
		wantQueued int  // messages left behind
		wantRecord bool // an (abandoned) record is left behind
	}{
		{"signing fails", "sign alice-results/", false, false, 0, false},
		{"body write fails", "write gateway/requests/", false, false, 0, false},
		{"record write fails", "put gateway/records/", false, false, 0, false},
		{"enqueue fails", "", true, false, 0, true},
		{"enqueue fails after delivering", "", true, true, 1, true},
		{"index write fails", "put gateway/idempotency/", false, false, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newAsyncEnv(t, asyncOK)
				e.store.lasting = true // the 202 asks the store to sign
				if tt.storeFail != "" {
					op, prefix, _ := strings.Cut(tt.storeFail, " ")
					e.store.setFail(func(o, key string) error {
						if o == op && strings.HasPrefix(key, prefix) {
							return boom
						}
						return nil
					})
				}
				if tt.queueFail {
					e.queue.fail, e.queue.deliver = func() error { return boom }, tt.delivered
				}
				acc, c, err := e.a.Submit(context.Background(), asyncRequest(), e.profile, false)
				var ge *core.Error
				if !errors.As(err, &ge) || ge.Reason != core.ReasonAsyncUnavailable || ge.HTTPStatus() != 503 || !errors.Is(err, boom) {
					t.Fatalf("Submit = %v, %v; want a 503 AsyncUnavailable wrapping the cause", acc, err)
				}
				if acc != nil || c != nil {
					t.Errorf("Submit returned %v, %v with its error", acc, c)
				}
				if got := e.a.Stats.AsyncUnavailable.Load(); got != 1 || e.a.Stats.AsyncAccepted.Load() != 0 {
					t.Errorf("stats: unavailable %d accepted %d; want 1, 0", got, e.a.Stats.AsyncAccepted.Load())
				}
				if e.queue.size() != tt.wantQueued {
					t.Errorf("queued messages = %d; want %d", e.queue.size(), tt.wantQueued)
				}
				records := e.store.keys(".json")
				var ids []string
				for _, k := range records {
					if id, ok := strings.CutPrefix(k, asyncRecordsPrefix); ok {
						ids = append(ids, strings.TrimSuffix(id, ".json"))
					}
				}
				if (len(ids) > 0) != tt.wantRecord || len(ids) > 1 {
					t.Fatalf("records = %v; want one: %v", ids, tt.wantRecord)
				}
				e.store.setFail(nil)
				e.queue.fail = nil
				// Whatever is queued, and a message forged for the record,
				// produce nothing.
				for _, id := range ids {
					if r := e.store.record(t, id); r.State != StateAbandoned {
						t.Errorf("record state %s; want abandoned", r.State)
					}
					if err := e.queue.Enqueue(context.Background(), wireContinuation{ID: id}.Encode(), 0); err != nil {
						t.Fatal(err)
					}
					if _, err := e.a.Status(context.Background(), id); !errors.Is(err, ErrNotFound) {
						t.Errorf("Status of the failed submission = %v; want ErrNotFound", err)
					}
				}
				e.drain(t)
				e.noResults(t)
				if e.backend.count() != 0 || len(e.notes.statuses(firstOr(ids))) != 0 {
					t.Errorf("backend calls %d, notifications %v; want none", e.backend.count(), e.notes.statuses(firstOr(ids)))
				}

				// The client's retry with the same key is a fresh submission.
				acc = e.submit(t, asyncRequest())
				if len(ids) > 0 && acc.ID == ids[0] {
					t.Errorf("the retry got the failed submission's id")
				}
				e.drain(t)
				if h, data := e.result(t, acc.ID); h.Status != 200 || data != "done:hello" {
					t.Errorf("retry result %d %q", h.Status, data)
				}
				if e.headerCount() != 1 {
					t.Errorf("header blobs = %d; want 1", e.headerCount())
				}
			})
		})
	}
}

func firstOr(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return ids[0]
}

// TestAsyncIdempotency: a client's key seen before, within a profile,
// returns the same Accepted and enqueues nothing.
func TestAsyncIdempotency(t *testing.T) {
	bob := &core.Profile{UserID: "bob", Async: core.AsyncConfig{Enabled: true, ContainerName: asyncContainer}}
	tests := []struct {
		name     string
		second   func(*core.Request) // changes the second request
		profile2 *core.Profile       // nil: the first's
		want     string              // "same", "new" or "reused"
	}{
		{"same key, same request", nil, nil, "same"},
		{"same key, same request, other headers", func(r *core.Request) { r.Header.Set("X-Other", "1") }, nil, "same"},
		{"same key, another body", func(r *core.Request) { r.Body = []byte("other") }, nil, "reused"},
		{"same key, no body", func(r *core.Request) { r.Body = nil }, nil, "reused"},
		{"same key, another path", func(r *core.Request) { r.Path = "/jobs/2" }, nil, "reused"},
		{"same key, another query", func(r *core.Request) { r.RawQuery = "n=2" }, nil, "reused"},
		{"same key, another method", func(r *core.Request) { r.Method = "PUT" }, nil, "reused"},
		{"same key, streamed body", func(r *core.Request) { r.BodyStream = io.NopCloser(strings.NewReader("hello")) }, nil, "reused"},
		{"same key, another profile", nil, bob, "new"},
		{"gateway-generated key", func(r *core.Request) { r.ClientKey = false }, nil, "new"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newAsyncEnv(t, asyncOK)
				first := asyncRequest()
				if tt.second != nil && tt.name == "gateway-generated key" {
					tt.second(first)
				}
				acc1 := e.submit(t, first)
				time.Sleep(time.Second)
				second := asyncRequest()
				if tt.second != nil {
					tt.second(second)
				}
				p := e.profile
				if tt.profile2 != nil {
					p = tt.profile2
				}
				// Replay, as the HTTP face calls it before forwarding.
				rep, rerr := e.a.engine().idempotency().replay(context.Background(), second, p)
				acc2, _, err := e.a.Submit(context.Background(), second, p, false)
				switch tt.want {
				case "reused":
					for name, err := range map[string]error{"Replay": rerr, "Submit": err} {
						var ge *core.Error
						if !errors.As(err, &ge) || ge.Reason != core.ReasonIdempotencyKeyReused || ge.HTTPStatus() != 422 || ge.Reason.Code() != "IdempotencyKeyReused" {
							t.Errorf("%s = %v; want a 422 IdempotencyKeyReused", name, err)
						}
						if ge != nil && strings.Contains(ge.Error(), acc1.ID) {
							t.Errorf("%s error %q leaks the first request's id", name, ge.Error())
						}
					}
					if rep != nil || acc2 != nil {
						t.Errorf("Replay, Submit = %+v, %+v with a reused key; want nothing", rep, acc2)
					}
				case "same":
					if rerr != nil || err != nil || rep == nil || *rep != *acc1 || *acc2 != *acc1 {
						t.Errorf("Replay, Submit = %+v %v, %+v %v; want the first Accepted %+v", rep, rerr, acc2, err, acc1)
					}
				case "new":
					if rerr != nil || rep != nil {
						t.Errorf("Replay = %+v, %v; want nil, nil (a new request)", rep, rerr)
					}
					if err != nil || acc2 == nil || acc2.ID == acc1.ID {
						t.Errorf("Submit = %+v, %v; want a new request", acc2, err)
					}
				}
				wantMsgs := 1
				if tt.want == "new" {
					wantMsgs = 2
				}
				if e.queue.size() != wantMsgs {
					t.Errorf("queued messages = %d; want %d", e.queue.size(), wantMsgs)
				}
				e.drain(t)
				e.result(t, acc1.ID)
				if e.headerCount() != wantMsgs || e.backend.count() != wantMsgs {
					t.Errorf("header blobs %d, backend calls %d; want %d each", e.headerCount(), e.backend.count(), wantMsgs)
				}
				// Once done, the same request still gets the same Accepted.
				if tt.want == "same" {
					if rep, err := e.a.engine().idempotency().replay(context.Background(), second, p); err != nil || rep == nil || *rep != *acc1 {
						t.Errorf("Replay when done = %+v, %v; want %+v", rep, err, acc1)
					}
				}
			})
		})
	}
}

// TestAsyncReplayStoreDown: a store that cannot be read is 503, not a new
// request.
func TestAsyncReplayStoreDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newAsyncEnv(t, asyncOK)
		e.submit(t, asyncRequest())
		boom := errors.New("store down")
		e.store.setFail(func(op, key string) error { return boom })
		acc, err := e.a.engine().idempotency().replay(context.Background(), asyncRequest(), e.profile)
		if acc != nil || core.ReasonOf(err) != core.ReasonAsyncUnavailable || !errors.Is(err, boom) {
			t.Errorf("Replay = %+v, %v; want a 503 AsyncUnavailable wrapping the cause", acc, err)
		}
	})
}

// TestAsyncIdempotencyRaceDifferent: two different requests with one key
// at once: one wins, the other is refused, only one runs.
func TestAsyncIdempotencyRaceDifferent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newAsyncEnv(t, asyncOK)
		var wg sync.WaitGroup
		accs := make([]*Accepted, 2)
		errs := make([]error, 2)
		for i := range accs {
			wg.Go(func() {
				req := asyncRequest()
				req.Body = []byte("body " + strconv.Itoa(i))
				accs[i], _, errs[i] = e.a.Submit(context.Background(), req, e.profile, false)
			})
		}
		wg.Wait()
		won := 0
		for i := range accs {
			switch {
			case errs[i] == nil && accs[i] != nil:
				won++
			case core.ReasonOf(errs[i]) != core.ReasonIdempotencyKeyReused:
				t.Errorf("submission %d: %v; want success or IdempotencyKeyReused", i, errs[i])
			}
		}
		if won != 1 {
			t.Fatalf("%d submissions won; want 1", won)
		}
		e.drain(t)
		if e.headerCount() != 1 || e.backend.count() != 1 {
			t.Errorf("header blobs %d, backend calls %d; want 1 each", e.headerCount(), e.backend.count())
		}
	})
}

// TestAsyncIdempotencyRace: two submissions with one key at once get one
// Accepted; the loser's record is abandoned and produces nothing.
func TestAsyncIdempotencyRace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newAsyncEnv(t, asyncOK)
		var wg sync.WaitGroup
		accs := make([]*Accepted, 2)
		for i := range accs {
			wg.Go(func() {
				acc, _, err := e.a.Submit(context.Background(), asyncRequest(), e.profile, false)
				if err != nil {
					t.Error(err)
				}
				accs[i] = acc
			})
		}
		wg.Wait()
		if accs[0] == nil || accs[1] == nil || *accs[0] != *accs[1] {
			t.Fatalf("Accepted = %+v, %+v; want the same", accs[0], accs[1])
		}
		e.drain(t)
		e.result(t, accs[0].ID)
		if e.headerCount() != 1 || e.backend.count() != 1 {
			t.Errorf("header blobs %d, backend calls %d; want 1 each", e.headerCount(), e.backend.count())
		}
	})
}

// TestAsyncStatus follows a request from queued to succeeded.
func TestAsyncStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newAsyncEnv(t, asyncAfter(10*time.Second, asyncOK))
		arrival := time.Now()
		acc := e.submit(t, asyncRequest())
		state := func() *StatusView {
			t.Helper()
			v, err := e.a.Status(context.Background(), acc.ID)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		if v := state(); v.State != StateQueued || v.RetryAfter != 2*time.Second || v.DataURI != "" || !v.Arrival.Equal(arrival) || !v.Expiry.Equal(arrival.Add(asyncTestTTL)) {
			t.Errorf("after Submit: %+v; want queued, retry 2s, no URLs", v)
		}
		msg := e.takeOne(t, 0)
		done := make(chan error)
		go func() { done <- e.a.Process(context.Background(), msg) }()
		time.Sleep(time.Second)
		if v := state(); v.State != StateRunning || v.RetryAfter != 2*time.Second {
			t.Errorf("during the attempt: %+v; want running", v)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		v := state()
		if v.State != StateSucceeded || v.ResultStatus != 200 || v.RetryAfter != 0 || !v.CompletedAt.Equal(arrival.Add(10*time.Second)) ||
			len(v.Attempts) != 1 {
			t.Errorf("when done: %+v; want succeeded 200 at +10s", v)
		}
		// The status URI's URLs are signed now, for a few minutes.
		if want := "/_gateway/blobs/alice-results/" + acc.ID + "/data?exp=" + strconv.FormatInt(time.Now().Add(redirectURLLifetime).Unix(), 10) + "&"; !strings.HasPrefix(v.DataURI, want) {
			t.Errorf("data URL when done %q; want %s…", v.DataURI, want)
		}
		if want := "/_gateway/blobs/alice-results/" + acc.ID + "/headers.json?exp="; !strings.HasPrefix(v.HeaderURI, want) {
			t.Errorf("header URL when done %q; want %s…", v.HeaderURI, want)
		}
		e.result(t, acc.ID)

		// Shortly before expiry the URLs are signed for a few minutes
		// more; within the read grace, never past its end.
		expiry := arrival.Add(asyncTestTTL)
		time.Sleep(time.Until(expiry.Add(-time.Minute)))
		if want := "exp=" + strconv.FormatInt(time.Now().Add(redirectURLLifetime).Unix(), 10); !strings.Contains(state().DataURI, want) {
			t.Errorf("data URL a minute before expiry %q; want %s", state().DataURI, want)
		}
		time.Sleep(3 * time.Minute)
		if want := "exp=" + strconv.FormatInt(expiry.Add(ReadGrace).Unix(), 10); !strings.Contains(state().DataURI, want) {
			t.Errorf("data URL within the grace %q; want %s", state().DataURI, want)
		}
		// At expiry plus the read grace: 410 Expired, nothing signed.
		time.Sleep(time.Until(expiry.Add(ReadGrace)))
		signs := 0
		e.store.setFail(func(op, key string) error {
			if op == "sign" {
				signs++
			}
			return nil
		})
		v, err := e.a.Status(context.Background(), acc.ID)
		var ge *core.Error
		if v != nil || !errors.As(err, &ge) || ge.Reason != core.ReasonExpired || ge.HTTPStatus() != 410 || ge.Reason.Code() != "Expired" {
			t.Errorf("Status at expiry+grace = %+v, %v; want a 410 Expired", v, err)
		}
		if signs != 0 {
			t.Errorf("Status signed %d URLs after the read grace; want none", signs)
		}
	})
}

func TestAsyncStatusNotFound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newAsyncEnv(t, asyncOK)
		acc := e.submit(t, asyncRequest())
		var keys []string
		var mu sync.Mutex
		e.store.setFail(func(op, key string) error {
			mu.Lock()
			keys = append(keys, key)
			mu.Unlock()
			return nil
		})
		for _, id := range []string{"", "abc", strings.ToUpper(acc.ID), acc.ID + ".json", "../records/" + acc.ID,
			acc.ID[:31] + "/", newAsyncID()} {
			if _, err := e.a.Status(context.Background(), id); !errors.Is(err, ErrNotFound) {
				t.Errorf("Status(%q) = %v; want ErrNotFound", id, err)
			}
		}
		for _, k := range keys {
			id := strings.TrimSuffix(strings.TrimPrefix(k, asyncRecordsPrefix), ".json")
			if !validAsyncID(id) {
				t.Errorf("store read %q, built from an unvalidated id", k)
			}
		}
	})
}

func TestAsyncBadMessages(t *testing.T) {
	id := strings.Repeat("ab", 16)
	tests := []struct {
		name string
		msg  string
	}{
		{"empty", ""},
		{"not JSON", "continue " + id},
		{"array", `[1]`},
		{"version as string", `{"v":"1","id":"` + id + `"}`},
		{"no version", `{"id":"` + id + `"}`},
		{"version 0", `{"v":0,"id":"` + id + `"}`},
		{"negative version", `{"v":-1,"id":"` + id + `"}`},
		{"id of the wrong type", `{"v":1,"id":1}`},
		{"no id", `{"v":1}`},
		{"short id", `{"v":1,"id":"abc"}`},
		{"uppercase id", `{"v":1,"id":"` + strings.ToUpper(id) + `"}`},
		{"path in id", `{"v":1,"id":"../../../../../../etc/passwd"}`},
		{"trailing data", `{"v":1,"id":"` + id + `"}{}`},
		{"too long", `{"v":1,"id":"` + id + `"}` + strings.Repeat(" ", maxMessageBytes)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newAsyncEnv(t, asyncOK)
			err := e.a.Process(context.Background(), []byte(tt.msg))
			if !errors.Is(err, ErrBadMessage) {
				t.Fatalf("Process(%.60q) = %v; want ErrBadMessage", tt.msg, err)
			}
			if e.store.writeCount() != 0 || e.queue.size() != 0 || e.backend.count() != 0 {
				t.Errorf("a bad message changed something")
			}
			e.noResults(t)
		})
	}
}

func TestAsyncUnknownID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newAsyncEnv(t, asyncOK)
		if err := e.a.Process(context.Background(), wireContinuation{ID: newAsyncID()}.Encode()); err != nil {
			t.Fatalf("Process = %v; want nil", err)
		}
		if e.store.writeCount() != 0 || e.queue.size() != 0 || e.backend.count() != 0 {
			t.Errorf("a message for an unknown id changed something")
		}
		e.noResults(t)
	})
}

// TestAsyncTransientStoreError: a store that fails while claiming makes
// Process fail (the queue delivers again), and the next delivery finishes.
func TestAsyncTransientStoreError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newAsyncEnv(t, asyncOK)
		acc := e.submit(t, asyncRequest())
		msg := e.takeOne(t, 0)
		boom := errors.New("store down")
		e.store.setFail(func(op, key string) error { return boom })
		if err := e.a.Process(context.Background(), msg); !errors.Is(err, boom) || errors.Is(err, ErrBadMessage) {
			t.Fatalf("Process = %v; want the store's error", err)
		}
		e.store.setFail(nil)
		if err := e.a.Process(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
		e.result(t, acc.ID)
	})
}

// TestAsyncInflight: the submitting process keeps its attempt and its
// claim; queue workers leave it alone while its lease lives.
func TestAsyncInflight(t *testing.T) {
	answer := func() *core.Result {
		return &core.Result{
			Response: &http.Response{StatusCode: 201, Header: http.Header{"Content-Type": {"text/plain"}, "Connection": {"close"}},
				Body: io.NopCloser(strings.NewReader("made by the caller"))},
			Attempts: []core.Attempt{{Host: "backend.test", Status: 201, Outcome: core.OutcomeStatus, DurationMs: 40000}},
		}
	}
	tests := []struct {
		name     string
		finish   func(*Claim) (*core.Result, error) // nil: the caller dies
		wantErr  error
		wantData string
		wantTL   []string
		wantCall int
	}{
		{"finish with a response", func(*Claim) (*core.Result, error) { return answer(), nil },
			nil, "made by the caller", []string{"status:201@40000"}, 0},
		{"finish with a final error", func(*Claim) (*core.Result, error) {
			return nil, &core.Error{Reason: core.ReasonBackendUnavailable, Message: "no backend", Attempts: []core.Attempt{{Host: "backend.test", Outcome: core.OutcomeConnectError}}}
		}, nil, "", []string{"connect-error@0"}, 0},
		{"finish cut by the execution limit", func(*Claim) (*core.Result, error) {
			return nil, &core.Error{Reason: core.ReasonFunctionLimit, Attempts: []core.Attempt{{Host: "backend.test", Outcome: core.OutcomeFunctionLimit, DurationMs: 40000}}}
		}, nil, "done:hello", []string{"function-limit@40000", "status:200@0"}, 1},
		{"the caller dies", nil, ErrLeaseLost, "done:hello", []string{"status:200@0"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newAsyncEnv(t, asyncOK)
				start := time.Now()
				acc, c, err := e.a.Submit(context.Background(), asyncRequest(), e.profile, true)
				if err != nil || c == nil || c.ID() != acc.ID {
					t.Fatalf("Submit = %v, %v, %v", acc, c, err)
				}
				rec := e.store.record(t, acc.ID)
				if rec.State != StateRunning || rec.Claim == nil || !rec.Claim.Inflight || !rec.Claim.Until.Equal(start.Add(asyncTestLease)) {
					t.Fatalf("record after inflight Submit: %s %+v; want running, claimed until +31s", rec.State, rec.Claim)
				}
				// The message waits for the lease; delivered early, it is
				// put back for the lease's end.
				msg := e.takeOne(t, asyncTestLease)
				if err := e.a.Process(context.Background(), msg); err != nil {
					t.Fatal(err)
				}
				msg = e.takeOne(t, asyncTestLease)

				if tt.finish == nil {
					c.stop() // the process dies: nobody renews the lease
					time.Sleep(asyncTestLease)
					if err := e.a.Process(context.Background(), msg); err != nil {
						t.Fatal(err)
					}
					err := e.a.Finish(context.Background(), c, answer(), nil)
					if !errors.Is(err, tt.wantErr) {
						t.Errorf("Finish after takeover = %v; want %v", err, tt.wantErr)
					}
				} else {
					// 40 s in, the renewed lease (until 62 s) still keeps
					// workers away.
					time.Sleep(40 * time.Second)
					if err := e.a.Process(context.Background(), msg); err != nil {
						t.Fatal(err)
					}
					e.takeOne(t, 22*time.Second)
					res, ferr := tt.finish(c)
					if err := e.a.Finish(context.Background(), c, res, ferr); err != nil {
						t.Fatalf("Finish: %v", err)
					}
					if err := e.a.Finish(context.Background(), c, nil, nil); err == nil {
						t.Errorf("a second Finish succeeded")
					}
					e.drain(t)
				}
				h, data := e.result(t, acc.ID)
				if tt.wantData != "" && data != tt.wantData {
					t.Errorf("data blob = %q; want %q", data, tt.wantData)
				}
				if tt.wantData == "" {
					if code, _ := errorCode(t, data); code != "BackendUnavailable" || h.Status != 502 {
						t.Errorf("result %d %s; want 502 BackendUnavailable", h.Status, code)
					}
				}
				if got := outcomes(h.Attempts); !reflect.DeepEqual(got, tt.wantTL) {
					t.Errorf("attempts = %v; want %v", got, tt.wantTL)
				}
				if _, ok := h.Headers["Connection"]; ok {
					t.Errorf("hop-by-hop header stored: %v", h.Headers)
				}
				if e.backend.count() != tt.wantCall {
					t.Errorf("backend calls = %d; want %d", e.backend.count(), tt.wantCall)
				}
				if r := e.store.record(t, acc.ID); !r.State.Done() || r.Claim != nil {
					t.Errorf("record %s %+v; want done and released", r.State, r.Claim)
				}
				if e.queue.size() != 0 {
					t.Errorf("messages left: %d", e.queue.size())
				}
			})
		})
	}
}

// TestAsyncLeaseRenewal: a worker whose attempts outlast one lease keeps
// renewing it, so a second delivery does not take over.
func TestAsyncLeaseRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newAsyncEnv(t, asyncAfter(8*time.Second, asyncStatus(503)), "a.test", "b.test", "c.test")
		e.a.Lease = 9 * time.Second // renewed every 3 s
		acc := e.submit(t, asyncRequest())
		msg := e.takeOne(t, 0)
		done := make(chan error)
		go func() { done <- e.a.Process(context.Background(), msg) }()
		time.Sleep(20 * time.Second)
		if err := e.a.Process(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
		// Renewed at 18 s until 27 s: back in 7 s.
		e.takeOne(t, 7*time.Second)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		h, _ := e.result(t, acc.ID)
		if h.Status != 503 || len(h.Attempts) != 3 || e.backend.count() != 3 {
			t.Errorf("result %d after %d attempts, %d calls; want 503 after 3", h.Status, len(h.Attempts), e.backend.count())
		}
	})
}

// TestAsyncStreamedBody: a body too large to buffer is streamed to the store
// and sent once from there.
func TestAsyncStreamedBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newAsyncEnv(t, asyncOK)
		req := asyncRequest()
		req.Body, req.BodyStream = nil, strings.NewReader("streamed body")
		acc := e.submit(t, req)
		if rec := e.store.record(t, acc.ID); !rec.Request.BodyStreamed || rec.Request.BodySize != 13 {
			t.Errorf("snapshot body: streamed %v size %d; want true 13", rec.Request.BodyStreamed, rec.Request.BodySize)
		}
		e.drain(t)
		if _, data := e.result(t, acc.ID); data != "done:streamed body" {
			t.Errorf("data = %q", data)
		}
		if cl := e.backend.call(0).ContentLength; cl != 13 {
			t.Errorf("Content-Length sent = %d; want 13", cl)
		}
	})
}

// TestAsyncNotifierFailure: a failing notifier does not fail the request.
func TestAsyncNotifierFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newAsyncEnv(t, asyncOK)
		e.notes.fail = errors.New("topic gone")
		acc := e.submit(t, asyncRequest())
		e.drain(t)
		if h, _ := e.result(t, acc.ID); h.Status != 200 {
			t.Errorf("status %d", h.Status)
		}
	})
}

func TestQueueDelay(t *testing.T) {
	tests := []struct{ in, want time.Duration }{
		{-time.Second, 0}, {0, 0}, {time.Nanosecond, time.Second}, {time.Second, time.Second},
		{7500 * time.Millisecond, 8 * time.Second}, {time.Hour, maxQueueDelay},
	}
	for _, tt := range tests {
		if got := queueDelay(tt.in); got != tt.want {
			t.Errorf("queueDelay(%v) = %v; want %v", tt.in, got, tt.want)
		}
	}
}

// TestAsyncInflightLost: a submitting process whose renewals fail loses its
// claim to a worker once the lease lapses; Lost tells it, and its Finish
// writes nothing.
func TestAsyncInflightLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newAsyncEnv(t, asyncOK)
		start := time.Now()
		acc, c, err := e.a.Submit(context.Background(), asyncRequest(), e.profile, true)
		if err != nil {
			t.Fatal(err)
		}
		msg := e.takeOne(t, asyncTestLease)
		e.store.setFail(func(op, key string) error {
			if op == "put" && strings.HasPrefix(key, asyncRecordsPrefix) {
				return errors.New("store unreachable")
			}
			return nil
		})
		time.Sleep(asyncTestLease + 500*time.Millisecond) // the heartbeats at 10.3, 20.7 and 31 s fail
		e.store.setFail(nil)
		if err := e.a.Process(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
		<-c.Lost() // the next heartbeat, at 41.3 s, finds the request taken
		if got, want := time.Since(start), 4*(asyncTestLease/3); got != want {
			t.Errorf("Lost after %v; want %v", got, want)
		}
		res := &core.Result{Response: &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("too late"))}}
		if err := e.a.Finish(context.Background(), c, res, nil); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("Finish = %v; want ErrLeaseLost", err)
		}
		if h, data := e.result(t, acc.ID); h.Status != 200 || data != "done:hello" || e.backend.count() != 1 {
			t.Errorf("result %d %q after %d calls; want the worker's", h.Status, data, e.backend.count())
		}
	})
}

// TestAsyncLeaseLost: a worker whose claim was taken over (its lease lapsed
// while it stalled) writes nothing and leaves a message for the new lease's
// end, whether its renewer or its pre-write check finds out.
func TestAsyncLeaseLost(t *testing.T) {
	tests := []struct {
		name      string
		backend   time.Duration
		detectAt  time.Duration
		wantDelay time.Duration
	}{
		{"found by the renewer", 25 * time.Second, asyncTestLease / 3, 26 * time.Second},
		{"found before the data write", 10 * time.Second, 10 * time.Second, 26 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newAsyncEnv(t, asyncAfter(tt.backend, asyncOK))
				acc := e.submit(t, asyncRequest())
				msg := e.takeOne(t, 0)
				start := time.Now()
				done := make(chan error)
				go func() { done <- e.a.Process(context.Background(), msg) }()
				time.Sleep(5 * time.Second)
				rec := e.store.record(t, acc.ID)
				rec.Claim = &claimLease{Owner: newAsyncID(), Until: time.Now().Add(asyncTestLease)}
				e.store.putRecord(t, rec)
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				if got := time.Since(start); got != tt.detectAt {
					t.Errorf("the worker left after %v; want %v", got, tt.detectAt)
				}
				e.noResults(t)
				e.takeOne(t, tt.wantDelay)

				// The usurper dies too; the next delivery after its lease
				// finishes.
				time.Sleep(time.Minute)
				if err := e.a.Process(context.Background(), msg); err != nil {
					t.Fatal(err)
				}
				if h, data := e.result(t, acc.ID); h.Status != 200 || data != "done:hello" || e.backend.count() != 2 {
					t.Errorf("result %d %q after %d calls; want 200 after 2", h.Status, data, e.backend.count())
				}
			})
		})
	}
}

// TestAsyncCorruptRecord: a record that does not decode is terminal: its
// messages are settled (Process returns nil) and it is reported to OnError
// once,
// and Status answers CorruptRecord on every poll.
func TestAsyncCorruptRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newAsyncEnv(t, asyncOK)
		var mu sync.Mutex
		var reported []error
		e.a.OnError = func(_ context.Context, id string, err error) {
			mu.Lock()
			reported = append(reported, err)
			mu.Unlock()
		}
		acc := e.submit(t, asyncRequest())
		msg := e.takeOne(t, 0)
		e.store.mu.Lock()
		o := e.store.objects[asyncRecordKey(acc.ID)]
		o.data = append([]byte(`{"v":1,"garbage":`), o.data...)
		e.store.objects[asyncRecordKey(acc.ID)] = o
		e.store.mu.Unlock()
		// Two deliveries (a redelivery, a message delayed for an in-flight
		// claim): both settled, reported once.
		for range 2 {
			if err := e.a.Process(context.Background(), msg); err != nil {
				t.Fatalf("Process = %v; want nil (the message settled)", err)
			}
		}
		if len(reported) != 1 || !errors.Is(reported[0], errBadRecord) || !strings.Contains(reported[0].Error(), acc.ID) {
			t.Errorf("OnError got %v; want one error wrapping errBadRecord naming %s", reported, acc.ID)
		}
		if e.backend.count() != 0 || e.queue.size() != 0 {
			t.Errorf("backend calls %d, messages %d; want none", e.backend.count(), e.queue.size())
		}
		for range 3 {
			v, err := e.a.Status(context.Background(), acc.ID)
			var ge *core.Error
			if v != nil || !errors.As(err, &ge) || ge.Reason != core.ReasonCorruptRecord || ge.HTTPStatus() != 500 ||
				ge.Reason.Code() != "CorruptRecord" || !errors.Is(err, errBadRecord) {
				t.Fatalf("Status = %+v, %v; want a 500 CorruptRecord", v, err)
			}
		}
	})
}

// blockingNotifier holds every notification for delay, then records it
// and fails with fail.
type blockingNotifier struct {
	delay time.Duration
	fail  error
	mu    sync.Mutex
	got   []string
	at    []time.Time
}

func (n *blockingNotifier) Notify(ctx context.Context, topic string, body []byte) error {
	time.Sleep(n.delay)
	var v notification
	if err := json.Unmarshal(body, &v); err != nil {
		return err
	}
	n.mu.Lock()
	n.got = append(n.got, v.Status)
	n.at = append(n.at, time.Now())
	n.mu.Unlock()
	return n.fail
}

// TestAsyncNotificationsOffPath: where the host may work after answering,
// a slow topic does not delay Submit; the notifications still go out, in
// order. Where it may not, they are sent before Submit returns. Failures
// reach OnError either way.
func TestAsyncNotificationsOffPath(t *testing.T) {
	for _, after := range []bool{true, false} {
		t.Run(fmt.Sprintf("WorkAfterAnswer=%v", after), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newAsyncEnv(t, asyncOK)
				boom := errors.New("topic refused")
				n := &blockingNotifier{delay: 3 * time.Second, fail: boom}
				e.a.Notifier = n
				e.a.Host = core.HostCaps{WorkAfterAnswer: after}
				var mu sync.Mutex
				var reported []error
				e.a.OnError = func(_ context.Context, id string, err error) {
					mu.Lock()
					reported = append(reported, err)
					mu.Unlock()
				}
				start := time.Now()
				acc, c, err := e.a.Submit(context.Background(), asyncRequest(), e.profile, true)
				if err != nil {
					t.Fatal(err)
				}
				took := time.Since(start)
				want := time.Duration(0)
				if !after {
					want = 2 * n.delay // Queued and Processing, one after the other
				}
				if took != want {
					t.Errorf("Submit took %v; want %v", took, want)
				}
				resp, _ := asyncOK(&http.Request{})
				if err := e.a.Finish(context.Background(), c, &core.Result{Response: resp}, nil); err != nil {
					t.Fatal(err)
				}
				// Three notifications of 3 s each, one after the other.
				start = time.Now()
				if err := e.a.FlushNotifications(context.Background()); err != nil {
					t.Fatal(err)
				}
				want = 3 * n.delay
				if !after {
					want = 0 // sent already, by the calls that caused them
				}
				if took := time.Since(start); took != want {
					t.Errorf("FlushNotifications took %v; want %v", took, want)
				}
				short, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				if err := e.a.FlushNotifications(short); err != nil {
					t.Errorf("FlushNotifications with nothing pending = %v; want nil", err)
				}
				n.mu.Lock()
				defer n.mu.Unlock()
				if got := strings.Join(n.got, ","); got != "Queued,Processing,AsyncProcessed" {
					t.Errorf("notifications %s; want Queued,Processing,AsyncProcessed in order", got)
				}
				mu.Lock()
				defer mu.Unlock()
				if len(reported) != 3 {
					t.Fatalf("OnError called %d times; want 3", len(reported))
				}
				for _, err := range reported {
					if !errors.Is(err, boom) || !strings.Contains(err.Error(), acc.ID) || !strings.Contains(err.Error(), "alice-events") {
						t.Errorf("reported %v; want the notifier's error naming the id and topic", err)
					}
				}
			})
		})
	}
}

// TestAsyncReadGraceShortTTL: the read grace is the request's own TTL when
// that is shorter than ReadGrace.
func TestAsyncReadGraceShortTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newAsyncEnv(t, asyncOK)
		e.a.TTL = 2 * time.Second
		acc := e.submit(t, asyncRequest())
		e.drain(t)
		time.Sleep(4*time.Second - time.Nanosecond)
		v, err := e.a.Status(context.Background(), acc.ID)
		if err != nil || !v.State.Done() {
			t.Fatalf("Status at TTL+grace-1ns = %+v, %v; want the result", v, err)
		}
		if want := "exp=" + strconv.FormatInt(time.Now().Add(time.Nanosecond).Unix(), 10); !strings.Contains(v.DataURI, want) {
			t.Errorf("data URL %q; want it to end with the grace (%s)", v.DataURI, want)
		}
		time.Sleep(time.Nanosecond)
		if _, err := e.a.Status(context.Background(), acc.ID); core.ReasonOf(err) != core.ReasonExpired {
			t.Errorf("Status at TTL+grace = %v; want Expired", err)
		}
	})
}

// TestAsyncKeyFreeAfterGrace: once the first request's read grace is over,
// its Idempotency-Key starts a new request, even in a store that has not
// swept the old one.
func TestAsyncKeyFreeAfterGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newAsyncEnv(t, asyncOK)
		first := e.submit(t, asyncRequest())
		e.drain(t)
		time.Sleep(asyncTestTTL + ReadGrace - time.Nanosecond)
		if acc, err := e.a.engine().idempotency().replay(context.Background(), asyncRequest(), e.profile); err != nil || acc == nil || *acc != *first {
			t.Fatalf("Replay within the grace = %+v, %v; want the first request", acc, err)
		}
		time.Sleep(time.Nanosecond)
		req := asyncRequest()
		req.Body = []byte("another body")
		if acc, err := e.a.engine().idempotency().replay(context.Background(), req, e.profile); err != nil || acc != nil {
			t.Fatalf("Replay after the grace = %+v, %v; want nil, nil (a new request)", acc, err)
		}
		req.Budget.Arrival = time.Now()
		second := e.submit(t, req)
		if second.ID == first.ID {
			t.Errorf("the key after the grace returned the expired request")
		}
		if acc, err := e.a.engine().idempotency().replay(context.Background(), req, e.profile); err != nil || acc == nil || *acc != *second {
			t.Errorf("Replay of the new request = %+v, %v; want %+v", acc, err, second)
		}
	})
}

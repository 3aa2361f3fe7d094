package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"fngateway/adapters/lambda"
	"fngateway/core/async"
	"fngateway/infra/azure"
	"fngateway/infra/filestore"
	"fngateway/internal/emulators"
	"fngateway/internal/settings"
)

// TestDeadLettersBadInput: a bad id or AsyncStore stops the command with
// exit 2, naming it (moved from TestParseDeadLetters, whose table went
// with the parser to internal/ops).
func TestDeadLettersBadInput(t *testing.T) {
	var out, errb bytes.Buffer
	if code := deadLettersCmd(context.Background(), []string{"show", "nope"}, func(string) (string, bool) { return "", false }, time.Now(), &out, &errb); code != 2 || !strings.Contains(errb.String(), `id "nope"`) {
		t.Errorf("bad id: exit %d, stderr %q; want 2 naming it", code, errb.String())
	}
	errb.Reset()
	env := func(k string) (string, bool) { return map[string]string{"AsyncStore": "ftp://x"}[k], k == "AsyncStore" }
	if code := deadLettersCmd(context.Background(), []string{"list"}, env, time.Now(), &out, &errb); code != 2 || !strings.Contains(errb.String(), "AsyncStore") {
		t.Errorf("bad AsyncStore: exit %d, stderr %q; want 2 naming it", code, errb.String())
	}
}

// TestDeadLettersOpensAsTheGateway: the dead-letter command opens the
// stores through openStores, as the gateway does, so a malformed AsyncQueue
// of an s3:// store is refused with the reason start-up gives, exit 2.
func TestDeadLettersOpensAsTheGateway(t *testing.T) {
	env := map[string]string{"AsyncStore": "s3://bucket", "AsyncQueue": "https://example.com/queue"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	var out, errb strings.Builder
	code := deadLettersCmd(t.Context(), []string{"list"}, lookup, time.Now(), &out, &errb)
	_, startErr := openAsync(t.Context(), &settings.Settings{AsyncStore: env["AsyncStore"], AsyncQueue: env["AsyncQueue"]})
	if startErr == nil {
		t.Fatal("openAsync took a malformed AsyncQueue")
	}
	if want := "gateway: " + startErr.Error() + "\n"; code != 2 || errb.String() != want {
		t.Errorf("deadletters list = %d, stderr %q; want 2 and %q, as start-up says it", code, errb.String(), want)
	}
}

// dlBackend answers 200 "done"; while hold is set each call waits for it
// to be closed. It counts calls.
type dlBackend struct {
	*httptest.Server
	calls atomic.Int32
	mu    sync.Mutex
	hold  chan struct{}
	// called receives each call's number.
	called chan int32
}

func newDLBackend(tb testing.TB) *dlBackend {
	b := &dlBackend{called: make(chan int32, 16)}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := b.calls.Add(1)
		b.called <- n
		b.mu.Lock()
		hold := b.hold
		b.mu.Unlock()
		if hold != nil {
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
		}
		w.Write([]byte("done"))
	}))
	tb.Cleanup(b.Server.Close)
	return b
}

func (b *dlBackend) setHold(c chan struct{}) {
	b.mu.Lock()
	b.hold = c
	b.mu.Unlock()
}

// submitHeld sends an async request of profile u1 to the gateway at url
// while be holds every call, and returns its 202's body and the release of
// the hold. The hold is released at the test's end too: a failing test
// must not leave the backend's handler waiting (its server's Close would
// wait for it).
func submitHeld(t *testing.T, be *dlBackend, url string) (acc struct{ ID string }, release func()) {
	t.Helper()
	hold := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(hold) }) }
	t.Cleanup(release)
	be.setHold(hold)
	req, _ := http.NewRequest("POST", url+"/jobs", strings.NewReader("payload"))
	req.Header.Set("S7PAsyncMode", "true")
	req.Header.Set("X-UserProfile", "u1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&acc)
	resp.Body.Close()
	if resp.StatusCode != 202 || acc.ID == "" {
		t.Fatalf("submit: %d %+v; want 202", resp.StatusCode, acc)
	}
	return acc, release
}

// dlStore is one store under test: how its dead letters come about.
type dlStore struct {
	name string
	// setup sets the environment for the store and returns deadLetter,
	// which moves the one message on the continuation queue to the dead
	// letters as the platform would, and the continuation queue.
	setup func(t *testing.T) (deadLetter func(t *testing.T, q async.Queue), queueOf func(gw *gateway) async.Queue)
}

// dlLetter is a listed letter, as --json prints it.
type dlLetter struct {
	ID         string `json:"id"`
	Profile    string `json:"profile"`
	State      string `json:"state"`
	Deliveries int    `json:"deliveries"`
	CanFinish  bool   `json:"canFinish"`
	Redrive    string `json:"redrive"`
	AgeSeconds float64
	Expiry     time.Time         `json:"expiry"`
	Attempts   []json.RawMessage `json:"attempts"`
}

func runDL(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	code := runDeadLetters(ctx, args, &out, &errb)
	if errb.Len() > 0 {
		t.Logf("deadletters %s: stderr %s", strings.Join(args, " "), errb.String())
	}
	return out.String(), code
}

func listDL(t *testing.T) []dlLetter {
	t.Helper()
	out, code := runDL(t, "list", "--json")
	var ls []dlLetter
	if code != 0 || json.Unmarshal([]byte(out), &ls) != nil {
		t.Fatalf("list --json: exit %d, %q", code, out)
	}
	return ls
}

// dlStores are the stores TestDeadLettersCommand runs against; aws_test.go
// adds SQS in the builds that link AWS.
var dlStores = []dlStore{
	{"file", func(t *testing.T) (func(*testing.T, async.Queue), func(*gateway) async.Queue) {
		setEnv(t, "AsyncStore", "file:"+t.TempDir())
		setEnv(t, "AsyncQueue", "")
		return func(t *testing.T, q async.Queue) {
				m := receiveOne(t, q)
				type quarantiner interface {
					Quarantine(context.Context, async.Message) error
				}
				if err := q.(quarantiner).Quarantine(t.Context(), m); err != nil {
					t.Fatal(err)
				}
			}, func(gw *gateway) async.Queue {
				return gw.async.Queue
			}
	}},
	{"azure", func(t *testing.T) (func(*testing.T, async.Queue), func(*gateway) async.Queue) {
		az := emulators.StartAzurite(t)
		setEnv(t, "AsyncStore", "azure")
		setEnv(t, "AsyncQueue", "dl-continuations")
		setEnv(t, "AzureWebJobsStorage", az.ConnectionString())
		acct, err := azure.NewAccount(azure.Config{ConnectionString: az.ConnectionString()})
		if err != nil {
			t.Fatal(err)
		}
		poison, err := acct.Queue("dl-continuations-poison")
		if err != nil {
			t.Fatal(err)
		}
		return func(t *testing.T, q async.Queue) {
				// The Functions host's move past maxDequeueCount: the
				// message's text onto <queue>-poison.
				m := receiveOne(t, q)
				if err := poison.Enqueue(t.Context(), m.Body, 0); err != nil {
					t.Fatal(err)
				}
				if err := q.Complete(t.Context(), m); err != nil {
					t.Fatal(err)
				}
			}, func(gw *gateway) async.Queue {
				return gw.async.Queue
			}
	}},
}

// TestDeadLettersCommand runs the command against each store: a request
// whose continuation was dead-lettered is listed (id, profile, age,
// deliveries, can finish), shown, left alone by a dry run, and redriven
// while a normal delivery of it runs: the backend runs it once, one result.
// Dead-lettered again once finished, it is acknowledged: removed, not sent.
func TestDeadLettersCommand(t *testing.T) {
	for _, st := range dlStores {
		t.Run(st.name, func(t *testing.T) {
			be := newDLBackend(t)
			for k, v := range map[string]string{
				"Hosts": be.URL, "AsyncModeEnabled": "true", "AsyncTriggerTimeout": "200",
				"UserProfiles": `[{"userId":"u1","async-config":{"enabled":true,"containername":"u1-results"}}]`,
			} {
				setEnv(t, k, v)
			}
			deadLetter, queueOf := st.setup(t)
			testDeadLetters(t, be, deadLetter, queueOf)
		})
	}
}

// setEnv sets a setting under its name and in upper case (loadSettings
// mirrors it there), both restored when the test ends.
func setEnv(t *testing.T, k, v string) {
	t.Setenv(k, v)
	if up := strings.ToUpper(k); up != k {
		t.Setenv(up, v)
	}
}

func receiveOne(t *testing.T, q async.Queue) async.Message {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		ms, err := q.Receive(t.Context(), 1, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 1 {
			return ms[0]
		}
	}
	t.Fatal("no message on the continuation queue")
	return async.Message{}
}

func testDeadLetters(t *testing.T, be *dlBackend, deadLetter func(*testing.T, async.Queue), queueOf func(*gateway) async.Queue) {
	ctx := t.Context()
	s, _, err := loadSettings(0)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	// The Lambda host's behaviour: the in-line attempt is dropped at the
	// hand-off, and the continuation queued at once.
	gw, err := assemble(ctx, s, lambda.Caps(), logger)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.handler)
	defer srv.Close()
	q := queueOf(gw)

	if out, code := runDL(t, "list"); code != 0 || !strings.Contains(out, "no dead letters") {
		t.Fatalf("list of none: exit %d, %q", code, out)
	}

	acc, releaseHold := submitHeld(t, be, srv.URL)
	<-be.called // the in-line attempt, dropped at the hand-off
	deadLetter(t, q)

	ls := listDL(t)
	if len(ls) != 1 || ls[0].ID != acc.ID || ls[0].Profile != "u1" || !ls[0].CanFinish || ls[0].Redrive != "send" || ls[0].AgeSeconds <= 0 {
		t.Fatalf("list = %+v; want %s of u1, can finish, to send", ls, acc.ID)
	}
	out, code := runDL(t, "list")
	for _, want := range []string{"ID", "PROFILE", "AGE", "DELIVERIES", "ATTEMPTS", "CAN FINISH", "LAST ERROR", acc.ID, "yes, expires in", "1 dead letters"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("list: exit %d, output lacks %q:\n%s", code, want, out)
		}
	}
	out, code = runDL(t, "show", acc.ID)
	for _, want := range []string{"id:", acc.ID, "profile:", "u1", "can finish:", `{"v":1,"id":"` + acc.ID + `"}`} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("show: exit %d, output lacks %q:\n%s", code, want, out)
		}
	}
	if out, code := runDL(t, "show", strings.Repeat("0", 32)); code != 1 {
		t.Errorf("show of an unknown id: exit %d, %q; want 1", code, out)
	}
	out, code = runDL(t, "redrive", "--dry-run")
	if code != 0 || !strings.Contains(out, "would be sent back") || len(listDL(t)) != 1 {
		t.Errorf("redrive --dry-run: exit %d, %q; want it to say what it would do and change nothing", code, out)
	}

	// A normal delivery of the request runs (a copy of its message the
	// queue still had) while the redrive sends it back.
	normal := make(chan error, 1)
	go func() { normal <- gw.async.Process(context.WithoutCancel(ctx), []byte(`{"v":1,"id":"`+acc.ID+`"}`)) }()
	<-be.called
	out, code = runDL(t, "redrive", acc.ID)
	if code != 0 || !strings.Contains(out, acc.ID+": sent back") || !strings.Contains(out, "1 sent, 0 acknowledged, 0 left") {
		t.Fatalf("redrive: exit %d, %q; want it sent back", code, out)
	}
	if ls := listDL(t); len(ls) != 0 {
		t.Errorf("after redrive: %+v; want no dead letters", ls)
	}
	// The redriven continuation is delivered while the first still runs:
	// it finds the live claim and leaves it.
	redriven := receiveOne(t, q)
	if err := gw.async.Process(ctx, redriven.Body); err != nil {
		t.Fatal(err)
	}
	q.Complete(ctx, redriven)
	releaseHold()
	if err := <-normal; err != nil {
		t.Fatalf("normal delivery: %v", err)
	}
	// Every later delivery of it is acknowledged without a call.
	if err := gw.async.Process(ctx, redriven.Body); err != nil {
		t.Fatal(err)
	}
	if got := be.calls.Load(); got != 2 {
		t.Errorf("backend calls = %d; want 2: the in-line attempt dropped at the hand-off, and one run", got)
	}
	v, err := gw.async.Status(ctx, acc.ID)
	if err != nil || v.State != async.StateSucceeded || v.ResultStatus != 200 {
		t.Fatalf("status = %+v, %v; want succeeded 200", v, err)
	}

	// Dead-lettered again once finished: acknowledged, never sent.
	if err := q.Enqueue(ctx, redriven.Body, 0); err != nil {
		t.Fatal(err)
	}
	deadLetter(t, q)
	out, code = runDL(t, "redrive")
	if code != 0 || !strings.Contains(out, acc.ID+": acknowledged, not sent: already finished (succeeded)") {
		t.Errorf("redrive of a finished request: exit %d, %q; want acknowledged", code, out)
	}
	if ls := listDL(t); len(ls) != 0 {
		t.Errorf("after acknowledging: %+v; want no dead letters", ls)
	}
	if ms, err := q.Receive(ctx, 10, time.Second); err != nil || len(ms) != 0 {
		t.Errorf("continuation queue after acknowledging: %d messages, %v; want none sent", len(ms), err)
	}
	if got := be.calls.Load(); got != 2 {
		t.Errorf("backend calls = %d; want still 2", got)
	}
	testPurge(t, be, gw, srv.URL, q, redriven.Body, acc.ID, deadLetter)
}

// testPurge: purge refuses a dead letter younger than --min-age and one
// whose request can still finish, changes nothing with --dry-run, deletes a
// finished request's letter, and with --force deletes a pending request's
// letter and ends that request Failed.
func testPurge(t *testing.T, be *dlBackend, gw *gateway, url string, q async.Queue, finishedBody []byte, finished string, deadLetter func(*testing.T, async.Queue)) {
	ctx := t.Context()
	// The redriven delivery above found a live claim and put its message
	// back, delayed to the claim's end (a lease at most): take it first, so
	// that each deadLetter below finds the one message it expects.
	if m := receiveOne(t, q); !bytes.Equal(m.Body, finishedBody) {
		t.Fatalf("continuation queue holds %q; want the finished request's message put back", m.Body)
	} else if err := q.Complete(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue(ctx, finishedBody, 0); err != nil {
		t.Fatal(err)
	}
	deadLetter(t, q)
	out, code := runDL(t, "purge")
	if code != 1 || !strings.Contains(out, finished+": kept: younger than 1h0m0s") || len(listDL(t)) != 1 {
		t.Fatalf("purge of a young letter: exit %d, %q; want it kept, exit 1", code, out)
	}
	out, code = runDL(t, "purge", "--dry-run", "--min-age", "0s")
	if code != 0 || !strings.Contains(out, finished+": would be purged (finished)") || len(listDL(t)) != 1 {
		t.Fatalf("purge --dry-run: exit %d, %q; want it to say what it would do and change nothing", code, out)
	}
	out, code = runDL(t, "purge", "--min-age", "0s", finished)
	if code != 0 || !strings.Contains(out, finished+": purged (finished)") || !strings.Contains(out, "1 purged, 0 kept") {
		t.Fatalf("purge: exit %d, %q; want it purged", code, out)
	}
	if ls := listDL(t); len(ls) != 0 {
		t.Fatalf("after purge: %+v; want no dead letters", ls)
	}

	// A pending request's letter: kept unless forced; forced, the request
	// ends Failed rather than answering 202 until its expiry.
	acc, _ := submitHeld(t, be, url)
	<-be.called
	deadLetter(t, q)
	out, code = runDL(t, "purge", "--min-age", "0s")
	if code != 1 || !strings.Contains(out, acc.ID+": kept: its request can still finish") {
		t.Fatalf("purge of a letter that can finish: exit %d, %q; want it kept", code, out)
	}
	out, code = runDL(t, "purge", "--force", acc.ID)
	if code != 0 || !strings.Contains(out, acc.ID+": purged; its request ended Failed") {
		t.Fatalf("purge --force: exit %d, %q; want it purged and the request ended", code, out)
	}
	if ls := listDL(t); len(ls) != 0 {
		t.Errorf("after purge --force: %+v; want no dead letters", ls)
	}
	v, err := gw.async.Status(ctx, acc.ID)
	if err != nil || v.State != async.StateFailed || v.ResultCode != "Internal" {
		t.Errorf("status after purge --force = %+v, %v; want failed, Internal", v, err)
	}
}

// TestDeadLettersExpired: a dead-lettered request past its expiry
// (AsyncTTLSecs after arrival) is reported by redrive, not sent, and left
// in the dead letters.
func TestDeadLettersExpired(t *testing.T) {
	be := newDLBackend(t)
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	be.setHold(hold)
	const ttl = time.Second
	for k, v := range map[string]string{
		"Hosts": be.URL, "AsyncModeEnabled": "true", "AsyncTriggerTimeout": "200", "AsyncTTLSecs": "1",
		"UserProfiles": `[{"userId":"u1","async-config":{"enabled":true,"containername":"u1-results"}}]`,
		"AsyncStore":   "file:" + t.TempDir(), "AsyncQueue": "",
	} {
		setEnv(t, k, v)
	}
	s, _, err := loadSettings(0)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := assemble(t.Context(), s, lambda.Caps(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.handler)
	defer srv.Close()
	submitted := time.Now()
	req, _ := http.NewRequest("POST", srv.URL+"/jobs", strings.NewReader("payload"))
	req.Header.Set("S7PAsyncMode", "true")
	req.Header.Set("X-UserProfile", "u1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 202 {
		t.Fatalf("submit: %d; want 202", resp.StatusCode)
	}
	m := receiveOne(t, gw.async.Queue)
	type quarantiner interface {
		Quarantine(context.Context, async.Message) error
	}
	if err := gw.async.Queue.(quarantiner).Quarantine(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	// Past the expiry, as the record states it.
	ls := listDL(t)
	if len(ls) != 1 || ls[0].Expiry.Sub(submitted) < ttl {
		t.Fatalf("list = %+v; want one, expiring %v after its submission", ls, ttl)
	}
	time.Sleep(time.Until(ls[0].Expiry) + time.Millisecond)
	ls = listDL(t)
	if len(ls) != 1 || ls[0].CanFinish || ls[0].Redrive != "expired" {
		t.Fatalf("list = %+v; want one that cannot finish: expired", ls)
	}
	out, code := runDL(t, "redrive")
	if code != 0 || !strings.Contains(out, ": not sent: expired at") || !strings.Contains(out, "0 sent, 0 acknowledged, 1 left") {
		t.Errorf("redrive: exit %d, %q; want reported, not sent", code, out)
	}
	if ls := listDL(t); len(ls) != 1 {
		t.Errorf("after redrive: %d dead letters; want the expired one left", len(ls))
	}
	if ms, err := gw.async.Queue.Receive(t.Context(), 10, time.Second); err != nil || len(ms) != 0 {
		t.Errorf("continuation queue: %d messages, %v; want none sent", len(ms), err)
	}
}

// TestDeadLettersNamesEscaped: the name of a quarantined file is whatever
// was put there; list, show and redrive print it (and what embeds it, the
// letter's error) escaped, so that a terminal escape, a newline that would
// forge a row, a tab that would shift a column or a bidirectional override
// never reaches the terminal as itself. Before, list printed the name raw.
func TestDeadLettersNamesEscaped(t *testing.T) {
	dir := t.TempDir()
	if _, err := filestore.Open(dir); err != nil {
		t.Fatal(err)
	}
	names := []string{
		"\x1b[31mred\x1b[0m\x1b]0;title\x07.msg",
		"x\n0123456789abcdef0123456789abcdef  alice  1s  1  0  yes  send  -\t.msg",
		"over\u202eride.msg",
		"bad\xffutf8.msg",
	}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, "quarantine", n), []byte("not a continuation"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := func(k string) (string, bool) {
		if k == "AsyncStore" {
			return "file:" + dir, true
		}
		return "", false
	}
	for _, args := range [][]string{{"list"}, {"redrive", "--dry-run"}} {
		var out, errb bytes.Buffer
		deadLettersCmd(t.Context(), args, env, time.Now(), &out, &errb)
		got := out.String() + errb.String()
		if strings.ContainsAny(got, "\x1b\x07\t\u202e") || !utf8.ValidString(got) {
			t.Errorf("deadletters %s printed a control character, an override or invalid UTF-8:\n%q", strings.Join(args, " "), got)
		}
		// One line per letter, plus the header and the summary (list).
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		want := len(names) + 1
		if args[0] == "list" {
			want++
		}
		if len(lines) != want {
			t.Errorf("deadletters %s printed %d lines; want %d:\n%s", strings.Join(args, " "), len(lines), want, out.String())
		}
		if !strings.Contains(got, `\x1b[31mred`) {
			t.Errorf("deadletters %s: the name is not shown escaped:\n%s", strings.Join(args, " "), got)
		}
	}
}

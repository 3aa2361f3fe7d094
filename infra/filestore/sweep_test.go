package filestore

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"fngateway/core"
	"fngateway/core/async"
)

// okTransport answers every request 200 "ok".
type okTransport struct{}

func (okTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/plain"}},
		Body: io.NopCloser(strings.NewReader("ok"))}, nil
}

// sweepEnv is an async engine on the file store, so that what a request
// leaves behind is what the gateway really writes.
func sweepEnv(tb testing.TB) (*Store, *async.Async) {
	tb.Helper()
	s := mustOpen(tb, tb.TempDir())
	u, _ := url.Parse("http://backend.test")
	a := &async.Async{Store: s, Queue: s, Forwarder: &core.Forwarder{Transport: okTransport{}},
		Router: core.NewRouter(nil, core.Route{Hosts: core.HostList{u}}), TTL: time.Hour}
	return s, a
}

// submitDone submits a request that arrived at arrival with an
// Idempotency-Key and runs its continuation to the end.
func submitDone(tb testing.TB, s *Store, a *async.Async, arrival time.Time, key string) string {
	tb.Helper()
	ctx := context.Background()
	req := &core.Request{Method: "POST", Path: "/jobs", Header: http.Header{}, Body: []byte("body"),
		IdempotencyKey: key, ClientKey: true, Budget: core.Budget{Arrival: arrival}}
	acc, _, err := a.Submit(ctx, req, &core.Profile{UserID: "u1", Async: core.AsyncConfig{Enabled: true, ContainerName: "u1-results"}}, false)
	if err != nil {
		tb.Fatalf("Submit: %v", err)
	}
	for range 5 {
		msgs, err := s.Receive(ctx, 10, time.Minute)
		if err != nil {
			tb.Fatal(err)
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			if err := a.Process(ctx, m.Body); err != nil {
				tb.Fatalf("Process: %v", err)
			}
			s.Complete(ctx, m)
		}
	}
	return acc.ID
}

// files lists the regular files under the store's objects/, relative.
func files(tb testing.TB, s *Store) []string {
	tb.Helper()
	var out []string
	filepath.WalkDir(s.objects, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(s.objects, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	return out
}

func owned(all []string, id string) int {
	n := 0
	for _, f := range all {
		if strings.Contains(f, id) {
			n++
		}
	}
	return n
}

// TestSweep: a request is kept until its expiry plus the read grace, then
// its record, body, result blobs, directory and idempotency entry go; a
// request not expired is untouched.
func TestSweep(t *testing.T) {
	s, a := sweepEnv(t)
	ctx := context.Background()
	now := time.Now()
	oldID := submitDone(t, s, a, now.Add(-30*time.Minute), "old-key")
	newID := submitDone(t, s, a, now, "new-key")
	before := files(t, s)
	// record, body, data, headers.json; plus one index entry each.
	if owned(before, oldID) != 4 || owned(before, newID) != 4 || len(before) != 10 {
		t.Fatalf("files before the sweep: %v; want 4 per request and 2 index entries", before)
	}
	oldEnd := now.Add(-30 * time.Minute).Add(time.Hour + async.ReadGrace)
	if n, err := s.Sweep(ctx, oldEnd.Add(-time.Nanosecond), 100); err != nil || n != 0 {
		t.Fatalf("Sweep just before the grace ends = %d, %v; want nothing deleted", n, err)
	}
	n, err := s.Sweep(ctx, oldEnd, 100)
	if err != nil || n != 5 {
		t.Fatalf("Sweep at the grace's end = %d, %v; want 5 objects deleted", n, err)
	}
	after := files(t, s)
	if owned(after, oldID) != 0 || owned(after, newID) != 4 || len(after) != 5 {
		t.Errorf("files after the sweep: %v; want only the new request's 4 and its index entry", after)
	}
	if _, err := os.Stat(filepath.Join(s.objects, "u1-results", oldID)); !os.IsNotExist(err) {
		t.Errorf("the old request's result directory is left: %v", err)
	}
	for _, d := range []string{"gateway/records", "gateway/requests", "gateway/idempotency", "u1-results"} {
		if _, err := os.Stat(filepath.Join(s.objects, d)); err != nil {
			t.Errorf("shared directory %s removed: %v", d, err)
		}
	}
	// The key is free again: a new submission with it is a new request.
	if _, err := a.Status(ctx, oldID); err == nil {
		t.Errorf("Status of a swept request: no error")
	}
	if id := submitDone(t, s, a, now, "old-key"); id == oldID {
		t.Errorf("the swept key returned the swept request")
	}
}

// TestSweepBounded: each pass examines at most its batch and the next
// continues where it stopped, so every expired request goes in a bounded
// number of passes.
func TestSweepBounded(t *testing.T) {
	s, a := sweepEnv(t)
	ctx := context.Background()
	arrival := time.Now().Add(-2 * time.Hour)
	const n = 5
	for i := range n {
		submitDone(t, s, a, arrival, "key-"+string(rune('a'+i)))
	}
	now := time.Now()
	var perPass []int
	for range 10 {
		d, err := s.Sweep(ctx, now, 2)
		if err != nil {
			t.Fatal(err)
		}
		if d > 2*4 {
			t.Fatalf("one pass with batch 2 deleted %d objects; want at most 2 records' worth", d)
		}
		perPass = append(perPass, d)
		if len(files(t, s)) == 0 {
			break
		}
	}
	if left := files(t, s); len(left) != 0 {
		t.Fatalf("after %d passes (deleted %v) left: %v", len(perPass), perPass, left)
	}
	// 5 records then 5 entries, 2 examined a pass: 5 passes.
	if len(perPass) != n {
		t.Errorf("passes = %d (deleted %v); want %d", len(perPass), perPass, n)
	}
	if _, err := s.Sweep(ctx, now, 0); err == nil {
		t.Error("Sweep with batch 0: no error")
	}
}

// TestSweepKeepsCorrupt: a record that does not decode is kept for
// inspection.
func TestSweepKeepsCorrupt(t *testing.T) {
	s, _ := sweepEnv(t)
	ctx := context.Background()
	key := "gateway/records/0123456789abcdef0123456789abcdef.json"
	if _, err := s.Put(ctx, key, []byte("{not json"), ""); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Sweep(ctx, time.Now().Add(1000*time.Hour), 10); err != nil || n != 0 {
		t.Fatalf("Sweep = %d, %v; want nothing deleted", n, err)
	}
	if _, _, err := s.Get(ctx, key); err != nil {
		t.Errorf("corrupt record gone: %v", err)
	}
}

// TestSweepPastUnreadable: a record file the store cannot read (no record
// header: random bytes) does not end the pass: the expired requests after
// it are deleted in the same pass, and it is kept for inspection. Before,
// the pass stopped at it with an error, and the expired requests after it
// survived.
func TestSweepPastUnreadable(t *testing.T) {
	s, a := sweepEnv(t)
	ctx := context.Background()
	arrival := time.Now().Add(-2 * time.Hour)
	ids := []string{submitDone(t, s, a, arrival, "key-a"), submitDone(t, s, a, arrival, "key-b")}
	// Named to come first in the directory.
	bad := filepath.Join(s.objects, "gateway", "records", "00000000000000000000000000000000.json")
	if err := os.WriteFile(bad, []byte("\x8f\x00garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := s.Sweep(ctx, time.Now(), 100)
	if err != nil || n != 2*5 {
		t.Errorf("Sweep = %d, %v; want both requests' 10 objects deleted, no error", n, err)
	}
	left := files(t, s)
	for _, id := range ids {
		if owned(left, id) != 0 {
			t.Errorf("request %s left after the sweep: %v", id, left)
		}
	}
	if len(left) != 1 || !strings.HasSuffix(left[0], "00000000000000000000000000000000.json") {
		t.Errorf("files after the sweep: %v; want only the unreadable record", left)
	}
}

// TestDirectoryAsRecord: a directory where a record or blob should be is
// corrupt (async.ErrCorruptRecord), as a symlink or any other file that is
// not regular: the status URI answers 500 CorruptRecord. Before, it was
// ErrNotFound, and the status URI answered 404 for a request that exists.
func TestDirectoryAsRecord(t *testing.T) {
	s, a := sweepEnv(t)
	ctx := context.Background()
	id := submitDone(t, s, a, time.Now(), "k")
	key := "gateway/records/" + id + ".json"
	if err := os.Remove(s.path(key)); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(s.path(key), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, key); !errors.Is(err, async.ErrCorruptRecord) {
		t.Errorf("Get = %v; want async.ErrCorruptRecord", err)
	}
	_, err := a.Status(ctx, id)
	var ge *core.Error
	if !errors.As(err, &ge) || ge.Reason != core.ReasonCorruptRecord || ge.HTTPStatus() != 500 {
		t.Errorf("Status = %v; want 500 CorruptRecord", err)
	}
	blob := "u1-results/" + id + "/data"
	if err := os.Remove(s.path(blob)); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(s.path(blob), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := s.OpenBlob(ctx, blob); !errors.Is(err, async.ErrCorruptRecord) {
		t.Errorf("OpenBlob = %v; want async.ErrCorruptRecord", err)
	}
}

// TestRunSweeper: the periodic sweep of the local host deletes an expired
// request at its first pass after the grace, not before.
func TestRunSweeper(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		s := mustOpen(t, dir)
		_, a := sweepEnv(t)
		a.Store, a.Queue = s, s
		// Expired 4 minutes ago: the grace ends in 1 minute.
		id := submitDone(t, s, a, time.Now().Add(-time.Hour-4*time.Minute), "k")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go s.RunSweeper(ctx, 30*time.Second, 10, func(err error) { t.Errorf("sweep: %v", err) })
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if owned(files(t, s), id) != 4 {
			t.Fatalf("the first pass, within the grace, deleted %v", files(t, s))
		}
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if left := files(t, s); len(left) != 0 {
			t.Errorf("after the pass at the grace's end: %v; want nothing", left)
		}
	})
}

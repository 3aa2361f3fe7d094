package tests

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fngateway/core/async"
)

// Items 4-6 of the async robustness work, end to end on the local host:
// Idempotency-Keys scoped to the caller, fairness between profiles, and an
// embedded store whose files are damaged while the gateway runs.

// pollFinished polls a status URI until it answers anything but 202 (the
// request finished: a 303 to the result, or the result itself), and
// returns that answer and when it came.
func pollFinished(tb testing.TB, statusURI string, within time.Duration) (*http.Response, []byte, time.Time) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for {
		resp, body, _ := Do(tb, "GET", statusURI, nil, "")
		if resp.StatusCode != http.StatusAccepted {
			return resp, body, time.Now()
		}
		if time.Now().After(deadline) {
			tb.Fatalf("status URI still pending after %v: %s", within, body)
		}
		time.Sleep(20 * time.Millisecond) // polling, as a client would
	}
}

// TestAsyncIdempotencyCallers: the same Idempotency-Key and request from
// another caller (another Authorization) is another request: a new id and
// a backend call of its own. The same caller is answered from the index,
// and on the local host X-MS-CLIENT-PRINCIPAL-ID is only a header, never a
// verified identity. Before, the second caller got the first caller's id,
// and with it the first caller's result, with no backend call.
func TestAsyncIdempotencyCallers(t *testing.T) {
	t.Parallel()
	// The backend answers seconds after the 300 ms trigger: each new
	// request is handed off (202) however loaded the machine.
	const delay = 3 * time.Second
	be := newSlowBackend(t, delay)
	gw := StartGateway(t, asyncEnv(be.URL, t.TempDir()))
	const key = "key-shared-by-two-callers"
	submit := func(hdr map[string]string) acceptedDoc {
		hdr["Idempotency-Key"] = key
		_, acc, _ := submitAsync(t, gw.URL, "/reports/callers", hdr)
		return acc
	}
	alice := submit(map[string]string{"Authorization": "Bearer alice-token"})
	bob := submit(map[string]string{"Authorization": "Bearer bob-token"})
	if bob.ID == alice.ID {
		t.Fatalf("another Authorization with the same key got the first caller's id %s", alice.ID)
	}
	if again := submit(map[string]string{"Authorization": "Bearer alice-token"}); again.ID != alice.ID {
		t.Errorf("the same caller again got id %s; want the first submission's %s", again.ID, alice.ID)
	}
	if forged := submit(map[string]string{"Authorization": "Bearer alice-token", "X-MS-CLIENT-PRINCIPAL-ID": "mallory"}); forged.ID != alice.ID {
		t.Errorf("X-MS-CLIENT-PRINCIPAL-ID changed the scope on the local host (id %s, want %s): it is not a verified identity here", forged.ID, alice.ID)
	}
	for _, acc := range []acceptedDoc{alice, bob} {
		if resp, body, _ := pollFinished(t, acc.StatusURI, delay+loadMargin); resp.StatusCode >= 400 {
			t.Errorf("%s finished with %d %s", acc.ID, resp.StatusCode, body)
		}
	}
	be.mu.Lock()
	calls := be.calls[key]
	be.mu.Unlock()
	if calls != 2 {
		t.Errorf("backend calls with the shared key = %d; want 2, one per caller", calls)
	}
}

// TestAsyncFairnessBetweenProfiles: one profile's 20 hand-offs to a
// hanging backend hold only its share of MaxContinuations (half, rounded
// up); another profile's request, handed off after them, finishes as soon
// as its backend answers. Before, the first profile held every slot and
// the second's request waited behind them for up to AsyncTimeout.
func TestAsyncFairnessBetweenProfiles(t *testing.T) {
	t.Parallel()
	const trigger, answer = 300 * time.Millisecond, 3 * time.Second // the answer seconds after the trigger
	var hanging atomic.Int64
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read whole, so that the server notices a closed connection
		// (r.Context() ends) when the gateway cancels the attempt.
		io.ReadAll(r.Body)
		if r.URL.Path == "/short" {
			select {
			case <-time.After(answer):
				w.Write([]byte("short done"))
			case <-r.Context().Done():
			}
			return
		}
		hanging.Add(1)
		defer hanging.Add(-1)
		<-r.Context().Done() // until the gateway gives up
	}))
	t.Cleanup(be.Close)
	env := asyncEnv(be.URL, t.TempDir())
	env["AsyncTriggerTimeout"] = fmt.Sprint(trigger.Milliseconds())
	env["MaxContinuations"] = "4" // MaxContinuationsPerProfile: 2
	env["UserProfiles"] = `[{"userId":"heavy","async-config":{"enabled":true}},{"userId":"light","async-config":{"enabled":true}}]`
	gw := StartGateway(t, env)

	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			resp, body, _ := Do(t, "POST", gw.URL+"/hang", map[string]string{
				"S7PAsyncMode": "true", "X-UserProfile": "heavy", "Idempotency-Key": fmt.Sprint("heavy-", i)}, "x")
			if resp.StatusCode != http.StatusAccepted {
				t.Errorf("heavy submission %d: %d %s; want 202", i, resp.StatusCode, body)
			}
		})
	}
	wg.Wait()
	// Each attempt ran until its 202; those handed to the queue were
	// cancelled then, and only the profile's share goes on in-process.
	deadline := time.Now().Add(loadMargin)
	for hanging.Load() > 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d heavy attempts still open %v after the 202s; want the profile's share, 2", hanging.Load(), loadMargin)
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
	start := time.Now()
	resp, body, _ := Do(t, "POST", gw.URL+"/short", map[string]string{"S7PAsyncMode": "true", "X-UserProfile": "light"}, "y")
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("light submission: %d %s; want 202", resp.StatusCode, body)
	}
	var acc acceptedDoc
	if err := json.Unmarshal(body, &acc); err != nil {
		t.Fatal(err)
	}
	// It ends when its backend answers (the trigger plus the rest of the
	// answer's delay), plus polling and a loaded machine's slack; waiting
	// behind the other profile would take AsyncTimeout (30 minutes).
	want := answer + loadMargin
	fin, fbody, at := pollFinished(t, acc.StatusURI, want+5*time.Second)
	if took := at.Sub(start); took > want {
		t.Errorf("the light profile's request finished %v after its submission; want within %v", took, want)
	}
	if fin.StatusCode >= 400 {
		t.Errorf("the light profile's request finished with %d %s", fin.StatusCode, fbody)
	}
	if got := hanging.Load(); got != 2 {
		t.Errorf("heavy attempts open after the light request finished = %d; want the profile's share, 2", got)
	}
}

// damage replaces the file at path as kind says: random bytes, emptied, or
// a symlink to a valid file elsewhere (never to be followed).
func damage(tb testing.TB, path, kind string) {
	tb.Helper()
	switch kind {
	case "random bytes":
		b := make([]byte, 200)
		rand.Read(b)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			tb.Fatal(err)
		}
	case "emptied":
		if err := os.Truncate(path, 0); err != nil {
			tb.Fatal(err)
		}
	case "symlink":
		b, err := os.ReadFile(path)
		if err != nil {
			tb.Fatal(err)
		}
		target := filepath.Join(tb.TempDir(), "target")
		if err := os.WriteFile(target, b, 0o600); err != nil {
			tb.Fatal(err)
		}
		if err := os.Remove(path); err != nil {
			tb.Fatal(err)
		}
		if err := os.Symlink(target, path); err != nil {
			tb.Fatal(err)
		}
	default:
		tb.Fatalf("no damage %q", kind)
	}
}

func queueFiles(tb testing.TB, dir string) map[string]bool {
	tb.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "queue", "*.msg"))
	if err != nil {
		tb.Fatal(err)
	}
	m := map[string]bool{}
	for _, n := range names {
		m[filepath.Base(n)] = true
	}
	return m
}

// TestAsyncCorruptQueueFileWhileRunning: a queue message file damaged while
// the gateway runs is set aside (quarantine/) the first time the worker
// meets it, logged once, and the message behind it runs. With one
// continuation slot the worker receives one message at a time, so before,
// the damaged file, put back first each time, was retried about ten times
// a second and the request behind it never ran.
func TestAsyncCorruptQueueFileWhileRunning(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"random bytes", "emptied", "symlink"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			// A holds its slot until B's file is damaged; B is never
			// released (it must never run).
			var held releases
			be := newHeldBackend(t, 0, held.hold)
			dir := t.TempDir()
			env := asyncEnv(be.URL, dir)
			env["MaxContinuations"] = "1"
			gw := StartGateway(t, env)
			// A runs in-process and holds the only slot; B and C wait on
			// the queue behind it.
			_, a, _ := submitAsync(t, gw.URL, "/reports/a", nil)
			before := queueFiles(t, dir)
			_, b, _ := submitAsync(t, gw.URL, "/reports/b", nil)
			var bFile string
			for n := range queueFiles(t, dir) {
				if !before[n] {
					bFile = n
				}
			}
			if bFile == "" {
				t.Fatal("B's message is not in queue/")
			}
			_, c, _ := submitAsync(t, gw.URL, "/reports/c", nil)
			damage(t, filepath.Join(dir, "queue", bFile), kind)
			held.release("/reports/a")
			held.release("/reports/c")

			// C runs once A has given its slot back.
			for _, acc := range []acceptedDoc{a, c} {
				if resp, body, _ := pollFinished(t, acc.StatusURI, 15*time.Second); resp.StatusCode >= 400 {
					t.Errorf("%s finished with %d %s", acc.ID, resp.StatusCode, body)
				}
			}
			if _, err := os.Lstat(filepath.Join(dir, "quarantine", bFile)); err != nil {
				t.Errorf("B's damaged message file is not in quarantine/: %v", err)
			}
			mentions := 0
			for _, l := range gw.logs.Lines() {
				if strings.Contains(l, strings.TrimSuffix(bFile, ".msg")) {
					mentions++
				}
			}
			if mentions != 1 {
				t.Errorf("B's damaged message file logged %d times; want once:\n%s", mentions, strings.Join(gw.logs.Lines(), "\n"))
			}
			// B's message is set aside, not run: its request stays pending
			// (until it expires) rather than blocking the queue.
			if resp, body, _ := Do(t, "GET", b.StatusURI, nil, ""); resp.StatusCode != http.StatusAccepted {
				t.Errorf("B's status URI = %d %s; want 202, still queued", resp.StatusCode, body)
			}
		})
	}
}

// TestAsyncCorruptRecordWhileRunning: a record file damaged while its
// request runs (random bytes, emptied, made a symlink): its status URI
// answers 500 CorruptRecord (JSON error) at once, its message is settled
// when it comes back instead of every lease (15 s) forever, the worker logs
// it once, and a symlink is never followed. Before, the store's own
// "malformed record" error was unknown to core: 503 forever.
func TestAsyncCorruptRecordWhileRunning(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"random bytes", "emptied", "symlink"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			// The backend answers once the record is damaged and read.
			var held releases
			be := newHeldBackend(t, 0, held.hold)
			dir := t.TempDir()
			gw := StartGateway(t, asyncEnv(be.URL, dir))
			_, acc, _ := submitAsync(t, gw.URL, "/reports/corrupt", nil)
			damage(t, filepath.Join(dir, "objects", "gateway", "records", acc.ID+".json"), kind)

			for range 2 {
				resp, body, _ := Do(t, "GET", acc.StatusURI, nil, "")
				if resp.StatusCode != http.StatusInternalServerError {
					t.Fatalf("status URI = %d %s; want 500 CorruptRecord", resp.StatusCode, body)
				}
				if d := decodeError(t, resp, body); d.Error.Code != "CorruptRecord" {
					t.Errorf("code = %q; want CorruptRecord", d.Error.Code)
				}
			}
			held.release("/reports/corrupt")
			// The in-process finish cannot commit; the message delayed to
			// its lease's end (15 s) then finds the record corrupt, is
			// settled and logged once.
			gw.WaitLog(t, async.DefaultLease+loadMargin, func(m map[string]any) bool {
				e, _ := m["err"].(string)
				return strings.Contains(e, acc.ID) && strings.Contains(e, "cannot be decoded")
			})
			deadline := time.Now().Add(loadMargin)
			for len(queueFiles(t, dir)) > 0 {
				if time.Now().After(deadline) {
					t.Fatalf("the message is still queued %v after it was settled: %v", loadMargin, queueFiles(t, dir))
				}
				time.Sleep(20 * time.Millisecond) // polling with a deadline
			}
			n := 0
			for _, l := range gw.logs.Lines() {
				if strings.Contains(l, acc.ID) && strings.Contains(l, "cannot be decoded") {
					n++
				}
			}
			if n != 1 {
				t.Errorf("the corrupt record was logged %d times by the worker; want once", n)
			}
			if kind == "symlink" {
				if fi, err := os.Lstat(filepath.Join(dir, "objects", "gateway", "records", acc.ID+".json")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
					t.Errorf("the symlink was replaced or followed by a write: %v", err)
				}
			}
		})
	}
}

// Package porttest checks implementations of core/async's ports, as
// testing/fstest checks an fs.FS: one conformance suite per port states once
// the semantics the async engine relies on, and every implementation (the
// in-memory fakes of core/async's tests, infra/filestore, infra/azure, and any
// other) runs it.
//
// The suites use real time: queue delays and visibility timeouts are a few
// seconds, waited for by polling with deadlines, so that they hold for
// emulators and cloud services as much as for in-process implementations.
// A check that a message stays hidden is made only while its visibility
// surely lasts, measured from the calls' own times; if the machine is so
// loaded that the calls outlast it, the check is made again with a longer
// visibility.
// Subtests run in parallel and each works in its own container (Store) or
// its own queue (a fresh one from open), so one backing service can serve
// the whole suite.
package porttest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"fngateway/core/async"
)

// opTimeout bounds every call the suites make, so that a hung service
// fails the test instead of hanging it.
const opTimeout = 30 * time.Second

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
	t.Cleanup(cancel)
	return ctx
}

// container returns a container name no other subtest uses: valid for
// Azure (3-63 lowercase letters, digits, single hyphens), S3 prefixes and
// directories alike.
func container() string {
	var b [6]byte
	rand.Read(b[:])
	return "pt-" + hex.EncodeToString(b[:])
}

// TestStore checks that the Store open returns has the semantics core
// relies on: ErrNotFound for missing objects, Put that creates only once
// and updates only at the version read (ErrConflict otherwise, exactly one
// winner among racing writers), WriteBlob that creates once and streams
// whole-or-nothing, blobs read back byte for byte, and SignURL returning a
// URL. open is called once per subtest; it may return the same Store each
// time.
func TestStore(t *testing.T, open func(t *testing.T) async.Store) {
	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		s, ctx, c := open(t), testContext(t), container()
		if _, err := s.Put(ctx, c+"/present.json", []byte(`{}`), ""); err != nil {
			t.Fatalf("Put: %v", err)
		}
		for _, key := range []string{container() + "/in-a-missing-container.json", c + "/absent.json", c + "/records/absent.json"} {
			if _, _, err := s.Get(ctx, key); !errors.Is(err, async.ErrNotFound) {
				t.Errorf("Get(%q) error = %v; want ErrNotFound", key, err)
			}
			if _, err := s.OpenBlob(ctx, key); !errors.Is(err, async.ErrNotFound) {
				t.Errorf("OpenBlob(%q) error = %v; want ErrNotFound", key, err)
			}
		}
	})

	t.Run("PutCreateOnce", func(t *testing.T) {
		t.Parallel()
		s, ctx := open(t), testContext(t)
		key := container() + "/records/a.json" // the container is made on demand
		v1, err := s.Put(ctx, key, []byte(`{"n":1}`), "")
		if err != nil || v1 == "" {
			t.Fatalf("create = %q, %v; want a version", v1, err)
		}
		if _, err := s.Put(ctx, key, []byte(`{"n":9}`), ""); !errors.Is(err, async.ErrConflict) {
			t.Fatalf("create again: error = %v; want ErrConflict", err)
		}
		data, v, err := s.Get(ctx, key)
		if err != nil || string(data) != `{"n":1}` || v != v1 {
			t.Fatalf("Get = %q at %q, %v; want the first write %q at %q", data, v, err, `{"n":1}`, v1)
		}
	})

	t.Run("PutIfMatch", func(t *testing.T) {
		t.Parallel()
		s, ctx := open(t), testContext(t)
		key := container() + "/record.json"
		v1, err := s.Put(ctx, key, []byte(`{"n":1}`), "")
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		v2, err := s.Put(ctx, key, []byte(`{"n":2}`), v1)
		if err != nil || v2 == "" || v2 == v1 {
			t.Fatalf("update at %q = %q, %v; want a new version", v1, v2, err)
		}
		for name, tc := range map[string]struct{ key, version string }{
			"stale version":                  {key, v1},
			"version of another object":      {key, "0x8DEADBEEF0000000"},
			"version on a missing object":    {key + ".missing", v2},
			"version in a missing container": {container() + "/x.json", v2},
		} {
			if _, err := s.Put(ctx, tc.key, []byte(`{"n":9}`), tc.version); !errors.Is(err, async.ErrConflict) {
				t.Errorf("%s: Put error = %v; want ErrConflict", name, err)
			}
		}
		data, v, err := s.Get(ctx, key)
		if err != nil || string(data) != `{"n":2}` || v != v2 {
			t.Fatalf("Get = %q at %q, %v; want %q at %q", data, v, err, `{"n":2}`, v2)
		}
	})

	t.Run("PutRace", func(t *testing.T) {
		t.Parallel()
		s, ctx, c := open(t), testContext(t), container()
		base, err := s.Put(ctx, c+"/update.json", []byte("base"), "")
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		for _, tc := range []struct{ name, key, version string }{
			{"update", c + "/update.json", base},
			{"create", c + "/create.json", ""},
		} {
			const writers = 16
			var wg sync.WaitGroup
			errs := make([]error, writers)
			versions := make([]string, writers)
			for i := range writers {
				wg.Go(func() {
					versions[i], errs[i] = s.Put(ctx, tc.key, fmt.Appendf(nil, "writer %d", i), tc.version)
				})
			}
			wg.Wait()
			winner := -1
			for i, err := range errs {
				switch {
				case err == nil && winner >= 0:
					t.Fatalf("%s: writers %d and %d both won", tc.name, winner, i)
				case err == nil:
					winner = i
				case !errors.Is(err, async.ErrConflict):
					t.Fatalf("%s: writer %d: error = %v; want nil or ErrConflict", tc.name, i, err)
				}
			}
			if winner < 0 {
				t.Fatalf("%s: no writer won", tc.name)
			}
			data, v, err := s.Get(ctx, tc.key)
			if want := fmt.Sprintf("writer %d", winner); err != nil || string(data) != want || v != versions[winner] {
				t.Fatalf("%s: Get = %q at %q, %v; want the winner's %q at %q", tc.name, data, v, err, want, versions[winner])
			}
		}
	})

	t.Run("ReadDuringWrite", func(t *testing.T) {
		t.Parallel()
		testReadDuringWrite(t, open(t))
	})

	t.Run("WriteBlobCreateOnce", func(t *testing.T) {
		t.Parallel()
		s, ctx := open(t), testContext(t)
		key := container() + "/req/data"
		steps := []struct {
			name   string
			body   string
			create bool
			want   error
			stored string
		}{
			{"create", "first", true, nil, "first"},
			{"create again", "second", true, async.ErrConflict, "first"},
			{"replace", "third", false, nil, "third"},
			{"create after replace", "fourth", true, async.ErrConflict, "third"},
		}
		for _, st := range steps {
			err := s.WriteBlob(ctx, key, strings.NewReader(st.body), "text/plain", st.create)
			if !errors.Is(err, st.want) || st.want == nil && err != nil {
				t.Fatalf("%s: WriteBlob error = %v; want %v", st.name, err, st.want)
			}
			if got := readAll(t, s, key); got != st.stored {
				t.Fatalf("%s: blob = %q; want %q", st.name, got, st.stored)
			}
		}
		// Racing creators: exactly one wins.
		raced := key + "-race"
		errs := make(chan error, 8)
		for i := range cap(errs) {
			go func() {
				errs <- s.WriteBlob(ctx, raced, strings.NewReader(strings.Repeat("x", i+1)), "text/plain", true)
			}()
		}
		won := 0
		for range cap(errs) {
			switch err := <-errs; {
			case err == nil:
				won++
			case !errors.Is(err, async.ErrConflict):
				t.Errorf("racing create: %v; want ErrConflict", err)
			}
		}
		if won != 1 {
			t.Errorf("%d racing creators won; want 1", won)
		}
	})

	t.Run("BlobStream", func(t *testing.T) {
		t.Parallel()
		s, ctx := open(t), testContext(t)
		key := container() + "/req/data"
		const size = 8<<20 + 123 // several blocks, not a multiple of any
		// A plain io.Reader (no Len, no Seek): the store must stream it.
		if err := s.WriteBlob(ctx, key, onlyReader{generated(1, size)}, "application/octet-stream", true); err != nil {
			t.Fatalf("WriteBlob: %v", err)
		}
		want, _ := digest(t, generated(1, size))
		rc, err := s.OpenBlob(ctx, key)
		if err != nil {
			t.Fatalf("OpenBlob: %v", err)
		}
		got, n := digest(t, rc)
		rc.Close()
		if n != size || got != want {
			t.Fatalf("read back %d bytes (sha256 %x…); want %d bytes (sha256 %x…)", n, got[:6], size, want[:6])
		}
	})

	t.Run("WriteBlobWholeOrNothing", func(t *testing.T) {
		t.Parallel()
		s, ctx, c := open(t), testContext(t), container()
		broken := errors.New("client went away")
		// A new blob whose body breaks half-way does not appear.
		if err := s.WriteBlob(ctx, c+"/new/data", io.MultiReader(generated(2, 1<<20), failing{broken}), "", true); err == nil {
			t.Fatal("WriteBlob of a broken body: no error")
		}
		if _, err := s.OpenBlob(ctx, c+"/new/data"); !errors.Is(err, async.ErrNotFound) {
			t.Errorf("after a broken create, OpenBlob error = %v; want ErrNotFound", err)
		}
		// A replacement whose body breaks leaves the old blob whole.
		if err := s.WriteBlob(ctx, c+"/old/data", strings.NewReader("old"), "text/plain", true); err != nil {
			t.Fatal(err)
		}
		if err := s.WriteBlob(ctx, c+"/old/data", io.MultiReader(generated(3, 1<<20), failing{broken}), "", false); err == nil {
			t.Fatal("WriteBlob replacing with a broken body: no error")
		}
		if got := readAll(t, s, c+"/old/data"); got != "old" {
			t.Errorf("after a broken replace the blob is %d bytes; want the old %q", len(got), "old")
		}
	})

	t.Run("SignURL", func(t *testing.T) {
		t.Parallel()
		s, ctx := open(t), testContext(t)
		key := container() + "/req/data"
		if err := s.WriteBlob(ctx, key, strings.NewReader("signed"), "text/plain", true); err != nil {
			t.Fatal(err)
		}
		// The blob need not exist yet: the 202 carries URLs of results to come.
		for _, k := range []string{key, key + "-later"} {
			u, err := s.SignURL(ctx, k, time.Now().Add(time.Hour))
			if err != nil {
				t.Fatalf("SignURL(%q): %v", k, err)
			}
			p, err := url.Parse(u)
			if err != nil || (!p.IsAbs() && !strings.HasPrefix(u, "/")) || p.RawQuery == "" {
				t.Errorf("SignURL(%q) = %q; want an absolute URL or a gateway path, with its signature in the query", k, u)
			}
		}
	})
}

// readDuringWriteRounds is how many times testReadDuringWrite replaces the
// record and the blob while readers read them.
const readDuringWriteRounds = 100

// testReadDuringWrite replaces a record (conditional Puts) and a blob
// (WriteBlob) over and over while readers keep reading them: every read
// must succeed and return one whole write, and a record's version must be
// one a write got, never a later write's than the data's: a read-modify-write
// of older data at a newer version would succeed and lose the newer write.
// (The version of an earlier write is harmless, the write back is refused as
// a conflict; versitygw sometimes returns a new body with the previous ETag.)
// A status URI read while a worker renews its lease or a cancel is written
// is such a read; an error there is answered as CorruptRecord (the file
// store once reported a record renamed into place between its checks as
// "replaced while it was opened").
//
// It makes hundreds of calls: each has opTimeout of its own, as a loaded
// machine may take longer than that for all of them.
func testReadDuringWrite(t *testing.T, s async.Store) {
	op := func() context.Context {
		ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
		t.Cleanup(cancel)
		return ctx
	}
	c := container()
	recKey, blobKey := c+"/records/busy.json", c+"/busy/data"
	// Long enough that a torn read could not pass for a whole one.
	pad := strings.Repeat("x", 4<<10)
	body := func(i int) []byte { return fmt.Appendf(nil, "write %d %s", i, pad) }
	// whole returns the write that data is, or -1.
	whole := func(data []byte) int {
		var i int
		if _, err := fmt.Sscanf(string(data), "write %d ", &i); err != nil || !bytes.Equal(data, body(i)) {
			return -1
		}
		return i
	}
	version, err := s.Put(op(), recKey, body(0), "")
	if err != nil {
		t.Fatalf("create record: %v", err)
	}
	if err := s.WriteBlob(op(), blobKey, bytes.NewReader(body(0)), "text/plain", true); err != nil {
		t.Fatalf("create blob: %v", err)
	}

	written := map[string]int{version: 0} // record version -> write
	type read struct {
		version string
		write   int
	}
	done := make(chan struct{})
	const readers = 4 // even: records, odd: blobs
	var wg sync.WaitGroup
	reads := make([][]read, readers)
	errs := make([]error, readers)
	for r := range readers {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				var data []byte
				var v string
				var err error
				if r%2 == 0 {
					data, v, err = s.Get(op(), recKey)
				} else {
					var rc io.ReadCloser
					if rc, err = s.OpenBlob(op(), blobKey); err == nil {
						data, err = io.ReadAll(rc)
						rc.Close()
					}
				}
				if err != nil {
					errs[r] = fmt.Errorf("read while it is rewritten: %w", err)
					return
				}
				reads[r] = append(reads[r], read{v, whole(data)})
			}
		})
	}
	func() {
		defer close(done)
		for i := 1; i <= readDuringWriteRounds; i++ {
			if version, err = s.Put(op(), recKey, body(i), version); err != nil {
				t.Errorf("update %d: %v", i, err)
				return
			}
			written[version] = i
			if err := s.WriteBlob(op(), blobKey, bytes.NewReader(body(i)), "text/plain", false); err != nil {
				t.Errorf("replace blob %d: %v", i, err)
				return
			}
		}
	}()
	wg.Wait()
	n := 0
	for r := range readers {
		if errs[r] != nil {
			t.Errorf("reader %d, after %d reads: %v", r, len(reads[r]), errs[r])
		}
		for _, rd := range reads[r] {
			n++
			if of, ok := written[rd.version]; rd.write < 0 || r%2 == 0 && (!ok || of > rd.write) {
				t.Fatalf("reader %d read write %d at version %q (-1: not a whole write); want a whole write, the record at its own version or an earlier one", r, rd.write, rd.version)
			}
		}
	}
	t.Logf("%d reads during %d writes", n, readDuringWriteRounds)
}

// TestQueue checks that the Queue open returns has the semantics core
// relies on: at-least-once delivery of every message enqueued, a received
// message hidden for its visibility timeout and then delivered again with
// the same ID and a growing DequeueCount, Complete deleting it for good,
// and a delayed message hidden until its delay has passed; for a queue that
// is a async.VisibilityExtender, Extend too. open is called once per subtest
// (and once to look for optional capabilities) and must return an empty
// queue of its own.
func TestQueue(t *testing.T, open func(t *testing.T) async.Queue) {
	t.Run("EnqueueReceiveComplete", func(t *testing.T) {
		t.Parallel()
		q, ctx := open(t), testContext(t)
		if msgs, err := q.Receive(ctx, 5, time.Minute); err != nil || len(msgs) != 0 {
			t.Fatalf("Receive on an empty queue = %d messages, %v; want none, no error", len(msgs), err)
		}
		body := []byte(`{"v":1,"id":"0123456789abcdef0123456789abcdef"}`)
		if err := q.Enqueue(ctx, body, 0); err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		m := receive(t, q, 1, time.Minute, 10*time.Second)[0]
		if !bytes.Equal(m.Body, body) || m.DequeueCount != 1 || m.ID == "" || m.Receipt == "" {
			t.Fatalf("received %+v; want body %q, DequeueCount 1, an ID and a Receipt", m, body)
		}
		if err := q.Complete(ctx, m); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		none(t, q)
	})

	t.Run("AtLeastOnce", func(t *testing.T) {
		t.Parallel()
		q, ctx := open(t), testContext(t)
		const n = 12
		want := map[string]bool{}
		for i := range n {
			b := fmt.Sprintf(`{"n":%d}`, i)
			want[b] = true
			if err := q.Enqueue(ctx, []byte(b), 0); err != nil {
				t.Fatalf("Enqueue %d: %v", i, err)
			}
		}
		got := map[string]bool{}
		deadline := time.Now().Add(20 * time.Second)
		for len(got) < n && time.Now().Before(deadline) {
			msgs, err := q.Receive(ctx, 5, time.Minute)
			if err != nil {
				t.Fatalf("Receive: %v", err)
			}
			if len(msgs) > 5 {
				t.Fatalf("Receive(5) returned %d messages", len(msgs))
			}
			for _, m := range msgs {
				got[string(m.Body)] = true
				if err := q.Complete(ctx, m); err != nil {
					t.Fatalf("Complete: %v", err)
				}
			}
			if len(msgs) == 0 {
				time.Sleep(50 * time.Millisecond) // polling with a deadline
			}
		}
		for b := range want {
			if !got[b] {
				t.Errorf("message %s never delivered", b)
			}
		}
	})

	t.Run("VisibilityHidesThenRedelivers", func(t *testing.T) {
		t.Parallel()
		hiddenCheck(t, func(t *testing.T, vis time.Duration) bool {
			q, ctx := open(t), testContext(t)
			if err := q.Enqueue(ctx, []byte(`{"again":true}`), 0); err != nil {
				t.Fatalf("Enqueue: %v", err)
			}
			// The message is hidden from the moment the queue hands it
			// out, which is after sent: until sent+vis at least.
			first, sent := receiveOnce(t, q, vis, 10*time.Second)
			msgs, err := q.Receive(ctx, 5, vis)
			if err != nil {
				t.Fatalf("Receive: %v", err)
			}
			if time.Since(sent) >= vis {
				return false // the check ended after the visibility could have: it proves nothing
			}
			if len(msgs) != 0 {
				t.Fatalf("Receive right after a delivery = %d messages; want none (hidden for %v)", len(msgs), vis)
			}
			second := receive(t, q, 1, vis, vis+10*time.Second)[0]
			if early := time.Until(sent.Add(vis)); early > 100*time.Millisecond {
				t.Errorf("redelivered %v before its visibility timeout ended", early)
			}
			if second.ID != first.ID || second.DequeueCount != first.DequeueCount+1 || string(second.Body) != `{"again":true}` {
				t.Fatalf("redelivered %+v; want ID %s, DequeueCount %d, the same body", second, first.ID, first.DequeueCount+1)
			}
			// Complete deletes it for good: it does not come back once the
			// visibility timeout has passed again (a longer wait, on a
			// loaded machine, only makes this check stronger).
			if err := q.Complete(ctx, second); err != nil {
				t.Fatalf("Complete: %v", err)
			}
			time.Sleep(vis + 500*time.Millisecond) // asserting an absence: past the visibility it would have had
			none(t, q)
			return true
		})
	})

	// Optional: queues that let a worker renew a message's visibility.
	if _, ok := open(t).(async.VisibilityExtender); ok {
		t.Run("Extend", func(t *testing.T) {
			t.Parallel()
			testExtend(t, open)
		})
	}

	t.Run("Delay", func(t *testing.T) {
		t.Parallel()
		hiddenCheck(t, func(t *testing.T, delay time.Duration) bool {
			q, ctx := open(t), testContext(t)
			start := time.Now()
			if err := q.Enqueue(ctx, []byte(`{"later":true}`), delay); err != nil {
				t.Fatalf("Enqueue: %v", err)
			}
			if err := q.Enqueue(ctx, []byte(`{"now":true}`), 0); err != nil {
				t.Fatalf("Enqueue: %v", err)
			}
			m := receive(t, q, 1, time.Minute, 10*time.Second)[0]
			if time.Since(start) >= delay {
				return false // the delayed message may be visible already: the check proves nothing
			}
			if string(m.Body) != `{"now":true}` {
				t.Fatalf("first received %q; want the undelayed message (the other is delayed %v)", m.Body, delay)
			}
			m = receive(t, q, 1, time.Minute, delay+10*time.Second)[0]
			if waited := time.Since(start); string(m.Body) != `{"later":true}` || waited < delay {
				t.Fatalf("received %q after %v; want the delayed message, after at least %v", m.Body, waited, delay)
			}
			return true
		})
	})
}

// testExtend checks a queue's optional async.VisibilityExtender: Extend
// keeps a received message hidden past its first visibility, Extend with
// zero shows it again at once, and a worker whose message was received
// again since can no longer extend it.
func testExtend(t *testing.T, open func(t *testing.T) async.Queue) {
	hiddenCheck(t, func(t *testing.T, vis time.Duration) bool {
		q, ctx := open(t), testContext(t)
		ve := q.(async.VisibilityExtender)
		if err := q.Enqueue(ctx, []byte(`{"extend":true}`), 0); err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		// Received for vis, extended to 3 vis: checked once the first
		// visibility has surely ended (vis after the receive returned,
		// and a quarter more for a queue's clock) and while the extended
		// one surely lasts (3 vis after the Extend was sent).
		first, _ := receiveOnce(t, q, vis, 10*time.Second)
		firstEnd := time.Now().Add(vis + vis/4)
		extended := time.Now()
		m, err := ve.Extend(ctx, first, 3*vis)
		if err != nil {
			t.Fatalf("Extend: %v", err)
		}
		time.Sleep(time.Until(firstEnd)) // past the first visibility, derived from it
		msgs, err := q.Receive(ctx, 5, time.Minute)
		if err != nil {
			t.Fatalf("Receive after Extend: %v", err)
		}
		if time.Since(extended) >= 3*vis {
			return false // the check ended after the extended visibility could have: it proves nothing
		}
		if len(msgs) != 0 {
			t.Fatalf("Receive after Extend = %d messages; want none (still hidden)", len(msgs))
		}
		if _, err := ve.Extend(ctx, m, 0); err != nil {
			t.Fatalf("Extend to zero: %v", err)
		}
		again := receive(t, q, 1, time.Minute, 5*time.Second)[0]
		if again.ID != first.ID || again.DequeueCount != first.DequeueCount+1 {
			t.Fatalf("after Extend to zero received %+v; want %s again, DequeueCount %d", again, first.ID, first.DequeueCount+1)
		}
		if _, err := ve.Extend(ctx, m, time.Minute); !errors.Is(err, async.ErrNotFound) && !errors.Is(err, async.ErrConflict) {
			t.Fatalf("Extend by a worker that lost the message: error = %v; want ErrNotFound or ErrConflict", err)
		}
		if err := q.Complete(ctx, again); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		return true
	})
}

// hiddenCheck runs check, which asserts that a message stays hidden for a
// visibility timeout or delay vis, with vis 2 s, then 4, 8 and 16 s while check
// reports that its calls took so long that the visibility could have ended
// before its assertion was made (a loaded machine): an assertion that
// proves nothing is made again with a longer visibility rather than
// skipped or failed. Each run works on a queue of its own.
func hiddenCheck(t *testing.T, check func(t *testing.T, vis time.Duration) bool) {
	t.Helper()
	for vis := 2 * time.Second; vis <= 16*time.Second; vis *= 2 {
		if check(t, vis) {
			return
		}
		t.Logf("the calls outlasted a %v visibility; again with %v", vis, 2*vis)
	}
	t.Fatal("every check outlasted its visibility (16 s at most): the queue is too slow to test")
}

// receiveOnce polls q until it returns one message, received for
// visibility, or fails after timeout; it returns the message and when the
// Receive that returned it was sent.
func receiveOnce(t *testing.T, q async.Queue, visibility, timeout time.Duration) (async.Message, time.Time) {
	t.Helper()
	ctx := testContext(t)
	deadline := time.Now().Add(timeout)
	for {
		sent := time.Now()
		msgs, err := q.Receive(ctx, 1, visibility)
		if err != nil {
			t.Fatalf("Receive: %v", err)
		}
		if len(msgs) > 1 {
			t.Fatalf("Receive(1) returned %d messages", len(msgs))
		}
		if len(msgs) == 1 {
			return msgs[0], sent
		}
		if time.Now().After(deadline) {
			t.Fatalf("no message within %v", timeout)
		}
		time.Sleep(50 * time.Millisecond) // polling with a deadline
	}
}

// receive polls q until it returns n messages, or fails after timeout.
func receive(t *testing.T, q async.Queue, n int, visibility, timeout time.Duration) []async.Message {
	t.Helper()
	ctx := testContext(t)
	var got []async.Message
	deadline := time.Now().Add(timeout)
	for len(got) < n {
		msgs, err := q.Receive(ctx, n-len(got), visibility)
		if err != nil {
			t.Fatalf("Receive: %v", err)
		}
		if len(msgs) > n-len(got) {
			t.Fatalf("Receive(%d) returned %d messages", n-len(got), len(msgs))
		}
		got = append(got, msgs...)
		if len(got) < n {
			if time.Now().After(deadline) {
				t.Fatalf("received %d of %d messages within %v", len(got), n, timeout)
			}
			time.Sleep(50 * time.Millisecond) // polling with a deadline
		}
	}
	return got
}

// none checks that q delivers nothing now.
func none(t *testing.T, q async.Queue) {
	t.Helper()
	msgs, err := q.Receive(testContext(t), 5, time.Minute)
	if err != nil || len(msgs) != 0 {
		t.Fatalf("Receive = %d messages, %v; want none", len(msgs), err)
	}
}

func readAll(t *testing.T, s async.Store, key string) string {
	t.Helper()
	rc, err := s.OpenBlob(testContext(t), key)
	if err != nil {
		t.Fatalf("OpenBlob(%q): %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %q: %v", key, err)
	}
	return string(b)
}

// generated returns a reader of n deterministic pseudo-random bytes for
// seed, made as it is read.
func generated(seed byte, n int64) io.Reader {
	var key [32]byte
	key[0] = seed
	return io.LimitReader(mrand.NewChaCha8(key), n)
}

func digest(t *testing.T, r io.Reader) ([32]byte, int64) {
	t.Helper()
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum, n
}

// onlyReader hides every method but Read.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// failing is a reader that fails with err.
type failing struct{ err error }

func (f failing) Read([]byte) (int, error) { return 0, f.err }

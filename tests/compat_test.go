package tests

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"fngateway/infra/filestore"
	"fngateway/internal/emulators"
)

// previousRelease is the commit of the release before this one, built from
// the repository's history by TestAcrossReleases to run beside this build on
// one store (docs/operations.md, "Upgrades and rollbacks"). Move it on at
// each release.
const previousRelease = "46677da88e1abbf8e0e989d3d7ac197bd0adfa2a"

var (
	previousOnce   sync.Once
	previousBinary string
	previousErr    error
)

// previousGateway builds the gateway of previousRelease once: the commit's
// tree from git (git archive, into a temporary directory), then go build
// there, sharing the module and build caches, so that it builds offline
// and compiles only what differs.
// A clone without the commit is a failure that says so, never a skip.
func previousGateway(tb testing.TB) string {
	tb.Helper()
	previousOnce.Do(func() {
		if out, err := exec.Command("git", "cat-file", "-e", previousRelease+"^{commit}").CombinedOutput(); err != nil {
			previousErr = fmt.Errorf("the previous release, commit %s, is not in this clone's history (%v %s): the test builds it from git; "+
				"run it in a full clone (git fetch --unshallow, or a CI checkout with fetch-depth 0)", previousRelease, err, strings.TrimSpace(string(out)))
			return
		}
		src := filepath.Join(filepath.Dir(binary), "previous-src")
		if err := gitArchive(previousRelease, src); err != nil {
			previousErr = fmt.Errorf("extracting commit %s: %v", previousRelease, err)
			return
		}
		previousBinary = filepath.Join(filepath.Dir(binary), "gateway-previous")
		// Built as TestMain builds this one (-race), so that every
		// dependency comes from the build cache.
		build := exec.Command("go", "build", "-race", "-ldflags=-w", "-o", previousBinary, "./functions")
		build.Dir = src
		if out, err := build.CombinedOutput(); err != nil {
			previousErr = fmt.Errorf("building the previous release %s: %v\n%s", previousRelease, err, out)
		}
	})
	if previousErr != nil {
		tb.Fatal(previousErr)
	}
	return previousBinary
}

// gitArchive writes the tree of commit into dir. It runs in the
// repository's root, the parent of this package's directory.
func gitArchive(commit, dir string) error {
	// The whole tree, whatever the working directory (git archive run in a
	// subdirectory archives only that).
	cmd := exec.Command("git", "archive", "--format=tar", commit)
	cmd.Dir = ".."
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	terr := untar(out, dir)
	io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("git archive: %v %s", err, stderr.String())
	}
	return terr
}

// untar extracts the regular files and directories of a git archive
// into dir.
func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(name, filepath.Clean(dir)+string(filepath.Separator)) {
			return fmt.Errorf("archive entry %q outside %s", h.Name, dir)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(name, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
}

// compatBackend holds every attempt at a path ending in /cancel until it
// is cancelled, and the first attempt at any other path too; a later one
// it answers 201 "done <path>".
type compatBackend struct {
	*httptest.Server
	mu       sync.Mutex
	calls    map[string]int
	canceled map[string]int
}

func newCompatBackend(tb testing.TB) *compatBackend {
	b := &compatBackend{calls: map[string]int{}, canceled: map[string]int{}}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		b.mu.Lock()
		b.calls[r.URL.Path]++
		n := b.calls[r.URL.Path]
		b.mu.Unlock()
		if n > 1 && !strings.HasSuffix(r.URL.Path, "/cancel") {
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte("done " + r.URL.Path))
			return
		}
		<-r.Context().Done()
		b.mu.Lock()
		b.canceled[r.URL.Path]++
		b.mu.Unlock()
	}))
	tb.Cleanup(b.Server.Close)
	return b
}

func (b *compatBackend) count(path string) (calls, canceled int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls[path], b.canceled[path]
}

// TestAcrossReleases: the previous release (built from git) and this build
// on one store, as a rolling deploy, a slot swap, a Lambda alias shift or a
// rollback puts them: requests submitted to one are cancelled through the
// other and finished by the other, both ways, on the embedded store (one
// process at a time, as it allows), Azurite and S3/SQS (both processes at
// once: instances of two versions side by side). Nothing is lost, no
// answer is a 500, and each build reads what the other wrote, to the end.
func TestAcrossReleases(t *testing.T) {
	t.Parallel()
	previous := previousGateway(t)
	stores := []struct {
		name string
		// shared: two processes may run on the store at once.
		shared bool
		env    func(t *testing.T, hosts string) map[string]string
	}{
		{"file", false, func(t *testing.T, hosts string) map[string]string { return asyncEnv(hosts, t.TempDir()) }},
		{"azurite", true, func(t *testing.T, hosts string) map[string]string {
			return azureEnv(hosts, emulators.StartAzurite(t).ConnectionString())
		}},
		{"s3sqs", true, func(t *testing.T, hosts string) map[string]string {
			return s3sqsEnv(hosts, emulators.StartVersitygw(t), emulators.StartFauxqs(t))
		}},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			be := newCompatBackend(t)
			env := st.env(t, be.URL)
			// Results are answered by the status URI itself.
			delete(env, "AsyncInlineResultBytes")
			// Each way: this build submits and the previous release
			// cancels and finishes, then the other way round.
			for _, way := range []struct {
				submit, finish  string
				submitter, then string
			}{
				{binary, previous, "new", "previous"},
				{previous, binary, "previous", "new"},
			} {
				t.Run(way.submitter+" then "+way.then, func(t *testing.T) {
					acrossReleases(t, be, env, st.shared, way.submit, way.finish, "/"+st.name+"/"+way.submitter)
				})
			}
		})
	}
}

// acrossReleases submits two requests (under prefix) to the gateway
// binary submit, and cancels one and finishes the other with the gateway
// binary finish on the same store; then submit's build reads both endings.
func acrossReleases(t *testing.T, be *compatBackend, env map[string]string, shared bool, submit, finish, prefix string) {
	a := startBinary(t, submit, env)
	_, toFinish, _ := submitAsync(t, a.URL, prefix+"/finish", nil)
	_, toCancel, _ := submitAsync(t, a.URL, prefix+"/cancel", nil)
	waitFor(t, loadMargin, "both attempts at the backend", func() bool {
		f, _ := be.count(prefix + "/finish")
		c, _ := be.count(prefix + "/cancel")
		return f == 1 && c == 1
	})
	via := func(g *Gateway, uri string) string { return strings.Replace(uri, a.URL, g.URL, 1) }

	var b *Gateway
	if shared {
		// Side by side: the other build cancels a request the first
		// still runs, and reads its records meanwhile.
		b = startBinary(t, finish, env)
		pollNo500(t, via(b, toFinish.StatusURI))
	}
	// With the embedded store, or once the cancel is asked, the first
	// build stops (SIGTERM): its attempts are stopped after the 10 s
	// grace and their claims released.
	terminated := false
	stopA := func() {
		if !terminated {
			a.terminate(t, 10*time.Second+loadMargin)
			terminated = true
		}
	}
	if !shared {
		stopA()
		b = startBinary(t, finish, env)
	}
	resp, body, _ := Do(t, "DELETE", via(b, toCancel.StatusURI), nil, "")
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("DELETE through the other build = %d %s; want 202", resp.StatusCode, body)
	}
	// The holder learns of the cancel at its next lease renewal (a third
	// of the 15 s lease) and writes the cancellation.
	resp, body, _ = waitResult(t, via(b, toCancel.StatusURI), 5*time.Second+loadMargin)
	if resp.StatusCode != http.StatusConflict || decodeError(t, resp, body).Error.Code != "Canceled" {
		t.Errorf("cancelled request = %d %s; want 409 Canceled%s", resp.StatusCode, body, corruptHint(body))
	}
	stopA()
	// The other build takes the request over once its claim is released
	// (or, side by side, once the lease it was requeued for has lapsed).
	resp, body, _ = waitResult(t, via(b, toFinish.StatusURI), 15*time.Second+loadMargin)
	if resp.StatusCode != http.StatusCreated || string(body) != "done "+prefix+"/finish" {
		t.Errorf("finished request = %d %q; want 201 \"done %s/finish\"%s", resp.StatusCode, body, prefix, corruptHint(body))
	}
	if calls, canceled := be.count(prefix + "/finish"); calls != 2 || canceled != 1 {
		t.Errorf("backend: %d calls, %d cancelled for the finished request; want 2, 1 (the first stopped, the second answered)", calls, canceled)
	}

	// The first build reads both endings the other wrote.
	if !shared {
		b.terminate(t, 10*time.Second+loadMargin)
	}
	a2 := startBinary(t, submit, env)
	for _, c := range []struct {
		uri  string
		want int
	}{{toFinish.StatusURI, http.StatusCreated}, {toCancel.StatusURI, http.StatusConflict}} {
		if resp, body, _ := Do(t, "GET", via(a2, c.uri), nil, ""); resp.StatusCode != c.want {
			t.Errorf("GET %s through the submitting build = %d %s; want %d%s", c.uri, resp.StatusCode, body, c.want, corruptHint(body))
		}
	}
	a2.Kill()
	if shared {
		b.Kill()
	}
}

// pollNo500 reads status URI uri once and fails on a 5xx: the other build
// reads the record as it stands.
func pollNo500(tb testing.TB, uri string) {
	tb.Helper()
	resp, body, _ := Do(tb, "GET", uri, nil, "")
	if resp.StatusCode != http.StatusAccepted {
		tb.Errorf("GET %s through the other build = %d %s; want 202 (pending)%s", uri, resp.StatusCode, body, corruptHint(body))
	}
}

// corruptHint explains a CorruptRecord answer here: one build could not
// read the other's record.
func corruptHint(body []byte) string {
	if !strings.Contains(string(body), "CorruptRecord") {
		return ""
	}
	return "\n(one build cannot read the other's record: does this build write a member, or a format version, that " +
		previousRelease[:7] + " does not know? It refuses any member it does not know: docs/operations.md, \"Upgrades and rollbacks\")"
}

// TestNextReleaseRecords: what the release after this one may write, on the
// embedded store: records with a member this build does not know, and a
// continuation message of a newer format version. This build cancels and
// finishes the requests of those records (before, each was 500
// CorruptRecord, its message settled, and it never ran), writes the member
// back with every rewrite, and leaves the newer message on the queue (not
// set aside as undecodable) with a line that says so.
func TestNextReleaseRecords(t *testing.T) {
	t.Parallel()
	be := newCompatBackend(t)
	dir := t.TempDir()
	env := asyncEnv(be.URL, dir)
	a := StartGateway(t, env)
	_, toFinish, _ := submitAsync(t, a.URL, "/next/finish", nil)
	_, toCancel, _ := submitAsync(t, a.URL, "/next/cancel", nil)
	waitFor(t, loadMargin, "both attempts at the backend", func() bool {
		f, _ := be.count("/next/finish")
		c, _ := be.count("/next/cancel")
		return f == 1 && c == 1
	})
	a.terminate(t, 10*time.Second+loadMargin)

	// The next release's writes, made while no gateway runs on the store.
	const member = `"nextRelease":{"kept":[1,"two"]}`
	fs, err := filestore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, id := range []string{toFinish.ID, toCancel.ID} {
		key := "gateway/records/" + id + ".json"
		data, version, err := fs.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fs.Put(ctx, key, append([]byte("{"+member+","), data[1:]...), version); err != nil {
			t.Fatal(err)
		}
	}
	newer := []byte(`{"v":2,"id":"0123456789abcdef0123456789abcdef","next":true}`)
	if err := fs.Enqueue(ctx, newer, 0); err != nil {
		t.Fatal(err)
	}

	b := StartGateway(t, env)
	via := func(uri string) string { return strings.Replace(uri, a.URL, b.URL, 1) }
	resp, body, _ := Do(t, "DELETE", via(toCancel.StatusURI), nil, "")
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
		t.Errorf("DELETE = %d %s; want 202", resp.StatusCode, body)
	}
	resp, body, _ = waitResult(t, via(toCancel.StatusURI), loadMargin)
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("cancelled request = %d %s; want 409 Canceled", resp.StatusCode, body)
	}
	// Released at the drain, its message comes back within a lease.
	resp, body, _ = waitResult(t, via(toFinish.StatusURI), 15*time.Second+loadMargin)
	if resp.StatusCode != http.StatusCreated || string(body) != "done /next/finish" {
		t.Errorf("finished request = %d %q; want 201 \"done /next/finish\"", resp.StatusCode, body)
	}
	b.WaitLog(t, loadMargin, func(m map[string]any) bool {
		msg, _ := m["msg"].(string)
		return strings.HasPrefix(msg, "continuation left for a newer release")
	})
	b.terminate(t, 10*time.Second+loadMargin)

	fs, err = filestore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{toFinish.ID, toCancel.ID} {
		data, _, err := fs.Get(ctx, "gateway/records/"+id+".json")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), member) {
			t.Errorf("record %s after this build's rewrites: %s; want the next release's member %s kept", id, data, member)
		}
	}
	if _, pending := fs.NextVisible(); !pending {
		t.Errorf("the newer message is gone from the queue; want it left for a release that can read it")
	}
	if names, _ := filepath.Glob(filepath.Join(dir, "quarantine", "*")); len(names) != 0 {
		t.Errorf("quarantine/ holds %v; want nothing set aside", names)
	}
}

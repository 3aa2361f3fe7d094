package tests

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"fngateway/infra/filestore"
)

// runDeadLettersCmd runs the binary's deadletters subcommand with the extra
// environment env and returns its output and exit code.
func runDeadLettersCmd(tb testing.TB, env []string, args ...string) (string, int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append([]string{"deadletters"}, args...)...)
	cmd.Env = append(baseEnv(), env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	tb.Fatalf("gateway deadletters: %v\n%s", err, out)
	return "", 0
}

// TestDeadLettersBinary runs `gateway deadletters` beside a running local
// gateway on the file store: the continuation of a request that finished,
// found in quarantine/, is acknowledged by redrive (a dry run first says
// so and changes nothing), never sent, and the backend is not called again.
// A subcommand it does not know is exit 2, named.
func TestDeadLettersBinary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// The backend answers once the test holds the 202: the request
	// finishes in a continuation whatever the machine's load.
	release := make(chan struct{})
	var total atomic.Int64
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		total.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.WriteHeader(201)
		io.WriteString(w, "report")
	}))
	defer be.Close()
	gw := StartGateway(t, map[string]string{
		"Hosts": be.URL, "AsyncModeEnabled": "true", "AsyncTriggerTimeout": "50",
		"UserProfiles": asyncProfile, "AsyncStore": "file:" + dir,
	})
	_, acc, _ := submitAsync(t, gw.URL, "/reports/dl", nil)
	close(release)
	waitResult(t, acc.StatusURI, loadMargin)
	calls := total.Load()

	// A copy of its continuation, set aside whole as the store sets a
	// message file aside (written by a store of its own, then moved in).
	otherDir := t.TempDir()
	other, err := filestore.Open(otherDir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := other.Enqueue(ctx, []byte(`{"v":1,"id":"`+acc.ID+`"}`), 0); err != nil {
		t.Fatal(err)
	}
	ms, err := other.Receive(ctx, 1, time.Minute)
	if err != nil || len(ms) != 1 {
		t.Fatalf("Receive = %v, %v", ms, err)
	}
	if err := other.Quarantine(ctx, ms[0]); err != nil {
		t.Fatal(err)
	}
	name := ms[0].ID + ".msg"
	if err := os.Rename(filepath.Join(otherDir, "quarantine", name), filepath.Join(dir, "quarantine", name)); err != nil {
		t.Fatal(err)
	}

	env := []string{"AsyncStore=file:" + dir}
	out, code := runDeadLettersCmd(t, env, "list")
	if code != 0 || !strings.Contains(out, acc.ID) || !strings.Contains(out, "no, finished (succeeded)") {
		t.Fatalf("list: exit %d\n%s\nwant the request, finished", code, out)
	}
	out, code = runDeadLettersCmd(t, env, "redrive", "--dry-run")
	if code != 0 || !strings.Contains(out, acc.ID+": would be acknowledged, not sent: already finished (succeeded)") {
		t.Errorf("redrive --dry-run: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "quarantine", name)); err != nil {
		t.Errorf("the dry run removed the dead letter: %v", err)
	}
	before := queueFiles(t, dir)
	out, code = runDeadLettersCmd(t, env, "redrive", acc.ID)
	if code != 0 || !strings.Contains(out, acc.ID+": acknowledged, not sent") || !strings.Contains(out, "0 sent, 1 acknowledged, 0 left") {
		t.Errorf("redrive: exit %d\n%s", code, out)
	}
	if out, code := runDeadLettersCmd(t, env, "list"); code != 0 || !strings.Contains(out, "no dead letters") {
		t.Errorf("list after redrive: exit %d\n%s", code, out)
	}
	for f := range queueFiles(t, dir) {
		if !before[f] {
			t.Errorf("queue/%s appeared: want nothing sent", f)
		}
	}
	if got := total.Load(); got != calls {
		t.Errorf("backend calls %d; want still %d", got, calls)
	}
	out, code = runDeadLettersCmd(t, env, "drop")
	if code != 2 || !strings.Contains(out, `unknown subcommand "drop"`) {
		t.Errorf("unknown subcommand: exit %d\n%s; want 2 naming it", code, out)
	}
}

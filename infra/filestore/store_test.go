package filestore

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"fngateway/core/async"
)

// mustOpen opens a store in dir, failing the test on error.
func mustOpen(tb testing.TB, dir string) *Store {
	tb.Helper()
	s, err := Open(dir)
	if err != nil {
		tb.Fatalf("Open(%q): %v", dir, err)
	}
	return s
}

func TestOpenKeepsSigningKey(t *testing.T) {
	dir := t.TempDir()
	s1 := mustOpen(t, dir)
	fi, err := os.Stat(filepath.Join(dir, keyFile))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fi.Mode().Perm(), fs.FileMode(0o600); got != want {
		t.Errorf("key file mode = %v, want %v", got, want)
	}
	if got, want := fi.Size(), int64(keyLen); got != want {
		t.Errorf("key file size = %d, want %d", got, want)
	}
	s2 := mustOpen(t, dir)
	if !bytes.Equal(s1.signingKey, s2.signingKey) {
		t.Error("signing key changed on reopen")
	}
	if s3 := mustOpen(t, t.TempDir()); bytes.Equal(s1.signingKey, s3.signingKey) {
		t.Error("two stores share a signing key")
	}
}

func TestOpenRejectsBadKeyFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, keyFile), []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "signing key") {
		t.Errorf("Open with a 5-byte key file: err = %v, want a signing key error", err)
	}
}

func TestKeyValidation(t *testing.T) {
	tests := []struct {
		key string
		ok  bool
	}{
		{"c/name", true},
		{"results/abc/data", true},
		{"c/with space/ünïcode%20?#&=", true},
		{"c/a..b", true},
		{"", false},
		{"name", false},
		{"/etc/passwd", false},
		{"c/../../etc/passwd", false},
		{"../c/x", false},
		{"c/..", false},
		{"c/./x", false},
		{"c//x", false},
		{"c/x/", false},
		{"c\\..\\x", false},
		{"c/x\x00y", false},
		{"c/x\ny", false},
		{"c/.hidden", false},
		{"c/.tmp-123", false},
		{"c/" + strings.Repeat("a", 256), false},
		{"c/" + strings.Repeat("a/", 600), false},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(strconv.Quote(tt.key), func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, filepath.Join(dir, "store"))
			errs := map[string]error{}
			_, _, errs["Get"] = s.Get(ctx, tt.key)
			_, errs["Put"] = s.Put(ctx, tt.key, []byte("x"), "")
			errs["WriteBlob"] = s.WriteBlob(ctx, tt.key, strings.NewReader("x"), "", false)
			_, errs["OpenBlob"] = s.OpenBlob(ctx, tt.key)
			_, errs["SignURL"] = s.SignURL(ctx, tt.key, timeFar)
			for op, err := range errs {
				if got := errors.Is(err, errInvalidKey); got == tt.ok {
					t.Errorf("%s: err = %v, want invalid key: %v", op, err, !tt.ok)
				}
			}
			// Nothing may appear beside the store's directory.
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 1 {
				t.Errorf("files outside the store: %v", entries)
			}
		})
	}
}

// TestPutGet checks what is the file store's own: errors naming the key,
// directories and paths through records, versions surviving a reopen.
func TestPutGet(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, t.TempDir())
	const key = "records/r1"

	if _, _, err := s.Get(ctx, key); !errors.Is(err, async.ErrNotFound) || !strings.Contains(err.Error(), key) {
		t.Fatalf("Get missing: err = %v, want ErrNotFound naming the key", err)
	}
	v1, err := s.Put(ctx, key, []byte(`{"n":1}`), "")
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	v2, err := s.Put(ctx, key, []byte(`{"n":2}`), v1)
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if v1 == v2 {
		t.Fatalf("version unchanged by Put: %s", v1)
	}

	// Conditions and races: core/async/porttest (TestStorePort). Here: what is
	// the file store's own.
	if _, err := s.Put(ctx, "fresh/a/b/c", []byte("deep"), ""); err != nil {
		t.Fatalf("create in a new nested container: %v", err)
	}
	data, v, err := s.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(data), `{"n":2}`; got != want || v != v2 {
		t.Errorf("Get = %q, %s; want %q, %s", got, v, want, v2)
	}
	// Nothing the gateway writes is both an object and a prefix of
	// others: a directory where an object is looked up is corrupt
	// (TestDirectoryAsRecord).
	if _, _, err := s.Get(ctx, "fresh/a"); !errors.Is(err, async.ErrCorruptRecord) {
		t.Errorf("Get of a directory: err = %v, want ErrCorruptRecord", err)
	}
	if _, _, err := s.Get(ctx, key+"/below"); !errors.Is(err, async.ErrNotFound) {
		t.Errorf("Get below a record: err = %v, want ErrNotFound", err)
	}
	// Survives reopening.
	if _, v, err := mustOpen(t, s.root).Get(ctx, key); err != nil || v != v2 {
		t.Errorf("Get after reopen = %s, %v; want %s", v, err, v2)
	}
}

// crashPayload is a self-checking object body for the crash test.
func crashPayload(n, size int) []byte {
	head := fmt.Sprintf("%d:", n)
	return append([]byte(head), bytes.Repeat([]byte{byte('a' + n%26)}, size-len(head))...)
}

func checkCrashPayload(b []byte, size int) error {
	head, rest, ok := bytes.Cut(b, []byte(":"))
	n, err := strconv.Atoi(string(head))
	if !ok || err != nil {
		return fmt.Errorf("torn payload: no counter in %.20q", b)
	}
	if !bytes.Equal(b, crashPayload(n, size)) {
		return fmt.Errorf("torn payload %d: %d bytes (%d after head)", n, len(b), len(rest))
	}
	return nil
}

const (
	crashEnv      = "FILESTORE_CRASH_DIR"
	crashBlobSize = 1 << 20
)

// TestCrashChild is the writer TestCrashSafety kills; it does nothing when
// run on its own.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		return
	}
	ctx := context.Background()
	s := mustOpen(t, dir)
	version := ""
	for n := 0; ; n++ {
		v, err := s.Put(ctx, "c/record", crashPayload(n, 512), version)
		if err != nil {
			t.Fatal(err)
		}
		version = v
		if err := s.WriteBlob(ctx, "c/blob", bytes.NewReader(crashPayload(n, crashBlobSize)), "text/plain", false); err != nil {
			t.Fatal(err)
		}
		if err := s.Enqueue(ctx, crashPayload(n, 256), 0); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("wrote %d\n", n)
	}
}

func TestCrashSafety(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), crashEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	reached := false
	for !reached && sc.Scan() {
		reached = sc.Text() == "wrote 20"
	}
	if !reached {
		cmd.Wait()
		t.Fatalf("writer stopped before 21 rounds: %s", stderr.String())
	}
	// SIGKILL while the child is busy writing.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	ctx := context.Background()
	s := mustOpen(t, dir)
	data, _, err := s.Get(ctx, "c/record")
	if err != nil {
		t.Fatal(err)
	}
	if err := checkCrashPayload(data, 512); err != nil {
		t.Errorf("record: %v", err)
	}
	rc, err := s.OpenBlob(ctx, "c/blob")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var blob bytes.Buffer
	if _, err := blob.ReadFrom(rc); err != nil {
		t.Fatal(err)
	}
	if err := checkCrashPayload(blob.Bytes(), crashBlobSize); err != nil {
		t.Errorf("blob: %v", err)
	}
	msgs, err := s.Receive(ctx, 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) < 21 {
		t.Errorf("%d messages after the crash, want at least 21", len(msgs))
	}
	for _, m := range msgs {
		if err := checkCrashPayload(m.Body, 256); err != nil {
			t.Errorf("message %s: %v", m.ID, err)
		}
	}
	if q, _ := os.ReadDir(s.quarantine); len(q) != 0 {
		t.Errorf("quarantined after the crash: %v", q)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(s.queueDir, tempPrefix+"*")); len(leftovers) != 0 {
		t.Errorf("temporary files left in the queue after Open: %v", leftovers)
	}
}

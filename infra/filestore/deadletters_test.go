package filestore

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fngateway/core/async"
)

// TestQuarantineDeadLetters: a message set aside by its worker is listed
// whole with its deliveries and send time, a damaged file with the reason
// and its raw bytes; Delete removes a file and refuses a name that is not
// one; a tool's store opened beside the running one adds a message the
// running store's Receive then delivers.
func TestQuarantineDeadLetters(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := mustOpen(t, dir)
	body := []byte(`{"v":1,"id":"0123456789abcdef0123456789abcdef"}`)
	if err := s.Enqueue(ctx, body, 0); err != nil {
		t.Fatal(err)
	}
	ms, err := s.Receive(ctx, 1, time.Minute)
	if err != nil || len(ms) != 1 {
		t.Fatalf("Receive = %v, %v", ms, err)
	}
	if err := s.Quarantine(ctx, ms[0]); err != nil {
		t.Fatal(err)
	}
	bad := strings.Repeat("f", 32) + msgSuffix
	if err := os.WriteFile(filepath.Join(s.quarantine, bad), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}

	tool, err := OpenBeside(dir)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := tool.DeadLetters().List(ctx, 10, time.Minute)
	if err != nil || len(ls) != 2 {
		t.Fatalf("List = %+v, %v; want 2 letters", ls, err)
	}
	good, broken := ls[0], ls[1]
	if good.ID != ms[0].ID+msgSuffix || string(good.Body) != string(body) || good.Deliveries != 1 || good.SentAt.IsZero() || good.Problem != "" {
		t.Errorf("quarantined message = %+v", good)
	}
	if broken.ID != bad || broken.Problem == "" || string(broken.Body) != "garbage" {
		t.Errorf("damaged file = %+v; want its problem and raw bytes", broken)
	}
	if _, err := tool.DeadLetters().List(ctx, 1, 0); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", "../signing.key", ".tmp-x"} {
		if err := tool.DeadLetters().Delete(ctx, async.DeadLetter{ID: name}); err == nil {
			t.Errorf("Delete(%q) = nil; want an error", name)
		}
	}
	if err := tool.DeadLetters().Delete(ctx, broken); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(s.quarantine, bad)); !os.IsNotExist(err) {
		t.Errorf("deleted file still there: %v", err)
	}

	// The redrive's send, from another process's view of the store.
	if err := tool.Enqueue(ctx, body, 0); err != nil {
		t.Fatal(err)
	}
	got, err := s.Receive(ctx, 10, time.Minute)
	if err != nil || len(got) != 1 || string(got[0].Body) != string(body) {
		t.Fatalf("running store's Receive = %+v, %v; want the message the tool added", got, err)
	}
	if err := s.Complete(ctx, got[0]); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Receive(ctx, 10, 0); len(got) != 0 {
		t.Errorf("after Complete: %d messages; want none", len(got))
	}
	if _, err := OpenBeside(t.TempDir()); err == nil {
		t.Error("OpenBeside on an empty directory = nil; want an error naming what is missing")
	}
}

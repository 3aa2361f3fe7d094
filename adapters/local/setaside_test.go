package local

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"fngateway/core"
	"fngateway/core/async"
	"fngateway/infra/filestore"
)

// TestQuarantinedMessageEndsItsRequest: a queue message file the store
// sets aside whose body names a pending request (here a file that another
// process renamed, so its header no longer matches its name) ends that
// request as Failed, with the reason, instead of leaving it pending until
// its expiry; the worker and the status agree.
func TestQuarantinedMessageEndsItsRequest(t *testing.T) {
	dir := t.TempDir()
	fs, err := filestore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	a := &async.Async{Store: fs, Queue: fs, Router: core.NewRouter(nil, core.Route{}), Timeout: time.Minute}
	req := &core.Request{Method: "GET", Path: "/job", Header: http.Header{}, IdempotencyKey: "k", Budget: core.Budget{Arrival: time.Now()}}
	acc, _, err := a.Submit(context.Background(), req, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "queue", "*.msg"))
	if len(files) != 1 {
		t.Fatalf("queue/ holds %d message files; want the request's one", len(files))
	}
	// Renamed: its header names another file; the store sets it aside at
	// its next start.
	if err := os.Rename(files[0], filepath.Join(dir, "queue", "0123456789abcdef0123456789abcdef.msg")); err != nil {
		t.Fatal(err)
	}
	fs2, err := filestore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	a2 := &async.Async{Store: fs2, Queue: fs2, Router: core.NewRouter(nil, core.Route{}), Timeout: time.Minute}
	w := &Worker{Queue: fs2, Async: a2, Visibility: 20 * time.Second, Poll: 5 * time.Millisecond}
	wctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(wctx); close(done) }()
	defer func() { cancel(); <-done }()
	var v *async.StatusView
	waitUntil(t, "the request ends", func() bool {
		v, err = a2.Status(context.Background(), acc.ID)
		return err == nil && v.State.Done()
	})
	if v.State != async.StateFailed || v.ResultCode != "Internal" || v.ResultStatus != 500 {
		t.Errorf("status = %s %d %q; want failed 500 Internal", v.State, v.ResultStatus, v.ResultCode)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "quarantine", "*.msg"))
	if len(names) != 1 {
		t.Errorf("quarantine/ holds %d files; want the renamed message", len(names))
	}
}

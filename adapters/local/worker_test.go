package local

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"fngateway/core"
	"fngateway/infra/filestore"
)

// syncBuffer is a log sink safe for the worker's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestWorkerBadMessage: an undecodable continuation is logged whole on
// every delivery, its neighbour is processed, and after MaxDequeue
// deliveries it is dropped.
func TestWorkerBadMessage(t *testing.T) {
	fs, err := filestore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bad := []byte("definitely not a continuation")
	if err := fs.Enqueue(ctx, bad, 0); err != nil {
		t.Fatal(err)
	}
	// A well-formed message for an unknown request: acknowledged, nothing
	// written.
	if err := fs.Enqueue(ctx, []byte(`{"v":1,"id":"0123456789abcdef0123456789abcdef"}`), 0); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	w := &Worker{
		Queue: fs, Async: &core.Async{Store: fs, Queue: fs},
		Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Visibility: 100 * time.Millisecond, Poll: 5 * time.Millisecond, MaxDequeue: 3,
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { w.Run(wctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, pending := fs.NextVisible(); !pending {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue not drained; logs:\n%s", logs.String())
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
	cancel()
	<-done

	var bodies []string
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			t.Fatalf("log line %q is not JSON", line)
		}
		if m["msg"] == "undecodable continuation message" {
			bodies = append(bodies, m["body"].(string))
		}
	}
	if len(bodies) != 3 {
		t.Fatalf("undecodable-message lines = %d; want one per delivery, 3 (logs:\n%s)", len(bodies), logs.String())
	}
	if want := base64.StdEncoding.EncodeToString(bad); bodies[0] != want {
		t.Errorf("logged body = %q; want the whole message %q", bodies[0], want)
	}
}

package filestore

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestNotifyTopics(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	tests := []struct {
		topic string
		ok    bool
	}{
		{"lifecycle", true},
		{"Topic_1.v-2", true},
		{strings.Repeat("t", 63), true},
		{"", false},
		{strings.Repeat("t", 64), false},
		{"../escape", false},
		{"a/b", false},
		{"with space", false},
		{"ü", false},
	}
	for _, tt := range tests {
		t.Run(tt.topic, func(t *testing.T) {
			err := s.Notify(context.Background(), tt.topic, []byte(`{"Status":"Queued"}`))
			if tt.ok && err != nil {
				t.Errorf("Notify(%q) = %v, want nil", tt.topic, err)
			}
			if !tt.ok && (!errors.Is(err, errInvalidTopic) || !strings.Contains(err.Error(), fmt.Sprintf("%q", tt.topic))) {
				t.Errorf("Notify(%q) = %v, want errInvalidTopic naming it", tt.topic, err)
			}
			// CheckTopic, asked at start-up, agrees with Notify.
			if cerr := s.CheckTopic(tt.topic); (cerr == nil) != tt.ok || !tt.ok && !errors.Is(cerr, errInvalidTopic) {
				t.Errorf("CheckTopic(%q) = %v, want ok %v", tt.topic, cerr, tt.ok)
			}
		})
	}
}

func TestNotifyBody(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	ctx := context.Background()
	if err := s.Notify(ctx, "t", []byte("not json")); err == nil {
		t.Error("Notify with a non-JSON body: no error")
	}
	if err := s.Notify(ctx, "t", []byte("{\n  \"a\": \"x\\ny\"\n}\n")); err != nil {
		t.Fatal(err)
	}
	// A line torn by a crash is ended before the next one.
	path := filepath.Join(s.topicsDir, "t.jsonl")
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"torn`)
	f.Close()
	if err := s.Notify(ctx, "t", []byte(`{"b":1}`)); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "{\"a\":\"x\\ny\"}\n{\"torn\n{\"b\":1}\n"; string(got) != want {
		t.Errorf("topic file = %q, want %q", got, want)
	}
}

func TestNotifyConcurrent(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	const n = 50
	pad := strings.Repeat("x", 8<<10) // larger than one pipe buffer's atomic write
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			body := fmt.Sprintf(`{"RequestGuid":"%d","Status":"Queued","pad":"%s"}`, i, pad)
			if err := s.Notify(context.Background(), "events", []byte(body)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	f, err := os.Open(filepath.Join(s.topicsDir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	seen := map[string]bool{}
	for sc.Scan() {
		var ev struct{ RequestGuid, Pad string }
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Pad != pad {
			t.Fatalf("line %d is not one whole notification: %v", len(seen)+1, err)
		}
		seen[ev.RequestGuid] = true
	}
	if len(seen) != n {
		t.Errorf("%d notifications in the file, want %d", len(seen), n)
	}
}

package filestore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"fngateway/core/async"
)

// errInvalidTopic is wrapped by Notify's error for a topic name that is
// not 1 to 63 letters, digits, '-', '_' or '.'.
var errInvalidTopic = errors.New("invalid topic")

func validTopic(t string) bool {
	if len(t) < 1 || len(t) > 63 {
		return false
	}
	for _, c := range []byte(t) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

var _ async.TopicChecker = (*Store)(nil)

// CheckTopic reports whether Notify accepts topic: an error wrapping
// errInvalidTopic says what a valid name is when it does not.
func (s *Store) CheckTopic(topic string) error {
	if !validTopic(topic) {
		return fmt.Errorf("topic %q: want 1-63 letters, digits, '-', '_' or '.': %w", topic, errInvalidTopic)
	}
	return nil
}

// Notify appends body, which must be JSON, as one line to the topic's file
// topics/<topic>.jsonl in the store's directory, creating it when missing.
// The line is compacted JSON, so it holds no newline; concurrent calls
// append whole lines, one after another, each synced to disk. A line torn
// by a crash is ended before the next one is appended.
func (s *Store) Notify(ctx context.Context, topic string, body []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.CheckTopic(topic); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	var line bytes.Buffer
	if err := json.Compact(&line, body); err != nil {
		return fmt.Errorf("notify %s: body is not JSON: %w", topic, err)
	}
	line.WriteByte('\n')

	s.nmu.Lock()
	defer s.nmu.Unlock()
	f, err := os.OpenFile(filepath.Join(s.topicsDir, topic+".jsonl"), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("notify %s: %w", topic, err)
	}
	defer f.Close()
	if err := endLine(f); err != nil {
		return fmt.Errorf("notify %s: %w", topic, err)
	}
	if _, err := f.Write(line.Bytes()); err != nil {
		return fmt.Errorf("notify %s: %w", topic, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("notify %s: %w", topic, err)
	}
	return nil
}

// endLine appends a newline to f, open for appending, unless f is empty or
// already ends with one.
func endLine(f *os.File) error {
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return err
	}
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, fi.Size()-1); err != nil {
		return err
	}
	if last[0] == '\n' {
		return nil
	}
	_, err = f.Write([]byte{'\n'})
	return err
}

package filestore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"fngateway/core/async"
)

// On disk, objects and queue messages are records: the magic line, one line
// of JSON header, then the payload bytes unchanged. The header comes first
// so that a blob streams straight to disk after it.
const (
	recordMagic  = "fngw-record-1\n"
	maxHeaderLen = 8 << 10
)

// objectHeader describes a record or blob under objects/.
type objectHeader struct {
	// Version changes on every write; see nextVersion.
	Version string `json:"version"`
	// ContentType is the blob's media type; empty for records.
	ContentType string `json:"contentType,omitempty"`
}

func (h *objectHeader) check() error {
	if h.Version == "" {
		return fmt.Errorf("%w: empty version", async.ErrCorruptRecord)
	}
	return nil
}

// messageHeader is the state of one queued message.
type messageHeader struct {
	ID string `json:"id"`
	// Receipt is the current delivery's receipt; empty until received.
	Receipt      string `json:"receipt,omitempty"`
	DequeueCount int    `json:"dequeueCount"`
	// EnqueuedAt and VisibleAt are Unix nanoseconds.
	EnqueuedAt int64 `json:"enqueuedAt"`
	VisibleAt  int64 `json:"visibleAt"`
}

func (h *messageHeader) check() error {
	if !validID(h.ID) {
		return fmt.Errorf("%w: message id %q", async.ErrCorruptRecord, h.ID)
	}
	if h.DequeueCount < 0 {
		return fmt.Errorf("%w: dequeue count %d", async.ErrCorruptRecord, h.DequeueCount)
	}
	return nil
}

// encodeHeader returns the start of a record holding hdr.
func encodeHeader(hdr any) ([]byte, error) {
	j, err := json.Marshal(hdr)
	if err != nil {
		return nil, fmt.Errorf("encode record header: %w", err)
	}
	n := len(recordMagic) + len(j) + 1
	if n > maxHeaderLen {
		return nil, fmt.Errorf("encode record header: %d bytes, limit %d", n, maxHeaderLen)
	}
	b := make([]byte, 0, n)
	b = append(b, recordMagic...)
	b = append(b, j...)
	return append(b, '\n'), nil
}

// splitRecord finds the JSON header at the start of a record and the offset
// at which its payload begins. b may be just the first maxHeaderLen bytes.
func splitRecord(b []byte) (hdr []byte, payload int, err error) {
	if !bytes.HasPrefix(b, []byte(recordMagic)) {
		return nil, 0, fmt.Errorf("%w: no magic line", async.ErrCorruptRecord)
	}
	rest := b[len(recordMagic):]
	rest = rest[:min(len(rest), maxHeaderLen-len(recordMagic))]
	i := bytes.IndexByte(rest, '\n')
	if i < 0 {
		return nil, 0, fmt.Errorf("%w: header not terminated within %d bytes", async.ErrCorruptRecord, maxHeaderLen)
	}
	return rest[:i], len(recordMagic) + i + 1, nil
}

// header is a decoded record header that can check its own fields.
type header interface {
	*objectHeader | *messageHeader
	check() error
}

// decodeRecord decodes the header at the start of b into hdr and returns
// the payload's offset.
func decodeRecord[H header](b []byte, hdr H) (int, error) {
	j, off, err := splitRecord(b)
	if err != nil {
		return 0, err
	}
	if err := json.Unmarshal(j, hdr); err != nil {
		return 0, fmt.Errorf("%w: header: %v", async.ErrCorruptRecord, err)
	}
	if err := hdr.check(); err != nil {
		return 0, err
	}
	return off, nil
}

// readHeader decodes the header of the record open in f, reading no more
// than its first maxHeaderLen bytes, and returns the payload's offset.
func readHeader[H header](f *os.File, hdr H) (int64, error) {
	buf := make([]byte, maxHeaderLen)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return 0, err
	}
	off, err := decodeRecord(buf[:n], hdr)
	return int64(off), err
}

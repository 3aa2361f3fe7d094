package filestore

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"fngateway/core/async"
)

func TestDecodeRecord(t *testing.T) {
	valid, _ := encodeHeader(&objectHeader{Version: "1-ab", ContentType: "text/plain"})
	tests := []struct {
		name    string
		in      []byte
		wantErr bool
	}{
		{"valid", append(valid, "payload"...), false},
		{"empty", nil, true},
		{"no magic", []byte(`{"version":"1"}` + "\n"), true},
		{"unterminated", []byte(recordMagic + `{"version":"1"}`), true},
		{"header too long", []byte(recordMagic + `{"version":"` + strings.Repeat("1", maxHeaderLen) + "\"}\n"), true},
		{"no version", []byte(recordMagic + "{}\n"), true},
		{"not JSON", []byte(recordMagic + "{\n"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h objectHeader
			off, err := decodeRecord(tt.in, &h)
			if (err != nil) != tt.wantErr {
				t.Fatalf("decodeRecord: err = %v, want error %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, async.ErrCorruptRecord) {
				t.Errorf("err = %v, want async.ErrCorruptRecord", err)
			}
			if err == nil && string(tt.in[off:]) != "payload" {
				t.Errorf("payload = %q, want %q", tt.in[off:], "payload")
			}
		})
	}
}

// FuzzDecodeRecord checks that decoding any bytes never panics, and that
// every header encodeHeader makes decodes to itself with the payload intact.
func FuzzDecodeRecord(f *testing.F) {
	obj, _ := encodeHeader(&objectHeader{Version: "3-0123456789abcdef", ContentType: "application/json"})
	msg, _ := encodeHeader(&messageHeader{ID: "0123456789abcdef0123456789abcdef", Receipt: "r", DequeueCount: 2, EnqueuedAt: 1, VisibleAt: 2})
	f.Add(append(obj, "body"...), "1-a", "text/plain", 1)
	f.Add(append(msg, "body"...), "", "", 0)
	f.Add([]byte(recordMagic+"{\"version\":\"\\u0000\"}\n"), "\n", "\x00", -1)
	f.Fuzz(func(t *testing.T, data []byte, version, contentType string, count int) {
		var oh objectHeader
		if off, err := decodeRecord(data, &oh); err == nil && (off > len(data) || oh.Version == "") {
			t.Fatalf("decodeRecord accepted offset %d of %d, version %q", off, len(data), oh.Version)
		}
		var mh messageHeader
		if off, err := decodeRecord(data, &mh); err == nil && (off > len(data) || !validID(mh.ID) || mh.DequeueCount < 0) {
			t.Fatalf("decodeRecord accepted offset %d of %d, %+v", off, len(data), mh)
		}

		in := objectHeader{Version: version, ContentType: contentType}
		head, err := encodeHeader(&in)
		if err != nil {
			return // too long
		}
		rec := append(head, data...)
		var out objectHeader
		off, err := decodeRecord(rec, &out)
		if version == "" {
			if err == nil {
				t.Fatal("decoded an empty version")
			}
			return
		}
		if err != nil {
			t.Fatalf("decodeRecord(encodeHeader(%+v)): %v", in, err)
		}
		if !bytes.Equal(rec[off:], data) {
			t.Fatalf("payload %q, want %q", rec[off:], data)
		}
		// encoding/json replaces invalid UTF-8 with U+FFFD.
		valid := func(s string) string {
			b, _ := json.Marshal(s)
			var out string
			json.Unmarshal(b, &out)
			return out
		}
		if out.Version != valid(in.Version) || out.ContentType != valid(in.ContentType) {
			t.Fatalf("header %+v came back as %+v", in, out)
		}
		mIn := messageHeader{ID: "0123456789abcdef0123456789abcdef", Receipt: version, DequeueCount: max(count, 0), VisibleAt: int64(count)}
		head, err = encodeHeader(&mIn)
		if err != nil {
			return
		}
		var mOut messageHeader
		if _, err := decodeRecord(append(head, data...), &mOut); err != nil || mOut.DequeueCount != mIn.DequeueCount || mOut.VisibleAt != mIn.VisibleAt {
			t.Fatalf("message round trip: %+v, %v; want %+v", mOut, err, mIn)
		}
	})
}

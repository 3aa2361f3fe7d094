package async

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"fngateway/core"
)

// FuzzDecodeContinuation: the decoder never panics, refuses with
// ErrBadMessage, or with ErrNewerFormat exactly when the version is newer,
// and what it accepts encodes back to the same message.
func FuzzDecodeContinuation(f *testing.F) {
	id := "0123456789abcdef0123456789abcdef"
	for _, s := range []string{
		`{"v":1,"id":"` + id + `"}`,
		` {"id":"` + id + `","v":1} `,
		`{"v":2,"id":"` + id + `"}`,
		`{"v":2,"id":"` + id + `","x":{"y":[1]}}`,
		`{"v":1,"id":"` + id + `","x":null}`,
		`{"v":1,"id":"` + id + `","V":3}`,
		`{"v":1,"ID":"` + id + `"}`,
		`{"v":1,"id":"` + id + `"}{}`,
		`{"v":1.0,"id":"\u0030123456789abcdef0123456789abcdef"}`,
		`null`, `[]`, ``, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeContinuation(b)
		if err != nil {
			v, verr := formatVersion(b)
			newer := len(b) <= maxMessageBytes && verr == nil && v > continuationVersion
			if newer != errors.Is(err, ErrNewerFormat) || !newer && !errors.Is(err, ErrBadMessage) {
				t.Fatalf("error %v: want ErrNewerFormat exactly for a newer version, else ErrBadMessage", err)
			}
			return
		}
		if !validAsyncID(c.ID) {
			t.Fatalf("accepted id %q", c.ID)
		}
		enc := c.Encode()
		c2, err := decodeContinuation(enc)
		if err != nil || c2 != c {
			t.Fatalf("round trip of %q: %q gave %+v, %v", b, enc, c2, err)
		}
		if want := `{"v":1,"id":"` + c.ID + `"}`; string(enc) != want {
			t.Fatalf("Encode = %s; want %s", enc, want)
		}
	})
}

// FuzzDecodeRecord: the decoder never panics, refuses with errBadRecord, or
// with ErrNewerFormat exactly when the version is newer, and what it
// accepts encodes and decodes back to the same encoding, its unknown
// members kept.
func FuzzDecodeRecord(f *testing.F) {
	arrival := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	full := &asyncRecord{V: 1, ID: "0123456789abcdef0123456789abcdef", State: StateRunning, Profile: "alice", Topic: "t",
		Container: "gateway-results", Arrival: arrival, Expiry: arrival.Add(time.Hour),
		Request: requestSnapshot{Method: "POST", Path: "/a/b", RawQuery: "x=1", Header: http.Header{"A": {"1", "2"}},
			Host: "h", RemoteAddr: "1.2.3.4:5", Proto: "https", IdempotencyKey: "k", ClientKey: true, BodySize: 3},
		Attempts:    []core.Attempt{{Host: "b", Status: 503, Outcome: core.OutcomeStatus, DurationMs: 12}, {Host: "b", Outcome: core.OutcomeFunctionLimit}},
		Checkpoints: 1,
		Claim:       &claimLease{Owner: "fedcba9876543210fedcba9876543210", Until: arrival.Add(time.Minute), Inflight: true},
	}
	done := *full
	done.State, done.Claim = StateSucceeded, nil
	done.Result = &recordResult{Status: 200, CompletedAt: arrival.Add(2 * time.Minute)}
	minimal := &asyncRecord{V: 1, ID: full.ID, State: StateQueued, Container: "abc", Arrival: arrival, Expiry: arrival,
		Request: requestSnapshot{Method: "GET", Path: "/"}}
	for _, r := range []*asyncRecord{full, &done, minimal} {
		b, err := r.Encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"v":1,"id":"0123456789abcdef0123456789abcdef","state":"queued","container":"abc","arrival":"0000-01-01T00:30:00+01:00","expiry":"2026-01-01T00:00:00Z","request":{"method":"GET","path":"/"}}`))
	f.Add([]byte(`{"v":1,"id":"0123456789abcdef0123456789abcdef","state":"queued","container":"../x","arrival":"2026-01-01T00:00:00Z","expiry":"2026-01-01T00:00:00Z","request":{"method":"GET","path":"/"}}`))
	f.Add([]byte(`{"v":1,"state":"nope"}`))
	f.Add([]byte(`null`))
	// A later release's record: members this build does not know, at the
	// top level and in request; and one of a newer format version.
	withNew := bytes.Replace(bytes.Replace(must(minimal.Encode()), []byte(`{"v":1,`), []byte(`{"v":1,"next":{"a":[1,"<b>"]},"Nope":null,`), 1),
		[]byte(`"request":{`), []byte(`"request":{"extra":"x",`), 1)
	f.Add(withNew)
	f.Add(bytes.Replace(withNew, []byte(`"v":1`), []byte(`"v":2`), 1))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeAsyncRecord(b)
		if err != nil {
			v, verr := formatVersion(b)
			newer := verr == nil && v > recordVersion
			if newer != errors.Is(err, ErrNewerFormat) || !newer && !errors.Is(err, errBadRecord) {
				t.Fatalf("error %v: want ErrNewerFormat exactly for a newer version, else errBadRecord", err)
			}
			return
		}
		if !validAsyncID(r.ID) || !core.ValidContainer(r.Container) {
			t.Fatalf("accepted id %q container %q", r.ID, r.Container)
		}
		enc, err := r.Encode()
		if err != nil {
			t.Fatalf("Encode of an accepted record: %v", err)
		}
		r2, err := decodeAsyncRecord(enc)
		if err != nil {
			t.Fatalf("decode of %s: %v", enc, err)
		}
		enc2, err := r2.Encode()
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("round trip changed the record:\n%s\n%s (%v)", enc, enc2, err)
		}
		// Every member no field of this build takes is written back
		// with its value.
		var in, out map[string]any
		json.Unmarshal(b, &in)
		json.Unmarshal(enc, &out)
		fields := jsonFields(reflect.TypeFor[asyncRecord]())
		for k, v := range in {
			if _, _, known := fields.lookup(k); !known && !reflect.DeepEqual(out[k], v) {
				t.Fatalf("unknown member %q = %v in %s; written back as %v in %s", k, v, b, out[k], enc)
			}
		}
	})
}

func BenchmarkRecordRoundTrip(b *testing.B) {
	arrival := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	r := &asyncRecord{V: 1, ID: "0123456789abcdef0123456789abcdef", State: StateRunning, Container: "gateway-results",
		Arrival: arrival, Expiry: arrival.Add(time.Hour),
		Request:  requestSnapshot{Method: "POST", Path: "/jobs", Header: http.Header{"Content-Type": {"application/json"}}, IdempotencyKey: "k"},
		Attempts: []core.Attempt{{Host: "b", Status: 503, Outcome: core.OutcomeStatus, DurationMs: 12}},
		Claim:    &claimLease{Owner: "fedcba9876543210fedcba9876543210", Until: arrival.Add(time.Minute)},
	}
	b.ReportAllocs()
	for b.Loop() {
		enc, err := r.Encode()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := decodeAsyncRecord(enc); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzAsyncGarbage: whatever a record or an index entry holds (they come
// back from storage the gateway does not fully control), the sweep is told
// to delete only keys the object names for its own request, its own key
// last, and nothing before the end of the read grace.
func FuzzAsyncGarbage(f *testing.F) {
	arrival := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := &asyncRecord{V: 1, ID: strings.Repeat("ab", 16), State: StateSucceeded, Container: "u1-results",
		Arrival: arrival, Expiry: arrival.Add(time.Hour), Request: requestSnapshot{Method: "POST", Path: "/x"}}
	enc, _ := rec.Encode()
	entry, _ := json.Marshal(idempotencyEntry{V: 1, ID: rec.ID, ReadableUntil: arrival.Add(time.Hour + ReadGrace)})
	f.Add(asyncRecordKey(rec.ID), enc, int64(2*time.Hour))
	f.Add(asyncIdempotencyPrefix+"00ff", entry, int64(2*time.Hour))
	f.Add(asyncRecordKey(rec.ID), []byte(`{"v":1}`), int64(0))
	f.Add("u1-results/"+rec.ID+"/data", enc, int64(2*time.Hour))
	f.Fuzz(func(t *testing.T, key string, data []byte, after int64) {
		now := arrival.Add(time.Duration(after))
		keys := Garbage(key, data, now)
		if len(keys) == 0 {
			return
		}
		if keys[len(keys)-1] != key {
			t.Fatalf("Garbage(%q) = %q; want the object's own key last", key, keys)
		}
		switch {
		case strings.HasPrefix(key, asyncRecordsPrefix):
			r, err := decodeAsyncRecord(data)
			if err != nil {
				t.Fatalf("deletes for an undecodable record: %q", keys)
			}
			if now.Before(readEnd(r.Arrival, r.Expiry)) {
				t.Fatalf("deletes before the read grace ends: %q", keys)
			}
			want := []string{asyncBodyKey(r.ID), asyncDataKey(r.Container, r.ID), asyncHeaderKey(r.Container, r.ID), asyncRecordKey(r.ID)}
			if !slices.Equal(keys, want) {
				t.Fatalf("Garbage = %q; want only the request's own %q", keys, want)
			}
		case strings.HasPrefix(key, asyncIdempotencyPrefix):
			if len(keys) != 1 {
				t.Fatalf("an index entry deletes %q; want only itself", keys)
			}
		default:
			t.Fatalf("Garbage(%q) = %q for a key outside the swept prefixes", key, keys)
		}
	})
}

package core

import (
	"bytes"
	"errors"
	"net/http"
	"testing"
	"time"
)

// FuzzDecodeContinuation: the decoder never panics, refuses with
// ErrBadMessage, and what it accepts encodes back to the same message.
func FuzzDecodeContinuation(f *testing.F) {
	id := "0123456789abcdef0123456789abcdef"
	for _, s := range []string{
		`{"v":1,"id":"` + id + `"}`,
		` {"id":"` + id + `","v":1} `,
		`{"v":2,"id":"` + id + `"}`,
		`{"v":1,"id":"` + id + `","x":null}`,
		`{"v":1,"ID":"` + id + `"}`,
		`{"v":1,"id":"` + id + `"}{}`,
		`{"v":1.0,"id":"\u0030123456789abcdef0123456789abcdef"}`,
		`null`, `[]`, ``, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeContinuation(b)
		if err != nil {
			if !errors.Is(err, ErrBadMessage) {
				t.Fatalf("error %v does not wrap ErrBadMessage", err)
			}
			return
		}
		if !validAsyncID(c.ID) {
			t.Fatalf("accepted id %q", c.ID)
		}
		enc := c.Encode()
		c2, err := DecodeContinuation(enc)
		if err != nil || c2 != c {
			t.Fatalf("round trip of %q: %q gave %+v, %v", b, enc, c2, err)
		}
		if want := `{"v":1,"id":"` + c.ID + `"}`; string(enc) != want {
			t.Fatalf("Encode = %s; want %s", enc, want)
		}
	})
}

// FuzzDecodeRecord: the decoder never panics, refuses with ErrBadRecord,
// and what it accepts encodes and decodes back to the same encoding.
func FuzzDecodeRecord(f *testing.F) {
	arrival := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	full := &Record{V: 1, ID: "0123456789abcdef0123456789abcdef", State: StateRunning, Profile: "alice", Topic: "t",
		Container: "gateway-results", Arrival: arrival, Expiry: arrival.Add(time.Hour),
		Request: RequestSnapshot{Method: "POST", Path: "/a/b", RawQuery: "x=1", Header: http.Header{"A": {"1", "2"}},
			Host: "h", RemoteAddr: "1.2.3.4:5", Proto: "https", IdempotencyKey: "k", ClientKey: true, BodySize: 3},
		Attempts:    []Attempt{{Host: "b", Status: 503, Outcome: OutcomeStatus, DurationMs: 12}, {Host: "b", Outcome: OutcomeFunctionLimit}},
		Checkpoints: 1,
		Claim:       &Lease{Owner: "fedcba9876543210fedcba9876543210", Until: arrival.Add(time.Minute), Inflight: true},
	}
	done := *full
	done.State, done.Claim = StateSucceeded, nil
	done.Result = &RecordResult{Status: 200, CompletedAt: arrival.Add(2 * time.Minute)}
	minimal := &Record{V: 1, ID: full.ID, State: StateQueued, Container: "abc", Arrival: arrival, Expiry: arrival,
		Request: RequestSnapshot{Method: "GET", Path: "/"}}
	for _, r := range []*Record{full, &done, minimal} {
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
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRecord(b)
		if err != nil {
			if !errors.Is(err, ErrBadRecord) {
				t.Fatalf("error %v does not wrap ErrBadRecord", err)
			}
			return
		}
		if !validAsyncID(r.ID) || !validContainer(r.Container) {
			t.Fatalf("accepted id %q container %q", r.ID, r.Container)
		}
		enc, err := r.Encode()
		if err != nil {
			t.Fatalf("Encode of an accepted record: %v", err)
		}
		r2, err := DecodeRecord(enc)
		if err != nil {
			t.Fatalf("decode of %s: %v", enc, err)
		}
		enc2, err := r2.Encode()
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("round trip changed the record:\n%s\n%s (%v)", enc, enc2, err)
		}
	})
}

func BenchmarkRecordRoundTrip(b *testing.B) {
	arrival := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	r := &Record{V: 1, ID: "0123456789abcdef0123456789abcdef", State: StateRunning, Container: "gateway-results",
		Arrival: arrival, Expiry: arrival.Add(time.Hour),
		Request:  RequestSnapshot{Method: "POST", Path: "/jobs", Header: http.Header{"Content-Type": {"application/json"}}, IdempotencyKey: "k"},
		Attempts: []Attempt{{Host: "b", Status: 503, Outcome: OutcomeStatus, DurationMs: 12}},
		Claim:    &Lease{Owner: "fedcba9876543210fedcba9876543210", Until: arrival.Add(time.Minute)},
	}
	b.ReportAllocs()
	for b.Loop() {
		enc, err := r.Encode()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := DecodeRecord(enc); err != nil {
			b.Fatal(err)
		}
	}
}

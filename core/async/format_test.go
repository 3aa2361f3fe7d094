package async

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"fngateway/core"
)

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// editRecord rewrites the stored record of id with edit, as another release
// would have written it.
func (s *fakeStore) editRecord(tb testing.TB, id string, edit func([]byte) []byte) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objects[asyncRecordKey(id)]
	if !ok {
		tb.Fatalf("no record for %s", id)
	}
	s.storeLocked(asyncRecordKey(id), edit(o.data), "application/json")
}

// addMembers returns the JSON object b with the members of add (a JSON
// object's inside, without braces) put first.
func addMembers(b []byte, add string) []byte {
	return append([]byte("{"+add+","), b[1:]...)
}

// members decodes the JSON object b's members.
func members(tb testing.TB, b []byte) map[string]json.RawMessage {
	tb.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		tb.Fatalf("%s: %v", b, err)
	}
	return m
}

// TestRecordKeepsUnknownMembers: a record written by a later release, with
// members this build does not know (at the top level and in its request
// snapshot), is read, run to its result, and every rewrite of it (claim,
// result) writes those members back unchanged. Before, such a record was
// CorruptRecord: its status URI answered 500 and its request never ran.
func TestRecordKeepsUnknownMembers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newAsyncEnv(t, asyncOK)
		acc := e.submit(t, asyncRequest())
		msg := e.takeOne(t, 0)
		e.store.editRecord(t, acc.ID, func(b []byte) []byte {
			b = addMembers(b, `"requestId":"r-1","next":{"a":[1,2]}`)
			return bytes.Replace(b, []byte(`"request":{`), []byte(`"request":{"trailer":{"X":["1"]},`), 1)
		})
		if v, err := e.a.Status(context.Background(), acc.ID); err != nil || v.State != StateQueued {
			t.Fatalf("Status = %+v, %v; want queued", v, err)
		}
		if err := e.a.Process(context.Background(), msg); err != nil {
			t.Fatalf("Process = %v", err)
		}
		if h, body := e.result(t, acc.ID); h.Status != 200 || body != "done:hello" {
			t.Errorf("result = %d %q; want 200 done:hello", h.Status, body)
		}
		o, _ := e.store.object(asyncRecordKey(acc.ID))
		m := members(t, o.data)
		if got := string(m["requestId"]) + " " + string(m["next"]); got != `"r-1" {"a":[1,2]}` {
			t.Errorf("unknown members after the rewrites: %s; want \"r-1\" {\"a\":[1,2]}\n%s", got, o.data)
		}
		if got := string(members(t, m["request"])["trailer"]); got != `{"X":["1"]}` {
			t.Errorf("request.trailer after the rewrites = %s; want {\"X\":[\"1\"]}", got)
		}
		if string(m["state"]) != `"succeeded"` {
			t.Errorf("state = %s; want \"succeeded\"", m["state"])
		}
	})
}

// TestRecordUnknownMembers: which members are kept, and that a kept one
// never shadows a member this build writes.
func TestRecordUnknownMembers(t *testing.T) {
	arrival := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	base := must((&asyncRecord{V: 1, ID: strings.Repeat("ab", 16), State: StateQueued, Container: "abc",
		Arrival: arrival, Expiry: arrival.Add(time.Hour), Request: requestSnapshot{Method: "GET", Path: "/"}}).Encode())
	tests := []struct {
		name string
		add  string
		// want are the members expected in the rewrite besides this
		// build's, and gone those that must not be there.
		want map[string]string
		gone []string
	}{
		{"new members", `"requestId":"r","n":1,"o":{"p":null}`, map[string]string{"requestId": `"r"`, "n": "1", "o": `{"p":null}`}, nil},
		// encoding/json reads "STATE" into State: it is this build's
		// member, written back as "state" with the rewrite's value.
		{"a known member in another case", `"STATE":"running"`, map[string]string{"state": `"canceled"`}, []string{"STATE"}},
		{"a member cleared by the rewrite", `"zzz":true`, map[string]string{"zzz": "true"}, []string{"claim"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := decodeAsyncRecord(addMembers(base, tt.add))
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			r.State, r.Claim = StateCanceled, nil
			out, err := r.Encode()
			if err != nil {
				t.Fatal(err)
			}
			m := members(t, out)
			for k, v := range tt.want {
				if string(m[k]) != v {
					t.Errorf("member %s = %s; want %s\n%s", k, m[k], v, out)
				}
			}
			for _, k := range tt.gone {
				if _, ok := m[k]; ok {
					t.Errorf("member %s is in the rewrite\n%s", k, out)
				}
			}
			if r2, err := decodeAsyncRecord(out); err != nil || r2.State != StateCanceled {
				t.Errorf("decode of the rewrite: %v, %v", r2, err)
			}
		})
	}
	// Without unknown members the encoding is this build's own, as before.
	r, _ := decodeAsyncRecord(base)
	if out := must(r.Encode()); !bytes.Equal(out, base) {
		t.Errorf("rewrite of a record without unknown members:\n%s\nwant\n%s", out, base)
	}
}

// TestNewerFormatLeftForNewerBuild: a record or message in a format version
// newer than this build's is never consumed and the record never marked
// corrupt: Process returns an error wrapping ErrNewerFormat (not
// ErrBadMessage: the queue delivers it again), nothing is written, no
// OnError; Status is an error wrapping ErrNewerFormat, not CorruptRecord;
// and once the record is readable (the newer release rolled out again, or
// wrote it back) the same message finishes the request.
func TestNewerFormatLeftForNewerBuild(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newAsyncEnv(t, asyncOK)
		var reported []error
		e.a.OnError = func(_ context.Context, _ string, err error) { reported = append(reported, err) }
		acc := e.submit(t, asyncRequest())
		msg := e.takeOne(t, 0)
		var v1 []byte
		e.store.editRecord(t, acc.ID, func(b []byte) []byte {
			v1 = b
			return bytes.Replace(b, []byte(`"v":1`), []byte(`"v":2`), 1)
		})
		writes := e.store.writeCount()

		newerMsg := []byte(`{"v":2,"id":"` + acc.ID + `","route":"x"}`)
		for _, m := range [][]byte{msg, newerMsg} {
			err := e.a.Process(context.Background(), m)
			if !errors.Is(err, ErrNewerFormat) || errors.Is(err, ErrBadMessage) || errors.Is(err, ErrCorruptRecord) {
				t.Errorf("Process(%s) = %v; want an error wrapping ErrNewerFormat only", m, err)
			}
		}
		if e.store.writeCount() != writes || e.queue.size() != 0 || e.backend.count() != 0 || len(reported) != 0 {
			t.Errorf("writes %d → %d, queued %d, backend calls %d, reported %v; want nothing done",
				writes, e.store.writeCount(), e.queue.size(), e.backend.count(), reported)
		}
		if _, ok := e.store.object(asyncCorruptPrefix + acc.ID); ok {
			t.Errorf("the record was marked corrupt")
		}
		_, err := e.a.Status(context.Background(), acc.ID)
		var ge *core.Error
		if !errors.Is(err, ErrNewerFormat) || errors.As(err, &ge) {
			t.Errorf("Status = %v; want an error wrapping ErrNewerFormat, not a gateway error (503, not 500)", err)
		}
		if _, _, err := e.a.Cancel(context.Background(), acc.ID, nil); !errors.Is(err, ErrNewerFormat) {
			t.Errorf("Cancel = %v; want an error wrapping ErrNewerFormat", err)
		}

		e.store.editRecord(t, acc.ID, func([]byte) []byte { return v1 })
		if err := e.a.Process(context.Background(), msg); err != nil {
			t.Fatalf("Process once the record is readable = %v", err)
		}
		if h, _ := e.result(t, acc.ID); h.Status != 200 {
			t.Errorf("result status %d; want 200", h.Status)
		}
	})
}

// TestIdempotencyEntryFormats: an index entry with members this build does
// not know is still the key's entry (a resubmission gets the first
// Accepted), and one of a newer format is not taken over (before, any entry
// this build could not decode strictly was overwritten, and the request
// ran twice).
func TestIdempotencyEntryFormats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newAsyncEnv(t, asyncOK)
		acc := e.submit(t, asyncRequest())
		e.takeOne(t, 0)
		keys := e.store.keys("")
		var entry string
		for _, k := range keys {
			if strings.HasPrefix(k, asyncIdempotencyPrefix) {
				entry = k
			}
		}
		o, ok := e.store.object(entry)
		if !ok {
			t.Fatalf("no idempotency entry among %v", keys)
		}
		e.store.mu.Lock()
		e.store.storeLocked(entry, addMembers(o.data, `"scope":"s"`), "")
		e.store.mu.Unlock()
		again, err := e.a.engine().idempotency().replay(context.Background(), asyncRequest(), e.profile)
		if err != nil || again == nil || again.ID != acc.ID {
			t.Fatalf("replay with an unknown member = %+v, %v; want the first Accepted (%s)", again, err, acc.ID)
		}

		e.store.mu.Lock()
		e.store.storeLocked(entry, bytes.Replace(o.data, []byte(`"v":1`), []byte(`"v":2`), 1), "")
		e.store.mu.Unlock()
		writes := e.store.writeCount()
		_, err = e.a.engine().idempotency().replay(context.Background(), asyncRequest(), e.profile)
		var ge *core.Error
		if !errors.As(err, &ge) || ge.Reason != core.ReasonAsyncUnavailable || !errors.Is(err, ErrNewerFormat) {
			t.Errorf("replay with a newer entry = %v; want AsyncUnavailable wrapping ErrNewerFormat", err)
		}
		if e.store.writeCount() != writes {
			t.Errorf("the newer entry was written over")
		}
	})
}

// TestRedriveNewerFormat: a dead letter in a newer format, or whose record
// is, is reported as such and left, and does not stop the listing.
func TestRedriveNewerFormat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newAsyncEnv(t, asyncOK)
		ctx := context.Background()
		dl := &fakeDeadLetters{}
		r := &Redriver{Store: e.store, Queue: e.queue, DeadLetters: dl}
		acc := e.submit(t, asyncRequest())
		msg := e.takeOne(t, 0)
		e.store.editRecord(t, acc.ID, func(b []byte) []byte { return bytes.Replace(b, []byte(`"v":1`), []byte(`"v":3`), 1) })
		dl.add("m1", msg)
		dl.add("m2", []byte(`{"v":2,"id":"`+strings.Repeat("cd", 16)+`"}`))
		ls, err := r.List(ctx, time.Now())
		if err != nil {
			t.Fatalf("List = %v", err)
		}
		for _, l := range ls {
			if l.Verdict != VerdictNewer || l.Verdict.Sends() || l.Verdict.Removes() || !strings.Contains(l.LastError, "newer") {
				t.Errorf("letter %s: verdict %q (%s); want %q, not sent, left", l.ID, l.Verdict, l.LastError, VerdictNewer)
			}
		}
		if len(ls) != 2 {
			t.Errorf("listed %d letters; want 2", len(ls))
		}
	})
}

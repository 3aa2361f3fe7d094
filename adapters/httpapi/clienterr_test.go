package httpapi

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"fngateway/core"
)

// TestPublicMessage is the table of what an error may say to a client:
// the gateway's own message for what the client caused, a fixed text for
// what was caused inside, and never a wrapped error's text.
func TestPublicMessage(t *testing.T) {
	const leak = "https://acct.blob.core.windows.net/gateway/records/x.json tenant 1234"
	for _, c := range []struct {
		r         core.Reason
		msg       string
		wantShown bool // the message is shown as is
	}{
		{core.ReasonInvalidTTL, `header S7PTTL "x": want seconds`, true},
		{core.ReasonInvalidPath, `path "/a/../b": a .. segment`, true},
		{core.ReasonAttemptTimeout, "the last attempt ran out of its Timeout", true},
		{core.ReasonAsyncUnavailable, "the async hand-off could not be made durable: " + leak, false},
		{core.ReasonBackendAuthFailed, "get token: " + leak, false},
		{core.ReasonCorruptRecord, "the record " + leak, false},
		{core.ReasonNone, leak, false},
		{core.Reason(200), leak, false},
	} {
		got := PublicMessage(c.r, c.msg)
		if c.wantShown && got != c.msg || !c.wantShown && strings.Contains(got, "acct") {
			t.Errorf("PublicMessage(%s, %q) = %q; want shown %v", c.r.Code(), c.msg, got, c.wantShown)
		}
	}
	if got := PublicMessage(core.ReasonInvalidBody, strings.Repeat("x", 10<<10)); len(got) > MaxPublicMessage+len("…") {
		t.Errorf("a client's long message kept %d bytes; want at most %d", len(got), MaxPublicMessage)
	}
	var logged bytes.Buffer
	h := &Handler{Logger: slog.New(slog.NewJSONHandler(&logged, nil))}
	w := httptest.NewRecorder()
	h.fail(context.Background(), w, &core.Error{Reason: core.ReasonBackendAuthFailed, Err: errors.New(leak)}, &requestLog{})
	if strings.Contains(w.Body.String(), "acct") || w.Code != 502 {
		t.Errorf("BackendAuthFailed answered %d %s; want 502 naming nothing inside", w.Code, w.Body)
	}
	if !strings.Contains(logged.String(), "acct.blob") {
		t.Errorf("log %q; want the detail logged for the operator", logged.String())
	}
}

// TestClientLogRate: a burst of DefaultClientLogBurst lines, then
// DefaultClientLogRate a second; values capped; drops counted and reported
// on the next line.
func TestClientLogRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		l := slog.New(slog.NewJSONHandler(&out, nil))
		var c ClientLog
		for range 50 {
			c.Log(context.Background(), l, slog.LevelError, "bad", slog.String("body", strings.Repeat("x", 60<<10)))
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != DefaultClientLogBurst || c.Dropped() != 50-DefaultClientLogBurst {
			t.Errorf("50 lines at once: %d written, %d dropped; want %d, %d", len(lines), c.Dropped(), DefaultClientLogBurst, 50-DefaultClientLogBurst)
		}
		for _, ln := range lines {
			if len(ln) > MaxLogValue+200 {
				t.Errorf("a line of %d bytes; want its values capped to %d", len(ln), MaxLogValue)
			}
		}
		out.Reset()
		time.Sleep(time.Second / DefaultClientLogRate)
		c.Log(context.Background(), l, slog.LevelError, "bad")
		if !strings.Contains(out.String(), `"suppressed":30`) {
			t.Errorf("line after the drops: %q; want suppressed 30", out.String())
		}
	})
}

// FuzzPublicMessage: whatever the reason and message, the answer is
// bounded, and for a reason caused inside it is the fixed text, never any
// of the message.
func FuzzPublicMessage(f *testing.F) {
	f.Add(uint8(core.ReasonAsyncUnavailable), "store https://acct.blob.core.windows.net/x")
	f.Add(uint8(core.ReasonInvalidTTL), `header S7PTTL "x"`)
	f.Add(uint8(250), "héllo")
	f.Fuzz(func(t *testing.T, r uint8, msg string) {
		got := PublicMessage(core.Reason(r), msg)
		if len(got) > MaxPublicMessage+len("…") {
			t.Fatalf("PublicMessage(%d, …) is %d bytes", r, len(got))
		}
		if internal(core.Reason(r)) {
			if m, ok := internalMessages[core.Reason(r)]; ok && got != m || !ok && got != internalMessages[core.ReasonNone] {
				t.Fatalf("PublicMessage(%d, %q) = %q; want the fixed text", r, msg, got)
			}
		} else if msg != "" && !strings.HasPrefix(msg, strings.TrimSuffix(got, "…")) {
			t.Fatalf("PublicMessage(%d, %q) = %q; want the message, capped", r, msg, got)
		}
	})
}

package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"fngateway/core"
)

// sameAsJSONHandler logs rec through NewJSONLogHandler and through
// slog.NewJSONHandler and fails unless both wrote the same bytes.
func sameAsJSONHandler(t *testing.T, rec slog.Record, with func(slog.Handler) slog.Handler) {
	t.Helper()
	var got, want bytes.Buffer
	g, w := NewJSONLogHandler(&got), slog.Handler(slog.NewJSONHandler(&want, nil))
	if with != nil {
		g, w = with(g), with(w)
	}
	ctx := context.Background()
	if g.Enabled(ctx, rec.Level) != w.Enabled(ctx, rec.Level) {
		t.Fatalf("Enabled(%v) differs", rec.Level)
	}
	if err := g.Handle(ctx, rec.Clone()); err != nil {
		t.Fatal(err)
	}
	if err := w.Handle(ctx, rec.Clone()); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Fatalf("NewJSONLogHandler wrote\n%s\nslog.JSONHandler wrote\n%s", got.String(), want.String())
	}
	// The per-request path, handleAttrs, writes the same line.
	if jh, ok := g.(*jsonLogHandler); ok {
		got.Reset()
		var as []slog.Attr
		rec.Attrs(func(a slog.Attr) bool { as = append(as, a); return true })
		if err := jh.handleAttrs(ctx, rec.Time, rec.Level, rec.Message, as); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Fatalf("handleAttrs wrote\n%s\nslog.JSONHandler wrote\n%s", got.String(), want.String())
		}
	}
}

func TestJSONLogHandlerMatchesSlog(t *testing.T) {
	now := time.Date(2026, 11, 30, 11, 45, 1, 123456789, time.FixedZone("x", 3600))
	rec := func(level slog.Level, msg string, as ...slog.Attr) slog.Record {
		r := slog.NewRecord(now, level, msg, 0)
		r.AddAttrs(as...)
		return r
	}
	access := []slog.Attr{
		slog.String("method", "GET"), slog.String("path", "/a/<b>&\"c\"\\\n\t\r\x01\x7f\u2028\u2029é\xff"),
		slog.String("route", "/"), slog.Int("status", 200), slog.String("code", ""),
		slog.Int("attempts", 1), slog.String("deadline", "none"), slog.String("async", ""),
		slog.Int64("durationMs", -3), slog.String("err", "cut"), slog.Uint64("u", 1<<63), slog.Bool("b", true),
	}
	for name, c := range map[string]struct {
		r    slog.Record
		with func(slog.Handler) slog.Handler
	}{
		"access":     {r: rec(slog.LevelInfo, "request", access...)},
		"warn":       {r: rec(slog.LevelWarn, "request stream cut", access...)},
		"odd level":  {r: rec(slog.LevelInfo+2, "m\"sg")},
		"empty attr": {r: rec(slog.LevelError, "", slog.Attr{}, slog.String("", "k"), slog.Any("", nil))},
		"zero time":  {r: slog.NewRecord(time.Time{}, slog.LevelInfo, "x", 0)},
		"utc":        {r: rec(slog.LevelInfo, "x"), with: nil},
		"other kinds": {r: rec(slog.LevelInfo, "x", slog.Float64("f", 1.5), slog.Duration("d", time.Second),
			slog.Time("t", now), slog.Any("e", errors.New("boom")), slog.Any("m", map[string]int{"a": 1}))},
		"raw json": {r: rec(slog.LevelWarn, "request", slog.String("a", "b"),
			slog.Any("upstream", core.AttemptsJSON([]core.Attempt{{Host: "h<1>&:9", Outcome: core.OutcomeConnectError, Failure: core.FailureDNS, Phase: core.PhaseConnect}})),
			slog.Any("spaced", json.RawMessage(` [ 1 , {"x" : "<\u2028>"} ] `)))},
		"upstream": {r: rec(slog.LevelWarn, "request", slog.String("a", "b"),
			slog.Any("upstream", upstreamJSON{&[]core.Attempt{{Host: "h<1>&:9", Status: 503, Outcome: core.OutcomeStatus, DurationMs: 3},
				{Host: "\u2028\xff\"", Outcome: core.OutcomeConnectError, Failure: core.FailureDNS, Phase: core.PhaseConnect}}}))},
		"group":      {r: rec(slog.LevelInfo, "x", slog.Group("g", slog.Int("a", 1)))},
		"with attrs": {r: rec(slog.LevelInfo, "x", slog.Int("a", 1)), with: func(h slog.Handler) slog.Handler { return h.WithAttrs([]slog.Attr{slog.String("k", "v")}) }},
		"with group": {r: rec(slog.LevelInfo, "x", slog.Int("a", 1)), with: func(h slog.Handler) slog.Handler { return h.WithGroup("g") }},
		"debug":      {r: rec(slog.LevelDebug, "x")},
	} {
		t.Run(name, func(t *testing.T) { sameAsJSONHandler(t, c.r, c.with) })
	}
	utc := slog.NewRecord(now.UTC().Truncate(time.Second), slog.LevelInfo, "x", 0)
	sameAsJSONHandler(t, utc, nil)
}

// FuzzJSONLogHandler: for any message, key and string value, the short path
// writes what slog.JSONHandler writes.
func FuzzJSONLogHandler(f *testing.F) {
	f.Add("request", "path", "/a%2Fb", int64(7))
	f.Add("\u2028", "\x00", "\xff\xfe<>&", int64(-1))
	f.Fuzz(func(t *testing.T, msg, key, val string, n int64) {
		r := slog.NewRecord(time.Unix(1e9, n), slog.LevelInfo, msg, 0)
		r.AddAttrs(slog.String(key, val), slog.Int64(val, n), slog.String("k", key))
		sameAsJSONHandler(t, r, nil)
	})
}

// FuzzUpstreamJSON: the line's upstream array, appended by the short path
// (upstreamJSON), is what slog.JSONHandler writes of it, and decodes back
// to the attempts (strings as valid UTF-8).
func FuzzUpstreamJSON(f *testing.F) {
	f.Add("h:1", int64(3), "\u2028")
	f.Add("\xff<>&\"", int64(-1), "")
	f.Fuzz(func(t *testing.T, host string, ms int64, cause string) {
		tl := []core.Attempt{{Host: host, Status: 502, Outcome: core.OutcomeStatus, DurationMs: ms},
			{Host: host, Outcome: core.OutcomeTimeout, Failure: core.Failure(cause), Phase: core.PhaseHeaders}}
		r := slog.NewRecord(time.Unix(1e9, 0), slog.LevelInfo, "request", 0)
		r.AddAttrs(slog.Any("upstream", upstreamJSON{&tl}))
		sameAsJSONHandler(t, r, nil)
		var got []core.Attempt
		if err := json.Unmarshal(appendAttempts(nil, tl), &got); err != nil {
			t.Fatalf("upstream %s: %v", appendAttempts(nil, tl), err)
		}
		if len(got) != 2 || got[0].DurationMs != ms || got[1].Phase != core.PhaseHeaders || got[0].Host != string([]rune(host)) {
			t.Errorf("upstream decodes to %+v; want %+v", got, tl)
		}
	})
}

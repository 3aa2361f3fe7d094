package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"

	"fngateway/core"
)

// requestID returns the id of request r: the X-Request-Id a trusted proxy
// sent (core.ParseRequestID), else a new one (32 hex digits). A client's
// own X-Request-Id is not believed, as its X-Forwarded-* are not: it could
// pose as another request's lines. A new id comes with spare, a second
// fresh key made in the same allocation (for the Idempotency-Key); spare
// is empty for an id taken from the proxy.
func requestID(r *http.Request, trusted bool) (id, spare string) {
	if trusted {
		if v := r.Header["X-Request-Id"]; len(v) == 1 {
			if id, ok := core.ParseRequestID(v[0]); ok {
				return id, ""
			}
		}
	}
	return newKeyPair()
}

// upstreamAttrs returns what the per-request line says of the attempts
// (docs/observability.md): "upstream", every attempt's host, outcome,
// cause, phase and duration; and for a gateway timeout (504), the attempt
// it cut while waiting: "inFlightHost" and "inFlightPhase".
func upstreamAttrs(line []slog.Attr, lg *requestLog) []slog.Attr {
	if len(lg.timeline) == 0 {
		return line
	}
	up := lg.up
	if up == nil {
		tl := lg.timeline // a copy: &lg.timeline would move lg to the heap
		up = &tl
	}
	line = append(line, slog.Any("upstream", upstreamJSON{up}))
	if lg.status == http.StatusGatewayTimeout && lg.code != "" {
		if a, ok := core.InFlight(lg.timeline); ok {
			line = append(line, slog.String("inFlightHost", a.Host), slog.String("inFlightPhase", string(a.Phase)))
		}
	}
	return line
}

// upstreamJSON is the line's upstream array: the attempts tl points to,
// as core.AttemptsJSON gives them. It holds only a pointer, so making it a
// slog.Value allocates nothing; the gateway's JSON handler appends the
// array straight into its line (appendAttr), any other handler gets it
// resolved to a json.RawMessage.
type upstreamJSON struct{ tl *[]core.Attempt }

// LogValue implements slog.LogValuer.
func (u upstreamJSON) LogValue() slog.Value {
	return slog.AnyValue(json.RawMessage(appendAttempts(make([]byte, 0, 128*len(*u.tl)), *u.tl)))
}

// logLevel is the level of the per-request line: WARN for an answer the
// gateway made with a 5xx status, or a stream it cut; INFO otherwise.
func (lg *requestLog) logLevel() (slog.Level, string) {
	switch {
	case lg.code == "StreamCut" || lg.code == "BackendCut" || lg.code == "ResponseTooLarge" && lg.err != "":
		return slog.LevelWarn, "request stream cut"
	case lg.code != "" && lg.status >= 500:
		return slog.LevelWarn, "request"
	}
	return slog.LevelInfo, "request"
}

// appendAttempts appends the timeline as the JSON array core.AttemptsJSON
// gives (the same members, strings escaped as the log line's own), without
// encoding/json's reflection: it runs on every request line.
func appendAttempts(b []byte, tl []core.Attempt) []byte {
	b = append(b, '[')
	for i, a := range tl {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"host":`...)
		b = appendJSONString(b, a.Host)
		if a.Status != 0 {
			b = append(b, `,"status":`...)
			b = strconv.AppendInt(b, int64(a.Status), 10)
		}
		b = append(b, `,"outcome":`...)
		b = appendJSONString(b, string(a.Outcome))
		b = append(b, `,"durationMs":`...)
		b = strconv.AppendInt(b, a.DurationMs, 10)
		if a.Failure != "" {
			b = append(b, `,"cause":`...)
			b = appendJSONString(b, string(a.Failure))
		}
		if a.Phase != "" {
			b = append(b, `,"phase":`...)
			b = appendJSONString(b, string(a.Phase))
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

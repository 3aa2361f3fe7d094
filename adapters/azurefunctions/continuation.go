package azurefunctions

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"fngateway/adapters/httpapi"
	"fngateway/core"
	"fngateway/core/async"
)

// BindingName is the queue trigger's binding name in
// continuation/function.json: the key of the message in the invocation's
// Data.
const BindingName = "message"

// maxInvocationBytes bounds a continuation invocation's body: a message is
// at most 4 KiB (core's limit; real ones are ~60 bytes) and the metadata
// a few hundred bytes.
const maxInvocationBytes = 64 << 10

// ErrBadInvocation is wrapped by DecodeInvocation's errors: the body is not
// the host's queue-trigger envelope.
var ErrBadInvocation = errors.New("bad continuation invocation")

// Invocation is what a queue-triggered invocation carries.
type Invocation struct {
	// Message is the queue message's text (the host has already decoded
	// the queue's base64).
	Message []byte
	// MessageID and DequeueCount are the message's, from Metadata
	// (DequeueCount 0 when absent or unreadable).
	MessageID    string
	DequeueCount int
	// InsertedAt is when the message was added to the queue (Metadata's
	// InsertionTime, the queue trigger's message metadata); zero when the
	// host did not say or said it in a form this does not read.
	InsertedAt time.Time
	// MetadataErr names the metadata fields that were missing or could not
	// be read (InsertionTime, DequeueCount), "" when none. None fails the
	// invocation: the message is run all the same.
	MetadataErr string
}

// QueueAge is how long the message waited in the queue before this
// delivery reached the gateway at now: now − InsertedAt, never negative
// (the host's clock and this instance's may differ). ok is false when
// InsertedAt is unknown.
func (inv Invocation) QueueAge(now time.Time) (age time.Duration, ok bool) {
	if inv.InsertedAt.IsZero() {
		return 0, false
	}
	return max(now.Sub(inv.InsertedAt), 0), true
}

// insertionTime reads Metadata.InsertionTime: an RFC 3339 time (the host
// writes a DateTimeOffset, "2024-05-01T10:00:00+00:00"), as a JSON string,
// possibly quoted once more as DequeueCount may be. An absent or
// unreadable value is an error naming it, for the log line.
func insertionTime(raw json.RawMessage) (time.Time, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return time.Time{}, errors.New("Metadata.InsertionTime is missing")
	}
	var text string
	if err := json.Unmarshal(raw, &text); err != nil {
		return time.Time{}, fmt.Errorf("Metadata.InsertionTime %.40q is not a string", raw)
	}
	text = strings.Trim(text, `" `)
	t, err := time.Parse(time.RFC3339Nano, text)
	if err != nil {
		return time.Time{}, fmt.Errorf("Metadata.InsertionTime %.40q is not an RFC 3339 time", text)
	}
	return t, nil
}

// DecodeInvocation reads the host's request payload for a queue-triggered
// custom-handler function:
//
//	{"Data":{"message":"{\"v\":1,\"id\":\"…\"}"},
//	 "Metadata":{"DequeueCount":1,"Id":"…","InsertionTime":"…","PopReceipt":"…","sys":{…},…}}
//
// Metadata the message does not need to run (InsertionTime, DequeueCount),
// missing or malformed, is reported in MetadataErr, not as an error.
//
// The message text arrives as a JSON string, or, when the text is itself
// JSON, possibly as that JSON value: an object is taken as the message's
// text. Any other shape is an error wrapping ErrBadInvocation.
func DecodeInvocation(body []byte) (Invocation, error) {
	var env struct {
		Data     map[string]json.RawMessage `json:"Data"`
		Metadata struct {
			DequeueCount  json.RawMessage `json:"DequeueCount"`
			ID            string          `json:"Id"`
			InsertionTime json.RawMessage `json:"InsertionTime"`
		} `json:"Metadata"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return Invocation{}, fmt.Errorf("%w: %v", ErrBadInvocation, err)
	}
	raw, ok := env.Data[BindingName]
	if !ok {
		return Invocation{}, fmt.Errorf("%w: no Data.%s", ErrBadInvocation, BindingName)
	}
	inv := Invocation{MessageID: env.Metadata.ID}
	var problems []string
	if n := bytes.Trim(env.Metadata.DequeueCount, `" `); len(n) > 0 {
		c, err := strconv.Atoi(string(n))
		if err != nil || c < 0 {
			problems = append(problems, fmt.Sprintf("Metadata.DequeueCount %.20q is not a count", n))
		} else {
			inv.DequeueCount = c
		}
	}
	if t, err := insertionTime(env.Metadata.InsertionTime); err != nil {
		problems = append(problems, err.Error())
	} else {
		inv.InsertedAt = t
	}
	inv.MetadataErr = strings.Join(problems, "; ")
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) > 0 && raw[0] == '"':
		var text string
		if err := json.Unmarshal(raw, &text); err != nil {
			return Invocation{}, fmt.Errorf("%w: Data.%s: %v", ErrBadInvocation, BindingName, err)
		}
		inv.Message = []byte(text)
	case len(raw) > 0 && raw[0] == '{':
		inv.Message = raw
	default:
		return Invocation{}, fmt.Errorf("%w: Data.%s is %.20q; want the message text as a string or an object", ErrBadInvocation, BindingName, raw)
	}
	return inv, nil
}

// invokeResponse is the custom handler's response payload.
type invokeResponse struct {
	Outputs     map[string]any `json:"Outputs"`
	Logs        []string       `json:"Logs"`
	ReturnValue any            `json:"ReturnValue"`
}

// serveContinuation runs one queue-triggered invocation. A 2xx settles the
// message; anything else fails the invocation and the host delivers the
// message again (after host.json's visibilityTimeout), then moves it to
// the poison queue after maxDequeueCount deliveries:
//
//   - done, or a message for an unknown or finished request: 200;
//   - an envelope or message that cannot be decoded: 400 / 422, so it
//     ends in the poison queue, kept for an operator;
//   - async off, a store or queue error: 503, delivered again;
//   - a message or record in a newer release's format (async.ErrNewerFormat):
//     503, delivered again, for an instance that can read it.
//
// A client can reach this path too, so what it answers says nothing of the
// inside (a store error's URL, account or record path is logged, never
// answered), and its log lines go through the bounded client log
// (httpapi.ClientLog): values capped, lines rate-limited, drops counted.
func (s *Server) serveContinuation(w http.ResponseWriter, r *http.Request, arrival time.Time) {
	log := s.logger()
	clog := s.clientLog()
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.answer(w, http.StatusMethodNotAllowed, ContinuationPath+" is the continuation function's: it answers POST from the Functions host")
		return
	}
	ctx := r.Context()
	body, err := io.ReadAll(io.LimitReader(r.Body, maxInvocationBytes+1))
	if err == nil && len(body) > maxInvocationBytes {
		err = fmt.Errorf("%w: body over %d bytes", ErrBadInvocation, maxInvocationBytes)
	}
	var inv Invocation
	if err == nil {
		inv, err = DecodeInvocation(body)
	}
	var attrs []slog.Attr
	if err != nil {
		clog.Log(ctx, log, slog.LevelError, "undecodable continuation invocation", append(attrs,
			slog.Int("bytes", len(body)),
			slog.String("body", base64.StdEncoding.EncodeToString(body[:min(len(body), 3*httpapi.MaxLogValue/4)])), slog.String("err", err.Error()))...)
		s.answer(w, http.StatusBadRequest, httpapi.LogValue(err.Error(), httpapi.MaxPublicMessage))
		return
	}
	attrs = append(attrs, slog.String("messageId", httpapi.LogValue(inv.MessageID, httpapi.MaxLogValue)), slog.Int("dequeueCount", inv.DequeueCount))
	// How long the continuation waited in the queue: Azure Queue Storage
	// has no age metric, so the workbook and the continuation-age alert
	// read this field.
	if age, ok := inv.QueueAge(arrival); ok {
		attrs = append(attrs, slog.Int64("queueAgeMs", age.Milliseconds()))
	}
	if inv.MetadataErr != "" {
		attrs = append(attrs, slog.String("metadataErr", httpapi.LogValue(inv.MetadataErr, httpapi.MaxLogValue)))
	}
	if s.Continuations == nil {
		msg := "async is off (AsyncModeEnabled=false): the continuation is left to the queue's retries and poison queue"
		clog.Log(ctx, log, slog.LevelError, "continuation not run", append(attrs, slog.String("err", msg))...)
		s.answer(w, http.StatusServiceUnavailable, msg)
		return
	}
	if s.Limits.Invocation > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, arrival.Add(s.Limits.Invocation))
		defer cancel()
	}
	err = s.Continuations.Process(ctx, inv.Message)
	attrs = append(attrs, slog.Int64("durationMs", time.Since(arrival).Milliseconds()))
	switch {
	case err == nil:
		log.LogAttrs(ctx, slog.LevelInfo, "continuation", append(attrs, slog.Int("status", http.StatusOK))...)
		s.answer(w, http.StatusOK, "continuation message "+httpapi.LogValue(inv.MessageID, httpapi.MaxLogValue)+" settled")
	case errors.Is(err, async.ErrBadMessage):
		clog.Log(ctx, log, slog.LevelError, "undecodable continuation message", append(attrs,
			slog.Int("status", http.StatusUnprocessableEntity), slog.Int("bytes", len(inv.Message)),
			slog.String("body", base64.StdEncoding.EncodeToString(inv.Message[:min(len(inv.Message), 3*httpapi.MaxLogValue/4)])), slog.String("err", err.Error()))...)
		s.answer(w, http.StatusUnprocessableEntity, httpapi.PublicMessage(core.ReasonInvalidBody, err.Error()))
	case errors.Is(err, async.ErrNewerFormat):
		// Written by a newer release (instances of two versions side by
		// side, or a rollback): a non-2xx answer leaves the message on the
		// queue for an instance that can read it.
		clog.Log(ctx, log, slog.LevelWarn, "continuation left for a newer release: its format is newer than this build reads; the queue will deliver it again", append(attrs,
			slog.Int("status", http.StatusServiceUnavailable), slog.String("err", err.Error()))...)
		s.answer(w, http.StatusServiceUnavailable, "the continuation is in a newer format than this instance reads; the queue will deliver it again")
	default:
		// The detail (a store URL, a record path) is the operator's.
		clog.Log(ctx, log, slog.LevelWarn, "continuation failed; the queue will deliver it again", append(attrs,
			slog.Int("status", http.StatusServiceUnavailable), slog.String("err", err.Error()))...)
		s.answer(w, http.StatusServiceUnavailable, "the continuation could not run now; the queue will deliver it again")
	}
}

// answer writes the response payload the host expects, with one log line.
func (s *Server) answer(w http.ResponseWriter, status int, line string) {
	b, _ := json.Marshal(invokeResponse{Outputs: map[string]any{}, Logs: []string{line}, ReturnValue: nil})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// clientLog is the bounded log of the lines a client can cause: the
// gateway's (httpapi.Handler.ClientLog), so that its drops are counted in
// /_gateway/stats, or the Server's own.
func (s *Server) clientLog() *httpapi.ClientLog {
	if g, ok := s.Gateway.(interface{ ClientLog() *httpapi.ClientLog }); ok {
		return g.ClientLog()
	}
	return &s.ownLog
}

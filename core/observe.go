package core

import (
	"context"
	"net/http"
	"time"
)

// Observer receives the events of a request's life that telemetry records
// (docs/observability.md#spans): attempts, the backoff waits between them, the async
// hand-off, and a continuation resumed in a later invocation. Core calls it
// only when one is set (a nil Observer costs a nil check); the OpenTelemetry
// implementation lives in infra/otel. The server span of a request is the
// HTTP face's, which puts it in the request's context; the events below find
// it there.
//
// Implementations must be safe for concurrent use and must not block:
// they run on the request's path.
type Observer interface {
	// EndRequest is called once a request's answer is over, with what the
	// per-request log line says, in the request's context (which carries
	// its server span).
	EndRequest(ctx context.Context, e RequestEnd)
	// StartAttempt is called as an attempt is sent, with the attempt's
	// context and its outgoing header, to which the observer adds the
	// propagation headers (traceparent, tracestate) naming the attempt. The
	// returned function is called once the attempt has its answer's
	// headers or has failed, with its timeline entry; never nil.
	StartAttempt(ctx context.Context, a AttemptStart, out http.Header) (end func(Attempt))
	// Backoff records the wait of length d started at start before attempt
	// n+1.
	Backoff(ctx context.Context, n int, start time.Time, d time.Duration)
	// TraceContext returns the context's trace as a string to store with a
	// continuation record ("" when there is none).
	TraceContext(ctx context.Context) string
	// StartHandoff is called as a request is made durable for async; the
	// returned context carries the hand-off, and end is called with the
	// async id ("" when none) and the error, if any.
	StartHandoff(ctx context.Context) (context.Context, func(id string, err error))
	// StartContinuation is called as a continuation starts to work on
	// request id in a later invocation; trace is what TraceContext gave at
	// the hand-off. The returned context carries the continuation: the
	// resumed attempts and the result write nest in it; resumed is the
	// number of attempts made before. end is called when the continuation
	// is done with.
	StartContinuation(ctx context.Context, id, trace string, resumed int) (context.Context, func())
	// StartResultWrite is called as a continuation writes the outcome of
	// its attempts (the result, or a hand-on to the next invocation).
	StartResultWrite(ctx context.Context, id string) (end func(err error))
}

// RequestEnd describes how a request ended.
type RequestEnd struct {
	// Route is the matched route's prefix; Status the answer's status
	// (499: the client left); Code the gateway's error code, if any.
	Route  string
	Status int
	Code   string
	// Attempts is the number of attempts; Deadline the deadline that
	// ended the request ("ttl", "timeout", "function-limit", "idle",
	// "none"); Async the async id of a request handed off.
	Attempts int
	Deadline string
	Async    string
	Duration time.Duration
}

// AttemptStart describes an attempt as it starts.
type AttemptStart struct {
	// N is the attempt's number within this invocation's Forward call,
	// from 1.
	N int
	// Host is the backend's host[:port]; Method and Path what is sent
	// (Path without the query).
	Host, Method, Path, Scheme string
	// Budget is the attempt's window (x-envoy-expected-rq-timeout-ms) and
	// Cause the deadline that bounds it.
	Budget time.Duration
	Cause  Cause
}

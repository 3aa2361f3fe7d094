package otel

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"fngateway/core"
)

// The span attributes of the gateway's own (docs/observability.md#spans), beside the HTTP
// semantic conventions'.
const (
	attrAttempt   = "gateway.attempt"         // the attempt's number, from 1
	attrBudgetMs  = "gateway.budget_ms"       // x-envoy-expected-rq-timeout-ms
	attrBoundBy   = "gateway.budget_bound_by" // the deadline bounding the budget
	attrDeadline  = "gateway.deadline"        // the deadline that ended it: ttl, timeout, function-limit, idle, none
	attrOutcome   = "gateway.outcome"         // status, timeout, connect-error, function-limit
	attrCode      = "gateway.error_code"      // the gateway's error code
	attrAttempts  = "gateway.attempts"        // attempts of the request
	attrAsyncID   = "gateway.async.id"        // the async request's id
	attrResumed   = "gateway.async.resumed_attempts"
	attrBackoffMs = "gateway.backoff_ms"
)

// EndRequest names the request's server span after its route, sets its
// outcome and records the request duration.
func (t *Telemetry) EndRequest(ctx context.Context, e core.RequestEnd) {
	span := trace.SpanFromContext(ctx)
	route := e.Route
	if route == "" {
		route = "/"
	}
	if span.IsRecording() {
		attrs := []attribute.KeyValue{
			attribute.String("http.route", route),
			attribute.Int("http.response.status_code", e.Status),
			attribute.Int(attrAttempts, e.Attempts),
			attribute.String(attrDeadline, e.Deadline),
		}
		if e.Code != "" {
			attrs = append(attrs, attribute.String(attrCode, e.Code))
		}
		if e.Async != "" {
			attrs = append(attrs, attribute.String(attrAsyncID, e.Async))
		}
		span.SetAttributes(attrs...)
		if ro, ok := span.(interface{ Name() string }); ok {
			span.SetName(ro.Name() + " " + route)
		}
		if e.Status >= 500 || e.Code == "StreamCut" || e.Code == "BackendCut" {
			span.SetStatus(codes.Error, e.Code)
		}
	}
	if t.reqDuration != nil {
		set := t.requestSets.get(attrKey{a: route, b: e.Code, c: e.Deadline, n: e.Status}, func(k attrKey) attribute.Set {
			return attribute.NewSet(attribute.String("http.route", k.a), attribute.Int("http.response.status_code", k.n),
				attribute.String(attrCode, k.b), attribute.String(attrDeadline, k.c))
		})
		t.reqDuration.Record(ctx, e.Duration.Seconds(), metric.WithAttributeSet(set))
	}
}

// StartAttempt starts the attempt's client span, a child of the request's
// (or continuation's) span, and puts its traceparent in out.
func (t *Telemetry) StartAttempt(ctx context.Context, a core.AttemptStart, out http.Header) func(core.Attempt) {
	start := time.Now()
	host, port := splitHost(a.Host)
	if port == "" {
		port = "80"
		if a.Scheme == "https" {
			port = "443"
		}
	}
	method := spanMethod(a.Method)
	ctx, span := t.tracer.Start(ctx, method, trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(start))
	if span.IsRecording() {
		n := t.limits.valueLength
		span.SetAttributes(
			attribute.String("http.request.method", method),
			attribute.String("server.address", host),
			attribute.String("server.port", port),
			attribute.String("url.full", capValue(a.Scheme+"://"+a.Host+a.Path, n)), // never the query
			attribute.Int("http.request.resend_count", a.N-1),
			attribute.Int(attrAttempt, a.N),
			attribute.Int64(attrBudgetMs, max(a.Budget.Milliseconds(), 1)),
			attribute.String(attrBoundBy, a.Cause.String()),
		)
	}
	t.prop.Inject(ctx, propagation.HeaderCarrier(out))
	return func(r core.Attempt) {
		deadline := "none"
		if r.Outcome == core.OutcomeTimeout || r.Outcome == core.OutcomeFunctionLimit {
			deadline = r.Cause.String()
		}
		if span.IsRecording() {
			span.SetAttributes(attribute.String(attrOutcome, string(r.Outcome)), attribute.String(attrDeadline, deadline))
			if r.Status != 0 {
				span.SetAttributes(attribute.Int("http.response.status_code", r.Status))
			}
			switch {
			case r.Outcome == core.OutcomeConnectError:
				span.SetAttributes(attribute.String("error.type", "connect-error"))
				span.SetStatus(codes.Error, "connect-error")
			case r.Outcome != core.OutcomeStatus:
				span.SetAttributes(attribute.String("error.type", "timeout"))
				span.SetStatus(codes.Error, "deadline "+deadline)
			case r.Status >= 500:
				span.SetAttributes(attribute.String("error.type", strconv.Itoa(r.Status)))
				span.SetStatus(codes.Error, "")
			}
		}
		end := time.Now()
		span.End(trace.WithTimestamp(end))
		if t.attemptDur != nil {
			set := t.attemptSets.get(attrKey{a: host, b: string(r.Outcome), c: deadline, n: r.Status}, func(k attrKey) attribute.Set {
				return attribute.NewSet(attribute.String("server.address", k.a), attribute.String(attrOutcome, k.b),
					attribute.String(attrDeadline, k.c), attribute.Int("http.response.status_code", k.n))
			})
			t.attemptDur.Record(ctx, end.Sub(start).Seconds(), metric.WithAttributeSet(set))
		}
	}
}

// Backoff records the wait before attempt n+1 as a span of its own.
func (t *Telemetry) Backoff(ctx context.Context, n int, start time.Time, d time.Duration) {
	_, span := t.tracer.Start(ctx, "backoff", trace.WithTimestamp(start),
		trace.WithAttributes(attribute.Int(attrAttempt, n+1), attribute.Int64(attrBackoffMs, d.Milliseconds())))
	span.End(trace.WithTimestamp(start.Add(d)))
}

// TraceContext returns the span context of ctx as "<traceparent>" or
// "<traceparent> <tracestate>" ("" when there is none): a traceparent
// holds no space.
func (t *Telemetry) TraceContext(ctx context.Context) string {
	c := propagation.MapCarrier{}
	t.prop.Inject(ctx, c)
	tp := c["traceparent"]
	if tp == "" {
		return ""
	}
	if ts := c["tracestate"]; ts != "" {
		return tp + " " + ts
	}
	return tp
}

// spanContextOf parses what TraceContext wrote; invalid when it does not
// parse.
func (t *Telemetry) spanContextOf(s string) trace.SpanContext {
	tp, ts, _ := strings.Cut(s, " ")
	c := propagation.MapCarrier{"traceparent": tp}
	if ts != "" {
		c["tracestate"] = ts
	}
	return trace.SpanContextFromContext(t.prop.Extract(context.Background(), c))
}

// StartHandoff starts the span of an async hand-off.
func (t *Telemetry) StartHandoff(ctx context.Context) (context.Context, func(string, error)) {
	ctx, span := t.tracer.Start(ctx, "async hand-off", trace.WithSpanKind(trace.SpanKindProducer))
	return ctx, func(id string, err error) {
		if id != "" {
			span.SetAttributes(attribute.String(attrAsyncID, id))
		}
		if err != nil {
			span.SetStatus(codes.Error, capValue(err.Error(), t.limits.valueLength))
		}
		span.End()
	}
}

// StartContinuation starts the span of a continuation in a later
// invocation, linked to the request's span (trace). It is a child of the
// span in ctx when the platform started one (a queue trigger's), and
// otherwise of the request's span, so that the request's trace holds the
// whole story.
func (t *Telemetry) StartContinuation(ctx context.Context, id, tc string, resumed int) (context.Context, func()) {
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String(attrAsyncID, id), attribute.Int(attrResumed, resumed))}
	parent := ctx
	if sc := t.spanContextOf(tc); sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
		if !trace.SpanContextFromContext(ctx).IsValid() {
			parent = trace.ContextWithRemoteSpanContext(ctx, sc)
		}
	}
	ctx, span := t.tracer.Start(parent, "async continuation", opts...)
	if t.continuations != nil {
		t.continuations.Add(ctx, 1)
	}
	return ctx, func() { span.End() }
}

// StartResultWrite starts the span of a continuation's result write.
func (t *Telemetry) StartResultWrite(ctx context.Context, id string) func(error) {
	_, span := t.tracer.Start(ctx, "async result write", trace.WithAttributes(attribute.String(attrAsyncID, id)))
	return func(err error) {
		outcome := "ok"
		if err != nil {
			outcome = "error"
			span.SetStatus(codes.Error, capValue(err.Error(), t.limits.valueLength))
		}
		span.End()
		if t.resultWrites != nil {
			t.resultWrites.Add(ctx, 1, metric.WithAttributes(attribute.String(attrOutcome, outcome)))
		}
	}
}

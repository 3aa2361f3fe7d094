// Package otel exports the gateway's traces and metrics over OTLP/HTTP with
// the OpenTelemetry Go SDK (docs/observability.md#opentelemetry). It implements core.Observer (the
// attempt, backoff, hand-off and continuation spans), wraps the HTTP face
// with the server span of each request, adds trace and span ids to log
// lines, and publishes the /_gateway/stats counters as metrics.
//
// It is configured only by OpenTelemetry's standard environment variables
// (OTEL_EXPORTER_OTLP_ENDPOINT and the per-signal ones, OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER(_ARG), OTEL_SDK_DISABLED),
// which the caller passes in as a lookup function: without an endpoint New
// returns nil and nothing is created.
package otel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"fngateway/core"
)

// ScopeName is the instrumentation scope of the gateway's spans and metrics.
const ScopeName = "fngateway"

// Options configure New.
type Options struct {
	// Lookup reads an environment variable (os.LookupEnv). Required.
	Lookup func(string) (string, bool)
	// Resource holds the host's resource attributes (cloud.provider,
	// faas.name, faas.instance, cloud.region); OTEL_RESOURCE_ATTRIBUTES and
	// OTEL_SERVICE_NAME override them.
	Resource map[string]string
	// PerInvocation selects the export of a host frozen between
	// invocations (Lambda): spans are held until Flush exports them, and
	// metrics are exported only by Flush. Otherwise spans go out in
	// batches and metrics every OTEL_METRIC_EXPORT_INTERVAL (60 s).
	PerInvocation bool
	// Stats are the counters published as metrics; nil publishes none.
	Stats *core.Stats
	// Gauges read the current values of the gateway's gauges; nil ones
	// are not published.
	BufferedBytes, BusySlots func() int64
}

// Telemetry is the gateway's OpenTelemetry: a core.Observer, an HTTP
// middleware and a log handler wrapper. Safe for concurrent use.
type Telemetry struct {
	tp     *sdktrace.TracerProvider // nil: traces off
	mp     *sdkmetric.MeterProvider // nil: metrics off
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	held   *heldSpans // PerInvocation only
	limits limits

	inFlight       atomic.Int64
	requestSets    setCache            // the attribute sets of reqDuration
	attemptSets    setCache            // and of attemptDur
	continuations  metric.Int64Counter // async continuations started
	resultWrites   metric.Int64Counter // by gateway.outcome: ok, error
	reqDuration    metric.Float64Histogram
	attemptDur     metric.Float64Histogram
	droppedMetrics atomic.Int64
}

var _ core.Observer = (*Telemetry)(nil)

// Enabled reports whether the environment asks for any export: an OTLP
// endpoint for traces or metrics is set and OTEL_SDK_DISABLED is not true.
func Enabled(lookup func(string) (string, bool)) (traces, metrics bool) {
	if v, _ := lookup("OTEL_SDK_DISABLED"); strings.EqualFold(strings.TrimSpace(v), "true") {
		return false, false
	}
	set := func(k string) bool { v, _ := lookup(k); return strings.TrimSpace(v) != "" }
	all := set("OTEL_EXPORTER_OTLP_ENDPOINT")
	return all || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), all || set("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
}

// New builds the exporters the environment names. It returns nil, nil when
// no endpoint is set (or OTEL_SDK_DISABLED=true): then nothing is created.
// The exporters read the OTEL_EXPORTER_OTLP_* variables themselves.
func New(ctx context.Context, o Options) (*Telemetry, error) {
	traces, metrics := Enabled(o.Lookup)
	if !traces && !metrics {
		return nil, nil
	}
	attrs := make([]attribute.KeyValue, 0, len(o.Resource)+1)
	for k, v := range o.Resource {
		if v != "" {
			attrs = append(attrs, attribute.String(k, v))
		}
	}
	if _, ok := o.Lookup("OTEL_SERVICE_NAME"); !ok {
		attrs = append(attrs, attribute.String("service.name", "fngateway"))
	}
	// Later options win: the environment over the host's attributes.
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("otel resource: %w", err)
	}
	lim, err := readLimits(o.Lookup)
	if err != nil {
		return nil, err
	}
	t := &Telemetry{prop: propagation.TraceContext{}, limits: lim}
	if traces {
		exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(signalEndpoint(o.Lookup, "TRACES", "/v1/traces")))
		if err != nil {
			return nil, fmt.Errorf("otel trace exporter: %w", err)
		}
		opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res), sdktrace.WithRawSpanLimits(lim.spanLimits())}
		// The spans waiting for export are bounded in number and, by the
		// span limits, in size (docs/observability.md).
		if o.PerInvocation {
			t.held = &heldSpans{exp: exp, max: lim.queue}
			opts = append(opts, sdktrace.WithSpanProcessor(t.held))
		} else {
			opts = append(opts, sdktrace.WithBatcher(exp, sdktrace.WithMaxQueueSize(lim.queue), sdktrace.WithMaxExportBatchSize(lim.batch)))
		}
		t.tp = sdktrace.NewTracerProvider(opts...) // OTEL_TRACES_SAMPLER(_ARG) read here
		t.tracer = t.tp.Tracer(ScopeName)
	} else {
		t.tracer = noop.NewTracerProvider().Tracer(ScopeName)
	}
	if metrics {
		exp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(signalEndpoint(o.Lookup, "METRICS", "/v1/metrics")))
		if err != nil {
			return nil, fmt.Errorf("otel metric exporter: %w", err)
		}
		var ropts []sdkmetric.PeriodicReaderOption
		if o.PerInvocation {
			// Exported by Flush at the end of each invocation; the
			// interval only matters if an invocation never ends.
			ropts = append(ropts, sdkmetric.WithInterval(24*time.Hour))
		}
		t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, ropts...)))
		if err := t.instruments(o); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// signalEndpoint returns the URL a signal is exported to, as the OTLP
// exporter specification says: OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT as is,
// else OTEL_EXPORTER_OTLP_ENDPOINT with the signal's path appended. The
// exporters read the other OTEL_EXPORTER_OTLP_* variables (headers,
// timeout, compression) from the process environment themselves.
func signalEndpoint(lookup func(string) (string, bool), signal, path string) string {
	if v, _ := lookup("OTEL_EXPORTER_OTLP_" + signal + "_ENDPOINT"); strings.TrimSpace(v) != "" {
		return strings.TrimSpace(v)
	}
	v, _ := lookup("OTEL_EXPORTER_OTLP_ENDPOINT")
	return strings.TrimRight(strings.TrimSpace(v), "/") + path
}

// Shutdown exports what is left and stops the exporters.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var errs []error
	if t.held != nil {
		t.held.flush(ctx)
	}
	if t.tp != nil {
		errs = append(errs, t.tp.Shutdown(ctx))
	}
	if t.mp != nil {
		errs = append(errs, t.mp.Shutdown(ctx))
	}
	return errors.Join(errs...)
}

// Flush exports the spans and metrics of the invocation that is ending,
// waiting at most bound and never past ctx's deadline. What cannot be
// exported in time is dropped and counted (DroppedSpans, and the metric
// otel_dropped_spans); it never delays the invocation further.
func (t *Telemetry) Flush(ctx context.Context, bound time.Duration) {
	if t == nil {
		return
	}
	// The earlier of ctx's deadline (the invocation's) and the bound; ctx
	// itself may already be cancelled, as the answer is written.
	end := time.Now().Add(bound)
	if dl, ok := ctx.Deadline(); ok && dl.Before(end) {
		end = dl
	}
	ctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), end)
	defer cancel()
	var wg sync.WaitGroup
	if t.held != nil {
		wg.Go(func() { t.held.flush(ctx) })
	}
	if t.mp != nil {
		wg.Go(func() {
			if err := t.mp.ForceFlush(ctx); err != nil {
				t.droppedMetrics.Add(1)
			}
		})
	}
	wg.Wait()
}

// DroppedSpans returns the number of spans a bounded Flush could not
// export.
func (t *Telemetry) DroppedSpans() int64 {
	if t == nil || t.held == nil {
		return 0
	}
	return t.held.dropped.Load()
}

// heldSpans is the span processor of PerInvocation: ended spans are held
// (at most max, the rest dropped and counted) until flush exports them with
// the caller's deadline.
type heldSpans struct {
	exp     sdktrace.SpanExporter
	max     int
	mu      sync.Mutex
	spans   []sdktrace.ReadOnlySpan
	dropped atomic.Int64
}

func (h *heldSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (h *heldSpans) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	h.mu.Lock()
	if len(h.spans) < h.max {
		h.spans = append(h.spans, s)
	} else {
		h.dropped.Add(1)
	}
	h.mu.Unlock()
}

func (h *heldSpans) flush(ctx context.Context) {
	h.mu.Lock()
	spans := h.spans
	h.spans = nil
	h.mu.Unlock()
	if len(spans) == 0 {
		return
	}
	if err := h.exp.ExportSpans(ctx, spans); err != nil {
		h.dropped.Add(int64(len(spans)))
	}
}

func (h *heldSpans) Shutdown(ctx context.Context) error {
	h.flush(ctx)
	return h.exp.Shutdown(ctx)
}

func (h *heldSpans) ForceFlush(ctx context.Context) error {
	h.flush(ctx)
	return nil
}

// Handler wraps the gateway's HTTP face with the server span of each
// request: the client's traceparent and tracestate are honoured (the span
// joins the caller's trace), and the span is in the request's context for
// the attempts, the hand-off and the log lines. core.Observer.EndRequest
// names it and sets its outcome.
func (t *Telemetry) Handler(next http.Handler) http.Handler {
	if t == nil || t.tp == nil && t.mp == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/_gateway/health" {
			next.ServeHTTP(w, r) // probes would drown the traces
			return
		}
		// Only a valid trace context is honoured (core.TraceContext).
		ctx := r.Context()
		if tp, ts := core.TraceContext(r.Header); tp != "" {
			ctx = t.prop.Extract(ctx, propagation.MapCarrier{"traceparent": tp, "tracestate": ts})
		}
		method := spanMethod(r.Method)
		ctx, span := t.tracer.Start(ctx, method, trace.WithSpanKind(trace.SpanKindServer))
		if span.IsRecording() { // nothing to build for a span not sampled
			n := t.limits.valueLength
			host, port := splitHost(r.Host)
			attrs := []attribute.KeyValue{
				attribute.String("http.request.method", method),
				attribute.String("url.path", capValue(r.URL.Path, n)), // never the query
				attribute.String("url.scheme", scheme(r)),
				attribute.String("server.address", capValue(host, n)),
				attribute.String("network.protocol.version", protoVersion(r)),
			}
			if method != r.Method {
				attrs = append(attrs, attribute.String("http.request.method_original", capValue(r.Method, n)))
			}
			if port != "" {
				attrs = append(attrs, attribute.String("server.port", capValue(port, n)))
			}
			span.SetAttributes(append(attrs, allowedHeaders("http.request.header.", r.Header, n)...)...)
		}
		t.inFlight.Add(1)
		defer func() {
			t.inFlight.Add(-1)
			span.End()
		}()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// allowedRequestHeaders are the only headers recorded in span attributes.
var allowedRequestHeaders = []string{"Content-Type", "Content-Length"}

// allowedHeaders returns the allowed headers of h as attributes, each value
// capped to n bytes and at most maxHeaderValues of them.
func allowedHeaders(prefix string, h http.Header, n int) []attribute.KeyValue {
	var out []attribute.KeyValue
	for _, k := range allowedRequestHeaders {
		if v, ok := h[k]; ok {
			out = append(out, attribute.StringSlice(prefix+strings.ToLower(k), capValues(v, n)))
		}
	}
	return out
}

func protoVersion(r *http.Request) string {
	switch {
	case r.ProtoMajor == 1 && r.ProtoMinor == 1:
		return "1.1"
	case r.ProtoMajor == 2:
		return "2"
	case r.ProtoMajor == 1 && r.ProtoMinor == 0:
		return "1.0"
	}
	return strconv.Itoa(r.ProtoMajor) + "." + strconv.Itoa(r.ProtoMinor)
}

func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

func splitHost(hp string) (string, string) {
	if i := strings.LastIndexByte(hp, ':'); i >= 0 && !strings.Contains(hp[i:], "]") {
		return hp[:i], hp[i+1:]
	}
	return hp, ""
}

// SpanIDs returns the trace and span ids of the span in ctx (ok false when
// there is none), for httpapi.WithTraceIDs.
func (t *Telemetry) SpanIDs(ctx context.Context) ([16]byte, [8]byte, bool) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return [16]byte{}, [8]byte{}, false
	}
	return sc.TraceID(), sc.SpanID(), true
}

// LogHandler wraps next so that every record logged with a context that
// carries a span gets its trace_id and span_id.
func (t *Telemetry) LogHandler(next slog.Handler) slog.Handler {
	if t == nil || t.tp == nil {
		return next
	}
	return &logHandler{next: next}
}

type logHandler struct{ next slog.Handler }

func (h *logHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.next.Handle(ctx, r)
}

func (h *logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &logHandler{next: h.next.WithAttrs(as)}
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	return &logHandler{next: h.next.WithGroup(name)}
}

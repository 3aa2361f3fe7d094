package emulators

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// jaegerReadyTimeout bounds the wait for Jaeger to listen.
const jaegerReadyTimeout = 60 * time.Second

// Jaeger is a running Jaeger v2 all-in-one (an OpenTelemetry Collector
// build with an in-memory trace store) on loopback ports chosen at start:
// OTLP over HTTP in, the query API out. Its methods may be called from
// multiple goroutines.
type Jaeger struct {
	p         *process
	otlpHTTP  string // host:port
	queryHTTP string // host:port
}

// jaegerConfig is the collector configuration: OTLP/HTTP and gRPC
// receivers, the memory store, the query extension, and no telemetry
// listener of its own; every address is a loopback one.
const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: %[3]s
    grpc:
      endpoint: %[4]s
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %[2]s
      http:
        endpoint: %[1]s
processors:
  batch:
    timeout: 50ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`

// StartJaeger starts Jaeger with a generated configuration (OTLP/HTTP,
// OTLP/gRPC, query HTTP and gRPC on free loopback ports) and waits until
// its OTLP/HTTP receiver, the last part to start, accepts connections. It
// is stopped when the test finishes.
//
// The `jaeger` command is looked up on PATH; `make tools` builds it into
// .tools/bin and `make test` puts that on PATH. A missing command fails
// the test.
func StartJaeger(tb testing.TB) *Jaeger {
	tb.Helper()
	bin, err := exec.LookPath("jaeger")
	if err != nil {
		tb.Fatalf("emulators: jaeger not found on PATH: %v; run `make tools` in the repository root (it builds Jaeger v2 into .tools/bin), and put .tools/bin on PATH (`make test` does)", err)
	}
	ports, err := freePorts(4)
	if err != nil {
		tb.Fatalf("emulators: pick jaeger ports: %v", err)
	}
	addr := func(i int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[i])) }
	dir := tb.TempDir()
	cfg := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, jaegerConfig, addr(0), addr(1), addr(2), addr(3)), 0o600); err != nil {
		tb.Fatalf("emulators: write the jaeger config: %v", err)
	}
	j := &Jaeger{otlpHTTP: addr(0), queryHTTP: addr(2), p: &process{
		name:  "jaeger",
		argv:  []string{bin, "--config", cfg},
		dir:   dir,
		addr:  addr(0),
		ready: jaegerReadyTimeout,
	}}
	j.p.start(tb)
	return j
}

// OTLPEndpoint is the OTLP/HTTP base URL, for OTEL_EXPORTER_OTLP_ENDPOINT.
func (j *Jaeger) OTLPEndpoint() string { return "http://" + j.otlpHTTP }

// QueryURL is the base URL of the query API and UI.
func (j *Jaeger) QueryURL() string { return "http://" + j.queryHTTP }

// Log returns the tail of Jaeger's output, for failure messages.
func (j *Jaeger) Log() string { return j.p.output() }

// JaegerTrace is a trace as Jaeger's query API (/api/traces/<id>, what its
// UI renders) returns it.
type JaegerTrace struct {
	TraceID   string                   `json:"traceID"`
	Spans     []JaegerSpan             `json:"spans"`
	Processes map[string]JaegerProcess `json:"processes"`
}

// JaegerSpan is one span of a JaegerTrace.
type JaegerSpan struct {
	TraceID       string      `json:"traceID"`
	SpanID        string      `json:"spanID"`
	OperationName string      `json:"operationName"`
	References    []JaegerRef `json:"references"`
	StartTime     int64       `json:"startTime"` // µs since the epoch
	Duration      int64       `json:"duration"`  // µs
	Tags          []JaegerTag `json:"tags"`
	ProcessID     string      `json:"processID"`
}

// JaegerRef is a span reference: CHILD_OF its parent, FOLLOWS_FROM a link.
type JaegerRef struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

// JaegerTag is a span attribute.
type JaegerTag struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// JaegerProcess is the resource of a trace's spans.
type JaegerProcess struct {
	ServiceName string      `json:"serviceName"`
	Tags        []JaegerTag `json:"tags"`
}

// Tag returns the value of the span's attribute key, and whether it has it.
func (s JaegerSpan) Tag(key string) (any, bool) {
	for _, t := range s.Tags {
		if t.Key == key {
			return t.Value, true
		}
	}
	return nil, false
}

// Parent returns the span id of the span's parent (CHILD_OF), or "".
func (s JaegerSpan) Parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// Trace fetches trace id (32 hex digits) as the query API returns it, the
// raw JSON included; ok is false while Jaeger does not have it.
func (j *Jaeger) Trace(ctx context.Context, id string) (tr JaegerTrace, raw []byte, ok bool, err error) {
	req, err := http.NewRequestWithContext(ctx, "GET", j.QueryURL()+"/api/traces/"+id, nil)
	if err != nil {
		return tr, nil, false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return tr, nil, false, err
	}
	defer resp.Body.Close()
	raw, err = io.ReadAll(resp.Body)
	if err != nil {
		return tr, nil, false, err
	}
	if resp.StatusCode == http.StatusNotFound {
		return tr, raw, false, nil
	}
	if resp.StatusCode != http.StatusOK {
		return tr, raw, false, fmt.Errorf("jaeger query %s: %s: %s", id, resp.Status, raw)
	}
	var doc struct {
		Data []JaegerTrace `json:"data"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return tr, raw, false, fmt.Errorf("jaeger query %s: %w", id, err)
	}
	if len(doc.Data) == 0 {
		return tr, raw, false, nil
	}
	return doc.Data[0], raw, true, nil
}

// WaitTrace polls the query API until trace id has a span that done
// accepts (nil: any), or fails tb after timeout.
func (j *Jaeger) WaitTrace(tb testing.TB, id string, timeout time.Duration, done func(JaegerTrace) bool) (JaegerTrace, []byte) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last JaegerTrace
	var lastErr error
	for {
		tr, raw, ok, err := j.Trace(ctx, id)
		if ok && (done == nil || done(tr)) {
			return tr, raw
		}
		if ok {
			last = tr
		}
		if err != nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("emulators: trace %s not complete in jaeger within %v (last error %v); got %d spans:\n%+v\njaeger log:\n%s",
				id, timeout, lastErr, len(last.Spans), last.Spans, j.Log())
			return last, nil
		case <-tick.C:
		}
	}
}

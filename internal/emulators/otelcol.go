package emulators

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"
)

// collectorReadyTimeout bounds the wait for the collector to start.
const collectorReadyTimeout = 3 * time.Minute // liveness only: an exit ends the wait at once

// Collector is a running OpenTelemetry receiver (internal/otelcol: the
// Collector's own OTLP receiver, driven without the Collector's service)
// that receives OTLP over HTTP on a loopback port it picks itself and
// appends every export it receives, as one OTLP JSON line, to a file the
// tests read. Its methods may be called from multiple goroutines.
type Collector struct {
	proc     *child
	log      *logTail
	endpoint string // host:port the receiver bound
	file     string // the receiver's output, one OTLP JSON line per export

	stopOnce sync.Once
}

// collectorReady is the line otelcol logs once its receiver serves;
// collectorEndpoint finds the address the receiver bound in the line
// before it, the receiver's own ("Starting HTTP server … "endpoint":
// "127.0.0.1:NNNN"").
var collectorEndpoint = regexp.MustCompile(`Starting HTTP server.*"endpoint": "([^"]+)"`)

const collectorReady = "Everything is ready"

// StartCollector starts the collector (`otelcol -file F -endpoint
// 127.0.0.1:0`) and waits until it says it is ready, reading the
// receiver's address from its log: it binds its own port, so no other
// process can hold it. It is stopped when the test finishes.
//
// The `otelcol` command is looked up on PATH; `make tools` builds it into
// .tools/bin and `make test` puts that on PATH. A missing command fails
// the test.
func StartCollector(tb testing.TB) *Collector {
	tb.Helper()
	bin, err := exec.LookPath("otelcol")
	if err != nil {
		tb.Fatalf("emulators: otelcol not found on PATH: %v; run `make tools` in the repository root (it builds the OpenTelemetry Collector of internal/otelcol into .tools/bin), and put .tools/bin on PATH (`make test` does)", err)
	}
	dir := tb.TempDir()
	c := &Collector{file: filepath.Join(dir, "export.jsonl"), log: newLogTail(collectorReady)}
	c.proc, err = spawn([]string{bin, "-file", c.file, "-endpoint", "127.0.0.1:0"}, nil, false, dir, c.log)
	if err != nil {
		tb.Fatalf("emulators: start otelcol: %v", err)
	}
	tb.Cleanup(c.stop)
	select {
	case <-c.log.ready:
	case <-c.proc.done:
		tb.Fatalf("emulators: otelcol exited before it was ready (an otelcol built before internal/otelcol took -file wants --config: run `make tools`):\n%s", c.log.String())
	case <-time.After(collectorReadyTimeout):
		tb.Fatalf("emulators: otelcol not ready after %v:\n%s", collectorReadyTimeout, c.log.String())
	}
	m := collectorEndpoint.FindStringSubmatch(c.log.String())
	if m == nil {
		tb.Fatalf("emulators: otelcol logged no receiver address:\n%s", c.log.String())
	}
	c.endpoint = m[1]
	return c
}

// stop sends SIGTERM, then SIGKILL after a grace period, and waits.
func (c *Collector) stop() {
	c.stopOnce.Do(func() { c.proc.stop(processStopGrace) })
}

// OTLPEndpoint is the OTLP/HTTP base URL, for OTEL_EXPORTER_OTLP_ENDPOINT.
func (c *Collector) OTLPEndpoint() string { return "http://" + c.endpoint }

// Log returns the tail of the collector's output, for failure messages.
func (c *Collector) Log() string { return c.log.String() }

// Trace is the spans of one trace the collector received, in the order
// they arrived.
type Trace struct {
	TraceID string
	Spans   []Span
}

// Span is one span as OTLP carries it, its attribute values decoded:
// strings, int64 (OTLP JSON writes them as strings), float64, bool, or the
// raw JSON of an array or key-value list.
type Span struct {
	TraceID, SpanID, ParentSpanID string // lowercase hex, as OTLP JSON has them
	Name                          string
	Kind                          int
	Start, End                    time.Time
	Attributes                    map[string]any
	Links                         []SpanLink
	// Resource holds the attributes of the resource the span came with.
	Resource map[string]any
}

// SpanLink is a span's link to another span (the continuation's to the
// request it continues).
type SpanLink struct{ TraceID, SpanID string }

// Attr returns the value of the span's attribute key, and whether it has it.
func (s Span) Attr(key string) (any, bool) {
	v, ok := s.Attributes[key]
	return v, ok
}

// otlpJSON is the part of an OTLP/JSON ExportTraceServiceRequest (the
// collector's line) the tests read.
type otlpJSON struct {
	ResourceSpans []struct {
		Resource struct {
			Attributes []otlpKV `json:"attributes"`
		} `json:"resource"`
		ScopeSpans []struct {
			Spans []struct {
				TraceID           string   `json:"traceId"`
				SpanID            string   `json:"spanId"`
				ParentSpanID      string   `json:"parentSpanId"`
				Name              string   `json:"name"`
				Kind              int      `json:"kind"`
				StartTimeUnixNano string   `json:"startTimeUnixNano"`
				EndTimeUnixNano   string   `json:"endTimeUnixNano"`
				Attributes        []otlpKV `json:"attributes"`
				Links             []struct {
					TraceID string `json:"traceId"`
					SpanID  string `json:"spanId"`
				} `json:"links"`
			} `json:"spans"`
		} `json:"scopeSpans"`
	} `json:"resourceSpans"`
}

type otlpKV struct {
	Key   string `json:"key"`
	Value struct {
		StringValue *string         `json:"stringValue"`
		IntValue    *string         `json:"intValue"`
		DoubleValue *float64        `json:"doubleValue"`
		BoolValue   *bool           `json:"boolValue"`
		ArrayValue  json.RawMessage `json:"arrayValue"`
		KvlistValue json.RawMessage `json:"kvlistValue"`
	} `json:"value"`
}

func attrsOf(kvs []otlpKV) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		v := kv.Value
		switch {
		case v.StringValue != nil:
			m[kv.Key] = *v.StringValue
		case v.IntValue != nil:
			n, _ := strconv.ParseInt(*v.IntValue, 10, 64)
			m[kv.Key] = n
		case v.DoubleValue != nil:
			m[kv.Key] = *v.DoubleValue
		case v.BoolValue != nil:
			m[kv.Key] = *v.BoolValue
		case v.ArrayValue != nil:
			m[kv.Key] = string(v.ArrayValue)
		case v.KvlistValue != nil:
			m[kv.Key] = string(v.KvlistValue)
		}
	}
	return m
}

func unixNano(s string) time.Time {
	n, _ := strconv.ParseInt(s, 10, 64)
	return time.Unix(0, n)
}

// Spans returns every span the collector has written so far, with the raw
// export lines that carried them. A line the collector has not
// finished writing is left for the next call.
func (c *Collector) Spans() ([]Span, [][]byte, error) {
	b, err := os.ReadFile(c.file)
	if os.IsNotExist(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var spans []Span
	var lines [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, []byte(`"resourceSpans"`)) {
			continue // metrics
		}
		var doc otlpJSON
		if err := json.Unmarshal(line, &doc); err != nil {
			continue // the collector is still writing it
		}
		lines = append(lines, append([]byte(nil), line...))
		for _, rs := range doc.ResourceSpans {
			res := attrsOf(rs.Resource.Attributes)
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					span := Span{TraceID: s.TraceID, SpanID: s.SpanID, ParentSpanID: s.ParentSpanID, Name: s.Name, Kind: s.Kind,
						Start: unixNano(s.StartTimeUnixNano), End: unixNano(s.EndTimeUnixNano),
						Attributes: attrsOf(s.Attributes), Resource: res}
					for _, l := range s.Links {
						span.Links = append(span.Links, SpanLink{TraceID: l.TraceID, SpanID: l.SpanID})
					}
					spans = append(spans, span)
				}
			}
		}
	}
	return spans, lines, sc.Err()
}

// Trace returns the spans of trace id (32 hex digits) received so far, by
// start time, with the export lines that carried them.
func (c *Collector) Trace(id string) (Trace, [][]byte, error) {
	spans, lines, err := c.Spans()
	tr := Trace{TraceID: id}
	var raw [][]byte
	for _, s := range spans {
		if s.TraceID == id {
			tr.Spans = append(tr.Spans, s)
		}
	}
	for _, l := range lines {
		if bytes.Contains(l, []byte(`"traceId":"`+id+`"`)) {
			raw = append(raw, l)
		}
	}
	sort.SliceStable(tr.Spans, func(i, j int) bool { return tr.Spans[i].Start.Before(tr.Spans[j].Start) })
	return tr, raw, err
}

// WaitTrace polls the export file until trace id has spans that done
// accepts (nil: any), or fails tb after timeout. It returns the trace and
// the export lines that carried it.
func (c *Collector) WaitTrace(tb testing.TB, id string, timeout time.Duration, done func(Trace) bool) (Trace, [][]byte) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		tr, raw, err := c.Trace(id)
		if len(tr.Spans) > 0 && (done == nil || done(tr)) {
			return tr, raw
		}
		if time.Now().After(deadline) {
			tb.Fatalf("emulators: trace %s not complete in the collector's export within %v (last error %v); got %d spans:\n%+v\ncollector log:\n%s",
				id, timeout, err, len(tr.Spans), tr.Spans, c.Log())
			return tr, raw
		}
		<-tick.C
	}
}

// Metric is one metric as the collector received it: its name, its scope,
// and the attribute keys any of its data points carried.
type Metric struct {
	Name, Scope string
	Attributes  map[string]bool
}

// otlpMetricsJSON is the part of an OTLP/JSON ExportMetricsServiceRequest
// (the collector's line) the tests read: the names, and the attributes
// of the data points of every kind (sum, gauge, histogram).
type otlpMetricsJSON struct {
	ResourceMetrics []struct {
		ScopeMetrics []struct {
			Scope struct {
				Name string `json:"name"`
			} `json:"scope"`
			Metrics []struct {
				Name  string          `json:"name"`
				Sum   *otlpDataPoints `json:"sum"`
				Gauge *otlpDataPoints `json:"gauge"`
				Hist  *otlpDataPoints `json:"histogram"`
			} `json:"metrics"`
		} `json:"scopeMetrics"`
	} `json:"resourceMetrics"`
}

type otlpDataPoints struct {
	DataPoints []struct {
		Attributes []otlpKV `json:"attributes"`
	} `json:"dataPoints"`
}

// Metrics returns every metric the collector has written so far, by name,
// with the attribute keys of all its data points. A line the collector
// has not finished writing is left for the next call.
func (c *Collector) Metrics() (map[string]Metric, error) {
	b, err := os.ReadFile(c.file)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]Metric{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, []byte(`"resourceMetrics"`)) {
			continue // spans
		}
		var doc otlpMetricsJSON
		if err := json.Unmarshal(line, &doc); err != nil {
			continue // the collector is still writing it
		}
		for _, rm := range doc.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					got, ok := out[m.Name]
					if !ok {
						got = Metric{Name: m.Name, Scope: sm.Scope.Name, Attributes: map[string]bool{}}
					}
					for _, pts := range []*otlpDataPoints{m.Sum, m.Gauge, m.Hist} {
						if pts == nil {
							continue
						}
						for _, p := range pts.DataPoints {
							for _, kv := range p.Attributes {
								got.Attributes[kv.Key] = true
							}
						}
					}
					out[m.Name] = got
				}
			}
		}
	}
	return out, sc.Err()
}

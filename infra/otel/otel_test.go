package otel

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	colmetric "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/protobuf/proto"

	"fngateway/core"
)

func lookupMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestEnabled(t *testing.T) {
	for _, tc := range []struct {
		name            string
		env             map[string]string
		traces, metrics bool
	}{
		{"nothing", map[string]string{}, false, false},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true, true},
		{"traces only", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true, false},
		{"metrics only", map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://127.0.0.1:4318/v1/metrics"}, false, true},
		{"disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}, false, false},
		{"blank", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": " "}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, m := Enabled(lookupMap(tc.env))
			if tr != tc.traces || m != tc.metrics {
				t.Errorf("Enabled = %v, %v; want %v, %v", tr, m, tc.traces, tc.metrics)
			}
		})
	}
	tel, err := New(context.Background(), Options{Lookup: lookupMap(nil)})
	if tel != nil || err != nil {
		t.Errorf("New without an endpoint = %v, %v; want nil, nil", tel, err)
	}
}

// TestFlushBoundedWhenCollectorHangs: a collector that never answers cannot
// hold an invocation: Flush returns at its bound, and the spans it could
// not export are dropped and counted.
func TestFlushBoundedWhenCollectorHangs(t *testing.T) {
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hang.Close()
	defer close(release)
	tel, err := New(context.Background(), Options{PerInvocation: true, Stats: &core.Stats{},
		Lookup: lookupMap(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": hang.URL})})
	if err != nil || tel == nil {
		t.Fatalf("New = %v, %v", tel, err)
	}
	h := tel.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tel.EndRequest(r.Context(), core.RequestEnd{Status: 200})
	}))
	for range 3 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/x", nil))
	}
	const bound = 200 * time.Millisecond
	start := time.Now()
	tel.Flush(context.Background(), bound)
	if took := time.Since(start); took < bound || took > bound+10*time.Second {
		t.Errorf("Flush took %v; want its bound %v (plus scheduling)", took, bound)
	}
	if got := tel.DroppedSpans(); got != 3 {
		t.Errorf("dropped spans = %d; want 3", got)
	}
	// An invocation deadline earlier than the bound wins.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/x", nil))
	start = time.Now()
	tel.Flush(ctx, 10*time.Second)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Flush with a 50 ms deadline took %v; want about 50 ms, not its 10 s bound", took)
	}
}

// TestLogHandlerAddsIDs: a line logged with the request's context carries
// its trace and span ids; one without a span carries none.
func TestLogHandlerAddsIDs(t *testing.T) {
	tel, err := New(context.Background(), Options{PerInvocation: true,
		Lookup: lookupMap(map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1/v1/traces"})})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := slog.New(tel.LogHandler(slog.NewJSONHandler(&buf, nil)))
	r := httptest.NewRequest("GET", "/x", nil)
	r.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	var spanID string
	tel.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.InfoContext(r.Context(), "in request")
		spanID = tel.TraceContext(r.Context())[36:52]
	})).ServeHTTP(httptest.NewRecorder(), r)
	log.Info("outside")
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	var in, out map[string]any
	json.Unmarshal(lines[0], &in)
	json.Unmarshal(lines[1], &out)
	if in["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" || in["span_id"] != spanID {
		t.Errorf("request line = %v; want trace_id of the client and span_id %s", in, spanID)
	}
	if _, ok := out["trace_id"]; ok {
		t.Errorf("line without a span = %v; want no trace_id", out)
	}
}

// FuzzSpanContextOf: a stored trace context, read back from a record, never
// panics, and what TraceContext writes reads back as the same span.
func FuzzSpanContextOf(f *testing.F) {
	tel := &Telemetry{prop: propagation.TraceContext{}}
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 a=b,c=d")
	f.Add("")
	f.Add("zz-")
	f.Fuzz(func(t *testing.T, s string) {
		sc := tel.spanContextOf(s)
		if !sc.IsValid() {
			return
		}
		ctx := trace.ContextWithSpanContext(context.Background(), sc)
		again := tel.spanContextOf(tel.TraceContext(ctx))
		if again.TraceID() != sc.TraceID() || again.SpanID() != sc.SpanID() || again.TraceFlags() != sc.TraceFlags() {
			t.Errorf("round trip of %q: %v → %v", s, sc, again)
		}
	})
}

// otlpReceiver is a loopback OTLP/HTTP metrics endpoint that decodes what
// it receives (the trace tests use the Collector; this one checks the
// decoded metrics in process).
type otlpReceiver struct {
	*httptest.Server
	mu  sync.Mutex
	got []*colmetric.ExportMetricsServiceRequest
}

func newOTLPReceiver(tb testing.TB) *otlpReceiver {
	r := &otlpReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/metrics" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		b, _ := io.ReadAll(req.Body)
		var m colmetric.ExportMetricsServiceRequest
		if err := proto.Unmarshal(b, &m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.got = append(r.got, &m)
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&colmetric.ExportMetricsServiceResponse{})
		w.Write(out)
	}))
	tb.Cleanup(r.Server.Close)
	return r
}

// TestMetricsExported: the /_gateway/stats counters arrive under their own
// names with their values, with the duration histograms and the gauges and
// the host's resource attributes.
func TestMetricsExported(t *testing.T) {
	rcv := newOTLPReceiver(t)
	stats := &core.Stats{}
	stats.AttemptTimeoutPerTry.Add(2)
	stats.AttemptTimeoutTTL.Add(1)
	stats.Requests.Add(5)
	tel, err := New(context.Background(), Options{PerInvocation: true, Stats: stats,
		Resource:      map[string]string{"cloud.provider": "aws", "faas.name": "gw"},
		BufferedBytes: func() int64 { return 4096 }, BusySlots: func() int64 { return 3 },
		Lookup: lookupMap(map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": rcv.URL + "/v1/metrics"})})
	if err != nil {
		t.Fatal(err)
	}
	h := tel.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tel.EndRequest(r.Context(), core.RequestEnd{Route: "/api", Status: 504, Code: "TTLExpired", Deadline: "ttl", Duration: time.Second})
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/api/x", nil))
	tel.Flush(context.Background(), 5*time.Second)

	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.got) == 0 {
		t.Fatal("no metrics export arrived")
	}
	ints := map[string]int64{}
	var histCount uint64
	res := map[string]string{}
	for _, rm := range rcv.got[len(rcv.got)-1].ResourceMetrics {
		for _, a := range rm.Resource.Attributes {
			res[a.Key] = a.Value.GetStringValue()
		}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				switch {
				case m.GetSum() != nil:
					ints[m.Name] = m.GetSum().DataPoints[0].GetAsInt()
				case m.GetGauge() != nil:
					ints[m.Name] = m.GetGauge().DataPoints[0].GetAsInt()
				case m.GetHistogram() != nil && m.Name == "http.server.request.duration":
					histCount = m.GetHistogram().DataPoints[0].Count
				}
			}
		}
	}
	for name, want := range map[string]int64{"attempt_timeout_per_try": 2, "attempt_timeout_ttl": 1, "requests": 5,
		"attempt_timeout_function_limit": 0, "buffered_body_bytes": 4096, "continuation_slots_busy": 3, "requests_in_flight": 0} {
		if got, ok := ints[name]; !ok || got != want {
			t.Errorf("metric %s = %d (present %v); want %d", name, got, ok, want)
		}
	}
	if histCount != 1 {
		t.Errorf("http.server.request.duration count = %d; want 1", histCount)
	}
	if res["cloud.provider"] != "aws" || res["faas.name"] != "gw" || res["service.name"] != "fngateway" {
		t.Errorf("resource = %v", res)
	}
}

package tests

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"fngateway/core/async"
	"fngateway/internal/emulators"
)

// The traces of docs/observability.md#spans, asserted on what a real receiver (the
// OpenTelemetry Collector's OTLP receiver, fed over OTLP/HTTP) received, in
// the OTLP JSON lines internal/otelcol writes.

// clientTrace is the caller's trace context the tests send: the gateway's
// spans must join this trace, under this span.
const (
	clientTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpanID  = "00f067aa0ba902b7"
)

// otelEnv is the export configuration of the tests: the standard variables
// only, with the batch delay shortened so spans arrive within the test.
func otelEnv(j *emulators.Collector) map[string]string {
	return map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": j.OTLPEndpoint(),
		"OTEL_SERVICE_NAME":           "gateway-e2e",
		"OTEL_BSP_SCHEDULE_DELAY":     "50",
		"OTEL_METRIC_EXPORT_INTERVAL": "600000",
	}
}

// traceBackend records the traceparent of every request it gets and hangs
// until the gateway cancels the request.
type traceBackend struct {
	*httptest.Server
	mu     sync.Mutex
	parent []string
}

func newHangingTraceBackend(tb testing.TB) *traceBackend {
	b := &traceBackend{}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.parent = append(b.parent, r.Header.Get("Traceparent"))
		b.mu.Unlock()
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	tb.Cleanup(b.Server.Close)
	return b
}

func (b *traceBackend) parents() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.parent...)
}

// spansNamed returns the spans of tr whose operation is name, by start time.
func spansNamed(tr emulators.Trace, name string) []emulators.Span {
	var out []emulators.Span
	for _, s := range tr.Spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Start.Before(out[j-1].Start); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func tagString(s emulators.Span, key string) string {
	v, _ := s.Attr(key)
	switch v := v.(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case nil:
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func tagInt(s emulators.Span, key string) int64 {
	v, _ := s.Attr(key)
	n, _ := v.(int64)
	return n
}

// TestTraceSeedExample: the seed's worked example, scaled down 10 times
// (TTL 6 s, Timeout 4.5 s, two hosts that never answer). the collector gets
// trace, the client's: the server span under the client's span, two attempt
// spans under it — the first ended by its Timeout with a 4,500 ms budget, the
// second by the TTL with what the TTL left — a backoff span between them,
// and each backend received a traceparent naming its own attempt's span.
// The request's log line carries the trace and server span ids.
func TestTraceSeedExample(t *testing.T) {
	t.Parallel()
	j := emulators.StartCollector(t)
	b1, b2 := newHangingTraceBackend(t), newHangingTraceBackend(t)
	env := otelEnv(j)
	env["Hosts"] = b1.URL + "," + b2.URL
	env["RetryBackoffMs"] = "1"
	gw := StartGateway(t, env)

	resp, body, _ := Do(t, "GET", gw.URL+"/report?secret=s3cr3t", map[string]string{
		"Traceparent": "00-" + clientTraceID + "-" + clientSpanID + "-01",
		"Tracestate":  "vendor=opaque",
		"S7PTTL":      "6",
		"S7PTimeout":  "4500",
	}, "")
	if resp.StatusCode != 504 || resp.Header.Get("X-Gateway-Error") != "TTLExpired" {
		t.Fatalf("answer = %d %s; want 504 TTLExpired", resp.StatusCode, body)
	}
	tr, raw := j.WaitTrace(t, clientTraceID, 20*time.Second, func(tr emulators.Trace) bool {
		return len(spansNamed(tr, "GET")) >= 2 && len(spansNamed(tr, "GET /")) == 1
	})
	if path := os.Getenv("OTEL_TEST_TRACE_OUT"); path != "" {
		os.WriteFile(path, bytes.Join(raw, []byte("\n")), 0o644) // for docs/observability.md
	}
	server := spansNamed(tr, "GET /")[0]
	if got := server.ParentSpanID; got != clientSpanID {
		t.Errorf("server span's parent = %q; want the client's span %s", got, clientSpanID)
	}
	for k, want := range map[string]string{"http.route": "/", "http.response.status_code": "504",
		"gateway.error_code": "TTLExpired", "gateway.deadline": "ttl", "gateway.attempts": "2", "url.path": "/report"} {
		if got := tagString(server, k); got != want {
			t.Errorf("server span %s = %q; want %q", k, got, want)
		}
	}
	attempts := spansNamed(tr, "GET")
	if len(attempts) != 2 {
		t.Fatalf("attempt spans = %d; want 2", len(attempts))
	}
	wantDeadline := []string{"timeout", "ttl"}
	backends := []*traceBackend{b1, b2}
	for i, a := range attempts {
		if a.ParentSpanID != server.SpanID {
			t.Errorf("attempt %d's parent = %q; want the server span %s", i+1, a.ParentSpanID, server.SpanID)
		}
		if got := tagInt(a, "gateway.attempt"); got != int64(i+1) {
			t.Errorf("attempt %d: gateway.attempt = %d", i+1, got)
		}
		if got := tagString(a, "gateway.deadline"); got != wantDeadline[i] {
			t.Errorf("attempt %d: gateway.deadline = %q; want %q", i+1, got, wantDeadline[i])
		}
		if got := tagString(a, "gateway.outcome"); got != "timeout" {
			t.Errorf("attempt %d: gateway.outcome = %q; want timeout", i+1, got)
		}
		if got := tagString(a, "url.full"); strings.Contains(got, "s3cr3t") || strings.Contains(tagString(server, "url.path"), "s3cr3t") {
			t.Errorf("attempt %d: the query's value is in the spans: %q", i+1, got)
		}
		want := "00-" + clientTraceID + "-" + a.SpanID + "-01"
		if got := backends[i].parents(); len(got) != 1 || got[0] != want {
			t.Errorf("backend %d got traceparent %q; want %q, naming its attempt's span", i+1, got, want)
		}
	}
	if got := tagInt(attempts[0], "gateway.budget_ms"); got != 4500 {
		t.Errorf("attempt 1 budget = %d ms; want 4500 (Timeout)", got)
	}
	if got := tagInt(attempts[1], "gateway.budget_ms"); got <= 0 || got > 1500 {
		t.Errorf("attempt 2 budget = %d ms; want what the TTL left, at most 1500", got)
	}
	if got := len(spansNamed(tr, "backoff")); got != 1 {
		t.Errorf("backoff spans = %d; want 1", got)
	}
	line := gw.WaitLog(t, loadMargin, func(m map[string]any) bool { return m["msg"] == "request" && m["path"] == "/report" })
	if line["trace_id"] != clientTraceID || line["span_id"] != server.SpanID {
		t.Errorf("log line ids = %v/%v; want %s/%s", line["trace_id"], line["span_id"], clientTraceID, server.SpanID)
	}
}

// TestTraceAsyncContinuationAfterSIGKILL: a request handed off to async is
// resumed by a new process after the first was killed mid-attempt. The
// continuation's span, in the request's trace, is linked to
// the request's server span; the resumed attempt and the result write nest
// in it.
func TestTraceAsyncContinuationAfterSIGKILL(t *testing.T) {
	t.Parallel()
	j := emulators.StartCollector(t)
	// The first call hangs, so the kill always finds the attempt running;
	// the resumed one answers at once.
	be := newHangingBackend(t, func(n int64) time.Duration {
		if n == 1 {
			return time.Hour
		}
		return 0
	})
	dir := t.TempDir()
	env := asyncEnv(be.URL, dir)
	for k, v := range otelEnv(j) {
		env[k] = v
	}
	env["AsyncTimeout"] = "4000"
	env["FunctionLimitMarginMs"] = "500"
	gw := StartGateway(t, env)
	_, acc, _ := submitAsync(t, gw.URL, "/crash", map[string]string{
		"Idempotency-Key": "otel-crash-key",
		"Traceparent":     "00-" + clientTraceID + "-" + clientSpanID + "-01",
	})
	// The hand-off is exported before the kill (the batch delay is 50 ms).
	tr, _ := j.WaitTrace(t, clientTraceID, 20*time.Second, func(tr emulators.Trace) bool {
		return len(spansNamed(tr, "async hand-off")) == 1 && len(spansNamed(tr, "POST /")) == 1
	})
	server := spansNamed(tr, "POST /")[0]
	if h := spansNamed(tr, "async hand-off")[0]; h.ParentSpanID != server.SpanID || tagString(h, "gateway.async.id") != acc.ID {
		t.Errorf("hand-off span parent %q id %q; want %s, %s", h.ParentSpanID, tagString(h, "gateway.async.id"), server.SpanID, acc.ID)
	}
	waitFor(t, loadMargin, "the attempt reaching the backend", func() bool { return be.calls.Load() > 0 })
	gw.Kill()
	// The trace context is in the record, and in no queue message.
	stored := `"trace":"00-` + clientTraceID + "-" + server.SpanID + `-01"`
	var inRecord, inOther []string
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(path)
		switch {
		case strings.Contains(path, "records") && bytes.Contains(b, []byte(stored)):
			inRecord = append(inRecord, path)
		case bytes.Contains(b, []byte(clientTraceID)):
			inOther = append(inOther, path)
		}
		return nil
	})
	if len(inRecord) != 1 || len(inOther) != 0 {
		t.Errorf("trace context %s found in records %q and elsewhere %q; want in the one record only", stored, inRecord, inOther)
	}

	gw2 := StartGateway(t, env)
	// The status URI answers the backend's own result (201) once done: the
	// restarted gateway first waits out the killed one's claim (the lease),
	// then runs the attempt; the margin is for a loaded machine.
	if resp, body, _ := waitResult(t, strings.Replace(acc.StatusURI, gw.URL, gw2.URL, 1), async.DefaultLease+30*time.Second); resp.StatusCode != http.StatusCreated {
		t.Fatalf("status URI answered %d %s once done; want the backend's 201", resp.StatusCode, body)
	}
	tr, _ = j.WaitTrace(t, clientTraceID, 20*time.Second, func(tr emulators.Trace) bool {
		return len(spansNamed(tr, "async continuation")) >= 1 && len(spansNamed(tr, "async result write")) >= 1
	})
	cont := spansNamed(tr, "async continuation")
	c := cont[len(cont)-1]
	linked := false
	for _, l := range c.Links {
		if l.SpanID == server.SpanID && l.TraceID == clientTraceID {
			linked = true
		}
	}
	if !linked {
		t.Errorf("continuation links = %+v; want a link to the request's span %s", c.Links, server.SpanID)
	}
	if got := tagString(c, "gateway.async.id"); got != acc.ID {
		t.Errorf("continuation async id = %q; want %s", got, acc.ID)
	}
	var resumed, written bool
	for _, s := range tr.Spans {
		if s.ParentSpanID == c.SpanID && s.Name == "POST" && tagString(s, "gateway.outcome") == "status" {
			resumed = true
		}
		if s.ParentSpanID == c.SpanID && s.Name == "async result write" {
			written = true
		}
	}
	if !resumed || !written {
		t.Errorf("under the continuation: resumed attempt %v, result write %v; want both", resumed, written)
	}
}

// TestTraceLambdaFlushedBeforeFreeze: under the Lambda emulator, the
// function process is frozen (SIGSTOP) the moment each invocation returns,
// and stays frozen: the invocation's spans reached the collector all the same,
// because they were exported before it returned.
func TestTraceLambdaFlushedBeforeFreeze(t *testing.T) {
	t.Parallel()
	j := emulators.StartCollector(t)
	backend := echoBackend(t)
	env := otelEnv(j)
	env["Hosts"] = backend.URL
	env["AWS_LAMBDA_FUNCTION_TIMEOUT"] = "10"
	env["AWS_LAMBDA_FUNCTION_NAME"] = "gateway-fn"
	env["AWS_REGION"] = "eu-west-1"
	f := startFunction(t, binary, env)
	const traceID = "5bf92f3577b34da6a3ce929d0e0e4737"
	a, body, _ := f.invokeHTTP(t, httpEvent(t, "lambda-urls-request.json", httpRequest{method: "GET", rawPath: "/fn",
		headers: map[string]string{"traceparent": "00-" + traceID + "-" + clientSpanID + "-01"}}))
	if a.StatusCode != http.StatusCreated {
		t.Fatalf("status %d: %s", a.StatusCode, body)
	}
	// Frozen from here on: nothing the process does later can export.
	tr, _ := j.WaitTrace(t, traceID, 10*time.Second, func(tr emulators.Trace) bool {
		return len(spansNamed(tr, "GET /")) == 1 && len(spansNamed(tr, "GET")) == 1
	})
	hostSpans(t, tr, "GET", map[string]string{"cloud.provider": "aws", "faas.name": "gateway-fn", "cloud.region": "eu-west-1"})
}

// hostSpans checks a host's trace of one forwarded request: the server span
// is the caller's span's child, the one attempt span the server span's, and
// the resource attributes the host says of itself are want's.
func hostSpans(tb testing.TB, tr emulators.Trace, method string, want map[string]string) (server emulators.Span) {
	tb.Helper()
	server, attempt := spansNamed(tr, method+" /")[0], spansNamed(tr, method)[0]
	if server.ParentSpanID != clientSpanID || attempt.ParentSpanID != server.SpanID {
		tb.Errorf("parents: server %q (want %s), attempt %q (want %s)", server.ParentSpanID, clientSpanID, attempt.ParentSpanID, server.SpanID)
	}
	res := map[string]string{}
	for k, v := range server.Resource {
		if s, ok := v.(string); ok {
			res[k] = s
		}
	}
	for k, v := range want {
		if res[k] != v {
			tb.Errorf("resource attribute %s = %q; want %q (all: %v)", k, res[k], v, res)
		}
	}
	return server
}

// TestLambdaSlowCollector: a collector that never answers cannot make an
// invocation late: the flush gives up within half of FunctionLimitMarginMs
// and the answer is on time.
func TestLambdaSlowCollector(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(collector.Close)
	t.Cleanup(func() { close(release) })
	backend := echoBackend(t)
	f := startFunction(t, binary, map[string]string{"Hosts": backend.URL, "AWS_LAMBDA_FUNCTION_TIMEOUT": "10",
		"FunctionLimitMarginMs": "1000", "OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL})
	for i := range 2 {
		a, body, took := f.invokeHTTP(t, httpEvent(t, "lambda-urls-request.json", httpRequest{method: "GET", rawPath: "/fn"}))
		if a.StatusCode != http.StatusCreated {
			t.Fatalf("invocation %d: status %d: %s", i, a.StatusCode, body)
		}
		// The flush waits half of the 1 s margin: at least that (it waited
		// for the collector), and the invocation ended before its deadline
		// less the margin, however loaded the machine (the emulator's own
		// timeout report is checked below).
		if took >= 9*time.Second || took < 450*time.Millisecond {
			t.Errorf("invocation %d took %v; want the 500 ms flush bound (it waited for the collector), within the 10 s timeout less the 1 s margin", i, took)
		}
	}
	if strings.Contains(f.rie.Log(), "Task timed out") {
		t.Errorf("the emulator reported a timeout:\n%s", f.rie.Log())
	}
}

// TestTraceAzureFunctions: as an Azure Functions custom handler, the gateway
// exports to the endpoint the app settings name, under the traceparent the
// host forwards, with the host's resource attributes; its log line carries
// the trace and span ids (for Application Insights through the host).
func TestTraceAzureFunctions(t *testing.T) {
	t.Parallel()
	j := emulators.StartCollector(t)
	backend := echoBackend(t)
	env := otelEnv(j)
	env["Hosts"] = backend.URL
	env["AzureFunctionsJobHost__functionTimeout"] = "00:05:00"
	env["WEBSITE_SITE_NAME"] = "gateway-app"
	env["REGION_NAME"] = "West Europe"
	g := StartAzureHandler(t, env)
	const traceID = "6bf92f3577b34da6a3ce929d0e0e4738"
	resp, body, _ := Forward(t, g, "POST", "/api/echo", map[string]string{"Traceparent": "00-" + traceID + "-" + clientSpanID + "-01"}, "hi")
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("forwarded = %d %s", resp.StatusCode, body)
	}
	tr, _ := j.WaitTrace(t, traceID, 20*time.Second, func(tr emulators.Trace) bool {
		return len(spansNamed(tr, "POST /")) == 1 && len(spansNamed(tr, "POST")) == 1
	})
	server := hostSpans(t, tr, "POST", map[string]string{"cloud.provider": "azure", "faas.name": "gateway-app", "cloud.region": "West Europe"})
	line := g.WaitLog(t, loadMargin, func(m map[string]any) bool { return m["msg"] == "request" && m["path"] == "/api/echo" })
	if line["trace_id"] != traceID || line["span_id"] != server.SpanID {
		t.Errorf("log line ids = %v/%v; want %s/%s", line["trace_id"], line["span_id"], traceID, server.SpanID)
	}
}

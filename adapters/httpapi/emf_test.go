package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"fngateway/core"
)

// firstHangsRT makes the first attempt of each test hang until its deadline
// cuts it, and answers every later one 200.
type firstHangsRT struct{ n atomic.Int64 }

func (rt *firstHangsRT) RoundTrip(r *http.Request) (*http.Response, error) {
	if rt.n.Add(1) == 1 {
		<-r.Context().Done()
		return nil, r.Context().Err()
	}
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), ContentLength: 2, Request: r}, nil
}

// cloudWatchMetrics reads a log line as CloudWatch Logs reads Embedded
// Metric Format: the _aws directive's CloudWatchMetrics, each naming its
// namespace, dimension sets (keys of top-level string values) and metrics
// (keys of top-level numbers). It returns the metric values by name, and
// the dimension values of each set, or fails the test when the line is not
// valid EMF.
func cloudWatchMetrics(tb testing.TB, line []byte) (ns string, values map[string]float64, dims [][]string) {
	tb.Helper()
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(line, &doc); err != nil {
		tb.Fatalf("line %s: %v", line, err)
	}
	var aws struct {
		Timestamp         *int64 `json:"Timestamp"`
		CloudWatchMetrics []struct {
			Namespace  string     `json:"Namespace"`
			Dimensions [][]string `json:"Dimensions"`
			Metrics    []struct {
				Name string `json:"Name"`
				Unit string `json:"Unit"`
			} `json:"Metrics"`
		} `json:"CloudWatchMetrics"`
	}
	if err := json.Unmarshal(doc["_aws"], &aws); err != nil || aws.Timestamp == nil || len(aws.CloudWatchMetrics) != 1 {
		tb.Fatalf("_aws = %s (%v); want a Timestamp and one CloudWatchMetrics directive", doc["_aws"], err)
	}
	if d := time.Since(time.UnixMilli(*aws.Timestamp)); d < 0 || d > time.Minute {
		tb.Errorf("_aws.Timestamp %d is not now", *aws.Timestamp)
	}
	cw := aws.CloudWatchMetrics[0]
	values = map[string]float64{}
	for _, m := range cw.Metrics {
		var v float64
		if err := json.Unmarshal(doc[m.Name], &v); err != nil {
			tb.Errorf("metric %s: top-level value %s is not a number", m.Name, doc[m.Name])
		}
		switch m.Unit {
		case "Count", "Milliseconds":
		default:
			tb.Errorf("metric %s: unit %q", m.Name, m.Unit)
		}
		values[m.Name] = v
	}
	for _, set := range cw.Dimensions {
		if len(set) > 30 {
			tb.Errorf("dimension set of %d keys; CloudWatch takes at most 30", len(set))
		}
		var vals []string
		for _, k := range set {
			var v string
			if err := json.Unmarshal(doc[k], &v); err != nil || v == "" {
				tb.Errorf("dimension %s: top-level value %s is not a non-empty string", k, doc[k])
			}
			vals = append(vals, v)
		}
		dims = append(dims, vals)
	}
	return cw.Namespace, values, dims
}

// TestEMFLine: with EmfNamespace set, the per-request line is CloudWatch
// Embedded Metric Format: a request whose first attempt was cut by its
// Timeout and whose retry answered carries attempts 2, retries 1,
// attempt_timeout_per_try 1, under the namespace, by route and overall.
func TestEMFLine(t *testing.T) {
	s := testSettings(t, "http://a.test,http://b.test")
	s.EmfNamespace = "Gateway/Test"
	if err := s.Routes.Decode(`[{"prefix":"/api"}]`); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	h := &Handler{Settings: s, Forwarder: &core.Forwarder{Transport: &firstHangsRT{}}, Logger: slog.New(NewJSONLogHandler(&buf))}
	h.Init()
	r := httptest.NewRequest("GET", "http://gw.test/api/x", nil)
	r.Header.Set("S7PTimeout", "30")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 200 {
		t.Fatalf("status = %d; want 200 from the retry", w.Code)
	}
	ns, v, dims := cloudWatchMetrics(t, bytes.TrimSpace(buf.Bytes()))
	if ns != "Gateway/Test" {
		t.Errorf("namespace = %q", ns)
	}
	for name, want := range map[string]float64{"attempts": 2, "retries": 1, "hedges": 0, "attempt_timeout_per_try": 1,
		"attempt_timeout_ttl": 0, "attempt_timeout_function_limit": 0, "requests": 1, "end_ttl_expired": 0,
		"end_attempt_timeout": 0, "end_function_limit": 0, "async_accepted": 0, "async_unavailable": 0} {
		if got, ok := v[name]; !ok || got != want {
			t.Errorf("%s = %v (present %v); want %v", name, got, ok, want)
		}
	}
	if d, ok := v["durationMs"]; !ok || d < 30 {
		t.Errorf("durationMs = %v; want at least the 30 ms Timeout", d)
	}
	if len(dims) != 2 || len(dims[0]) != 0 || len(dims[1]) != 1 || dims[1][0] != "/api" {
		t.Errorf("dimension values = %q; want [] and [/api]", dims)
	}
}

// TestEMFLineHedges: on a route that hedges, the line's hedges is the
// number of its attempts started beside one whose Timeout fired.
func TestEMFLineHedges(t *testing.T) {
	s := testSettings(t, "http://a.test,http://b.test")
	s.EmfNamespace = "Gateway/Test"
	if err := s.Routes.Decode(`[{"prefix":"/api","hedgeOnPerTryTimeout":true}]`); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	stats := &core.Stats{}
	h := &Handler{Settings: s, Stats: stats, Forwarder: &core.Forwarder{Transport: &firstHangsRT{}, Stats: stats},
		Logger: slog.New(NewJSONLogHandler(&buf))}
	h.Init()
	r := httptest.NewRequest("GET", "http://gw.test/api/x", nil)
	r.Header.Set("S7PTimeout", "30")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 200 {
		t.Fatalf("status = %d; want 200 from the hedge", w.Code)
	}
	_, v, _ := cloudWatchMetrics(t, bytes.TrimSpace(buf.Bytes()))
	if v["hedges"] != 1 || v["attempts"] != 2 {
		t.Errorf("hedges = %v, attempts = %v; want 1 of 2", v["hedges"], v["attempts"])
	}
	if got := stats.Hedges.Load(); got != 1 {
		t.Errorf("stats hedges = %d; want 1, as the line says", got)
	}
}

// TestEMFLineEnding: a request the TTL ended carries requests 1 and
// end_ttl_expired 1, and 0 for every other ending, so that each ending's
// Sum in CloudWatch is the /_gateway/stats counter's rise.
func TestEMFLineEnding(t *testing.T) {
	// In a bubble: the 50 ms TTL is fake time, so a loaded machine cannot
	// spend it before the attempt starts (412 instead of 504).
	synctest.Test(t, func(t *testing.T) {
		s := testSettings(t, "http://a.test")
		s.EmfNamespace = "Gateway/Test"
		var buf bytes.Buffer
		stats := &core.Stats{}
		h := &Handler{Settings: s, Stats: stats, Forwarder: &core.Forwarder{Transport: &firstHangsRT{}, Stats: stats},
			Logger: slog.New(NewJSONLogHandler(&buf))}
		h.Init()
		r := httptest.NewRequest("GET", "http://gw.test/x", nil)
		r.Header.Set("S7PTTL", "0.05")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 504 || w.Header().Get("X-Gateway-Error") != "TTLExpired" {
			t.Fatalf("answer = %d %s; want 504 TTLExpired", w.Code, w.Header().Get("X-Gateway-Error"))
		}
		_, v, _ := cloudWatchMetrics(t, bytes.TrimSpace(buf.Bytes()))
		want := map[string]float64{"requests": 1, "attempts": 1, "attempt_timeout_ttl": 1, "async_accepted": 0}
		for _, name := range emfEndings {
			want[name] = 0
		}
		want["end_ttl_expired"] = 1
		for name, w := range want {
			if got, ok := v[name]; !ok || got != w {
				t.Errorf("%s = %v (present %v); want %v", name, got, ok, w)
			}
		}
		// Every ending the line carries is one /_gateway/stats counts.
		snap := stats.Snapshot()
		for _, name := range emfEndings {
			if _, ok := snap[name]; !ok {
				t.Errorf("EMF ending %s is not a /_gateway/stats counter", name)
			}
		}
		if snap["end_ttl_expired"] != 1 {
			t.Errorf("stats end_ttl_expired = %d; want 1, as the line says", snap["end_ttl_expired"])
		}
	})
}

// TestNoEMFByDefault: without EmfNamespace the line has no _aws.
func TestNoEMFByDefault(t *testing.T) {
	s := testSettings(t, "http://a.test")
	var buf bytes.Buffer
	h := &Handler{Settings: s, Forwarder: &core.Forwarder{Transport: staticRT{}}, Logger: slog.New(NewJSONLogHandler(&buf))}
	h.Init()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "http://gw.test/x", nil))
	if bytes.Contains(buf.Bytes(), []byte("_aws")) {
		t.Errorf("line %s carries _aws without EmfNamespace", buf.Bytes())
	}
}

// statusRT answers every attempt with its status code.
type statusRT int

func (rt statusRT) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: int(rt), Header: http.Header{}, Body: io.NopCloser(strings.NewReader("x")), ContentLength: 1, Request: r}, nil
}

// TestEMFLineStatusClass: the line counts its answer's status class,
// the backend's as the gateway's (a backend answering 503 is a 5xx with no
// gateway error code), with 1 in exactly one of status_2xx … status_5xx,
// by route; /_gateway/stats counts the same.
func TestEMFLineStatusClass(t *testing.T) {
	for _, c := range []struct {
		name   string
		rt     http.RoundTripper
		ttl    string
		status int
		want   string
	}{
		{"backend 200", statusRT(200), "", 200, "status_2xx"},
		{"backend 302", statusRT(302), "", 302, "status_3xx"},
		{"backend 429", statusRT(429), "", 429, "status_4xx"},
		{"backend 503", statusRT(503), "", 503, "status_5xx"},
		{"gateway 504 TTLExpired", &firstHangsRT{}, "0.05", 504, "status_5xx"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := testSettings(t, "http://a.test")
			s.EmfNamespace = "Gateway/Test"
			if err := s.Routes.Decode(`[{"prefix":"/api","maxAttempts":1}]`); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			stats := &core.Stats{}
			h := &Handler{Settings: s, Stats: stats, Forwarder: &core.Forwarder{Transport: c.rt, Stats: stats},
				Logger: slog.New(NewJSONLogHandler(&buf))}
			h.Init()
			r := httptest.NewRequest("GET", "http://gw.test/api/x", nil)
			if c.ttl != "" {
				r.Header.Set("S7PTTL", c.ttl)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != c.status {
				t.Fatalf("status = %d; want %d", w.Code, c.status)
			}
			_, v, dims := cloudWatchMetrics(t, bytes.TrimSpace(buf.Bytes()))
			snap := stats.Snapshot()
			for _, name := range core.StatusClassNames {
				want := one(name == c.want)
				if got, ok := v[name]; !ok || got != float64(want) {
					t.Errorf("line %s = %v (present %v); want %d", name, got, ok, want)
				}
				if snap[name] != want {
					t.Errorf("stats %s = %d; want %d, as the line says", name, snap[name], want)
				}
			}
			if len(dims) != 2 || len(dims[1]) != 1 || dims[1][0] != "/api" {
				t.Errorf("dimension values = %q; want [] and [/api]", dims)
			}
		})
	}
}

// TestEMFMetricCount: the documents say how many custom metrics the EMF
// lines make as the code declares them: every name of the request line and
// the async end line without dimensions, and the request line's again for
// each route.
func TestEMFMetricCount(t *testing.T) {
	all, perRoute := len(emfMetrics)+len(emfAsyncEndMetrics), len(emfMetrics)
	for _, c := range []struct{ file, want string }{
		{"../../docs/observability.md", fmt.Sprintf("%d names (%d custom metrics, plus %d for each route with a prefix)", perRoute, perRoute, perRoute)},
		{"../../docs/observability.md", fmt.Sprintf("adds %d custom metrics: %d in all, plus %d for each route with a prefix", len(emfAsyncEndMetrics), all, perRoute)},
		{"../../docs/terraform.md", fmt.Sprintf("with no routes, %d metrics; each route adds its own %d", all, perRoute)},
	} {
		raw, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.Join(strings.Fields(string(raw)), " "), c.want) {
			t.Errorf("%s does not say %q", c.file, c.want)
		}
	}
}

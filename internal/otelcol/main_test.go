package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// started runs run in the background on 127.0.0.1:0 and returns the
// address the receiver logged it bound, once it logged it is ready; stop
// ends run and returns its error.
func started(t *testing.T, path string) (addr string, stop func() error) {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx, zap.New(core), path, "127.0.0.1:0") }()
	stop = func() error { cancel(); return <-done }
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for logs.FilterMessageSnippet("Everything is ready").Len() == 0 {
		select {
		case err := <-done:
			t.Fatalf("run returned before it was ready: %v", err)
		case <-tick.C: // the test's -timeout bounds the wait
		}
	}
	for _, e := range logs.FilterMessage("Starting HTTP server").All() {
		if a, ok := e.ContextMap()["endpoint"].(string); ok {
			return a, stop
		}
	}
	stop()
	t.Fatalf("the receiver logged no endpoint: %v", logs.All())
	return "", nil
}

func post(t *testing.T, url, body string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("POST %s: %s", url, resp.Status)
	}
}

// TestOneLinePerRequest sends traces and metrics at once and checks that
// the file holds one whole OTLP JSON line per request, each what was sent.
func TestOneLinePerRequest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	addr, stop := started(t, path)
	const n = 16
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			post(t, "http://"+addr+"/v1/traces", fmt.Sprintf(
				`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"%032x","spanId":"%016x","name":"span %d","kind":2}]}]}]}`, i+1, i+1, i))
		})
		wg.Go(func() {
			post(t, "http://"+addr+"/v1/metrics", fmt.Sprintf(
				`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"metric%d","gauge":{"dataPoints":[{"asInt":"%d"}]}}]}]}]}`, i, i))
		})
	}
	wg.Wait()
	if err := stop(); err != nil {
		t.Fatalf("run after its context ended: %v", err)
	}

	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	spans, metrics := map[string]bool{}, map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	lines := 0
	for sc.Scan() {
		lines++
		line := sc.Bytes()
		if td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(line); err == nil && td.SpanCount() > 0 {
			if td.SpanCount() != 1 {
				t.Errorf("a traces line has %d spans, want 1: %s", td.SpanCount(), line)
			}
			spans[td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Name()] = true
			continue
		}
		if md, err := (&pmetric.JSONUnmarshaler{}).UnmarshalMetrics(line); err == nil && md.MetricCount() > 0 {
			if md.MetricCount() != 1 {
				t.Errorf("a metrics line has %d metrics, want 1: %s", md.MetricCount(), line)
			}
			metrics[md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Name()] = true
			continue
		}
		t.Errorf("line %d is neither traces nor metrics: %q", lines, line)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if lines != 2*n || len(spans) != n || len(metrics) != n {
		t.Errorf("got %d lines, %d distinct spans, %d distinct metrics; want %d, %d, %d:\n%s", lines, len(spans), len(metrics), 2*n, n, n, b)
	}
	for i := range n {
		if !spans[fmt.Sprintf("span %d", i)] || !metrics[fmt.Sprintf("metric%d", i)] {
			t.Errorf("span %d or metric%d missing from the file:\n%s", i, i, b)
		}
	}
}

// TestBadInput: an output file that cannot be opened, and an endpoint that
// cannot be bound, are errors naming them.
func TestBadInput(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "no-such-dir", "out.jsonl")
	err := run(t.Context(), zap.NewNop(), bad, "127.0.0.1:0")
	if err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("run with -file %q: %v, want an error naming it", bad, err)
	}
	err = run(t.Context(), zap.NewNop(), filepath.Join(t.TempDir(), "out.jsonl"), "not-an-address")
	if err == nil || !strings.Contains(err.Error(), "not-an-address") {
		t.Errorf("run with -endpoint not-an-address: %v, want an error naming it", err)
	}
}

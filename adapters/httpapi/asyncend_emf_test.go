package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"fngateway/core/async"
	"fngateway/internal/settings"
)

// TestLogAsyncEndEMF: with an EMF namespace the async end line carries its
// attempts (as async_attempts, apart from the request lines' attempts) and one of async_succeeded, async_failed, async_canceled and
// async_expired as 1 (the others 0) in the namespace's dimensionless
// series; without one it has no _aws directive.
func TestLogAsyncEndEMF(t *testing.T) {
	states := map[async.State]string{
		async.StateSucceeded: "async_succeeded",
		async.StateFailed:    "async_failed",
		async.StateCanceled:  "async_canceled",
		async.StateExpired:   "async_expired",
	}
	arrival := time.Now().Add(-time.Second)
	for state, name := range states {
		var buf bytes.Buffer
		LogAsyncEnd(slog.New(slog.NewJSONHandler(&buf, nil)), settings.EmfNamespace("Gateway/Test"))(context.Background(),
			async.End{ID: "abc", State: state, Status: 200, Attempts: 3, Arrival: arrival, Completed: time.Now()})
		ns, values, dims := cloudWatchMetrics(t, bytes.TrimSpace(buf.Bytes()))
		if ns != "Gateway/Test" {
			t.Errorf("%s: namespace = %q; want Gateway/Test", state, ns)
		}
		if len(dims) != 1 || len(dims[0]) != 0 {
			t.Errorf("%s: dimensions = %v; want the dimensionless set only", state, dims)
		}
		if _, ok := values["attempts"]; ok || values["async_attempts"] != 3 {
			t.Errorf("%s: metrics %v; want async_attempts 3 and no attempts metric", state, values)
		}
		for _, other := range states {
			want := 0.0
			if other == name {
				want = 1
			}
			if v, ok := values[other]; !ok || v != want {
				t.Errorf("%s: %s = %v (declared %v); want %v", state, other, v, ok, want)
			}
		}
	}

	var buf bytes.Buffer
	LogAsyncEnd(slog.New(slog.NewJSONHandler(&buf, nil)), "")(context.Background(),
		async.End{ID: "abc", State: async.StateFailed, Arrival: arrival, Completed: time.Now()})
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["_aws"]; ok || m["async_failed"] != nil || m["msg"] != "async request ended" {
		t.Errorf("line without a namespace = %v; want the plain async end line", m)
	}
}

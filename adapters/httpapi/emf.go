package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"fngateway/core"
	"fngateway/internal/settings"
)

// The per-request log line in CloudWatch Embedded Metric Format (setting
// EmfNamespace, docs/observability.md#cloudwatch-embedded-metric-format): the line's own durationMs and attempts, plus
// the timeouts of its attempts by source, its retries, hedges and
// ejections (the attempts whose failure ejected their host), how it ended,
// the class of its status (status_2xx … status_5xx) and whether it was
// handed off to async, under the names of /_gateway/stats
// (1 or 0 on each line, so that a metric's Sum is the counter's rise),
// declared in an _aws object so that CloudWatch Logs extracts them as
// metrics, with no collector. The Terraform module's dashboard and alarms
// read these names (terraform/monitoring/panels.json; TestMonitoringNamesEmitted).

// emfMetric is one entry of the _aws directive's Metrics.
type emfMetric struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

// emfMetrics are the metrics of every line; their values are top-level keys.
var emfMetrics = []emfMetric{
	{"durationMs", "Milliseconds"},
	{"attempts", "Count"},
	{"retries", "Count"},
	{"hedges", "Count"},
	{"ejections", "Count"},
	{"attempt_timeout_ttl", "Count"},
	{"attempt_timeout_per_try", "Count"},
	{"attempt_timeout_function_limit", "Count"},
	{"requests", "Count"},
	{"end_ttl_expired", "Count"},
	{"end_attempt_timeout", "Count"},
	{"end_function_limit", "Count"},
	{"end_backend_unavailable", "Count"},
	{"end_client_gone", "Count"},
	{"end_bad_request", "Count"},
	{"end_request_timeout", "Count"},
	{"end_backend_auth_failed", "Count"},
	{"async_accepted", "Count"},
	{"async_unavailable", "Count"},
	{"status_2xx", "Count"},
	{"status_3xx", "Count"},
	{"status_4xx", "Count"},
	{"status_5xx", "Count"},
}

// emfEndings are the metrics of emfMetrics that count how a request ended:
// the line's ending (core.Reason.EndName) has 1, the others 0.
var emfEndings = []string{"end_ttl_expired", "end_attempt_timeout", "end_function_limit", "end_backend_unavailable",
	"end_client_gone", "end_bad_request", "end_request_timeout", "end_backend_auth_failed", "async_unavailable"}

// emfDirective is the _aws object.
type emfDirective struct {
	Timestamp         int64 `json:"Timestamp"`
	CloudWatchMetrics []struct {
		Namespace  string      `json:"Namespace"`
		Dimensions [][]string  `json:"Dimensions"`
		Metrics    []emfMetric `json:"Metrics"`
	} `json:"CloudWatchMetrics"`
}

// timelineCounts are what a request's attempts say, for its log line.
type timelineCounts struct {
	// hedges: attempts started beside a running one (Attempt.Hedge).
	hedges int64
	// ejections: attempts whose failure ejected their host (Attempt.Ejected).
	ejections int64
	// ttl, perTry, limit: attempts cut by each deadline (Attempt.Cause).
	ttl, perTry, limit int64
}

// countTimeline counts the hedges, ejections and deadline cuts of the
// attempts tl.
func countTimeline(tl []core.Attempt) timelineCounts {
	var c timelineCounts
	for _, a := range tl {
		c.hedges += one(a.Hedge)
		c.ejections += one(a.Ejected)
		switch a.Cause {
		case core.CauseTTL:
			c.ttl++
		case core.CauseTimeout:
			c.perTry++
		case core.CauseFunctionLimit:
			c.limit++
		}
	}
	return c
}

// logEMF writes the per-request line with the EMF directive and values.
// The route, when it has a prefix, is a dimension; every line also counts
// in the namespace's dimensionless series. attrs already carry durationMs,
// attempts, hedges and ejections (the plain line's fields); tl are the
// attempts' counts.
func (h *Handler) logEMF(ctx context.Context, hd slog.Handler, now time.Time, level slog.Level, msg string, attrs []slog.Attr, lg *requestLog, tl timelineCounts) {
	dims := [][]string{{}}
	if lg.route != "" {
		dims = append(dims, []string{"route"})
	}
	raw := emfDirectiveJSON(h.Settings.EmfNamespace, now, emfMetrics, dims)
	rec := slog.NewRecord(now, level, msg, 0)
	rec.AddAttrs(attrs...)
	rec.AddAttrs(
		slog.Int64("retries", int64(max(lg.attempts-1, 0))),
		slog.Int64("attempt_timeout_ttl", tl.ttl),
		slog.Int64("attempt_timeout_per_try", tl.perTry),
		slog.Int64("attempt_timeout_function_limit", tl.limit),
		slog.Int64("requests", 1),
	)
	ended := lg.reason.EndName()
	for _, name := range emfEndings {
		rec.AddAttrs(slog.Int64(name, one(name == ended)))
	}
	class := core.StatusClassName(lg.status)
	for _, name := range core.StatusClassNames {
		rec.AddAttrs(slog.Int64(name, one(name == class)))
	}
	rec.AddAttrs(
		slog.Int64("async_accepted", one(lg.async != "" && lg.status == http.StatusAccepted)),
		slog.Any("_aws", json.RawMessage(raw)),
	)
	hd.Handle(ctx, rec)
}

// one is 1 when b holds, 0 otherwise: a count on one line.
func one(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// emfAsyncEndMetrics are the metrics of the async end line (LogAsyncEnd):
// its attempts as async_attempts (not attempts, which the request lines
// already count: the inline attempts of an async request would count twice),
// and 1 for the state it ended in (0 for the others).
var emfAsyncEndMetrics = []emfMetric{
	{"async_attempts", "Count"},
	{"async_succeeded", "Count"},
	{"async_failed", "Count"},
	{"async_canceled", "Count"},
	{"async_expired", "Count"},
}

// emfAsyncEndDirective is the _aws object of the async end line in
// namespace ns: the dimensionless series only, as the ending does not know
// its request's route.
func emfAsyncEndDirective(ns settings.EmfNamespace, now time.Time) json.RawMessage {
	return emfDirectiveJSON(ns, now, emfAsyncEndMetrics, [][]string{{}})
}

// emfDirectiveJSON is the _aws object of one line: metrics in namespace
// ns under the dimension sets dims, at now.
func emfDirectiveJSON(ns settings.EmfNamespace, now time.Time, metrics []emfMetric, dims [][]string) json.RawMessage {
	d := emfDirective{Timestamp: now.UnixMilli()}
	d.CloudWatchMetrics = make([]struct {
		Namespace  string      `json:"Namespace"`
		Dimensions [][]string  `json:"Dimensions"`
		Metrics    []emfMetric `json:"Metrics"`
	}, 1)
	m := &d.CloudWatchMetrics[0]
	m.Namespace, m.Metrics, m.Dimensions = string(ns), metrics, dims
	raw, _ := json.Marshal(d)
	return raw
}

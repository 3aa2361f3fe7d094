package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"fngateway/core"
)

// The per-request log line in CloudWatch Embedded Metric Format (setting
// EmfNamespace, CONTRACT §7): the line's own durationMs and attempts, plus
// the timeouts of its attempts by source and its retries under the names of
// /_gateway/stats, declared in an _aws object so that CloudWatch Logs
// extracts them as metrics, with no collector.

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
	{"attempt_timeout_ttl", "Count"},
	{"attempt_timeout_per_try", "Count"},
	{"attempt_timeout_function_limit", "Count"},
}

// emfDirective is the _aws object.
type emfDirective struct {
	Timestamp         int64 `json:"Timestamp"`
	CloudWatchMetrics []struct {
		Namespace  string      `json:"Namespace"`
		Dimensions [][]string  `json:"Dimensions"`
		Metrics    []emfMetric `json:"Metrics"`
	} `json:"CloudWatchMetrics"`
}

// logEMF writes the per-request line with the EMF directive and values.
// The route, when it has a prefix, is a dimension; every line also counts
// in the namespace's dimensionless series.
func (h *Handler) logEMF(ctx context.Context, hd slog.Handler, now time.Time, level slog.Level, msg string, attrs []slog.Attr, lg *requestLog) {
	var ttl, perTry, limit int64
	for _, a := range lg.timeline {
		switch a.Cause {
		case core.CauseTTL:
			ttl++
		case core.CauseTimeout:
			perTry++
		case core.CauseFunctionLimit:
			limit++
		}
	}
	d := emfDirective{Timestamp: now.UnixMilli()}
	d.CloudWatchMetrics = make([]struct {
		Namespace  string      `json:"Namespace"`
		Dimensions [][]string  `json:"Dimensions"`
		Metrics    []emfMetric `json:"Metrics"`
	}, 1)
	m := &d.CloudWatchMetrics[0]
	m.Namespace, m.Metrics, m.Dimensions = string(h.Settings.EmfNamespace), emfMetrics, [][]string{{}}
	if lg.route != "" {
		m.Dimensions = append(m.Dimensions, []string{"route"})
	}
	raw, _ := json.Marshal(d)
	rec := slog.NewRecord(now, level, msg, 0)
	rec.AddAttrs(attrs...)
	rec.AddAttrs(
		slog.Int64("retries", int64(max(lg.attempts-1, 0))),
		slog.Int64("attempt_timeout_ttl", ttl),
		slog.Int64("attempt_timeout_per_try", perTry),
		slog.Int64("attempt_timeout_function_limit", limit),
		slog.Any("_aws", json.RawMessage(raw)),
	)
	hd.Handle(ctx, rec)
}

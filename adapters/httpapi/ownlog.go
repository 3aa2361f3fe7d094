package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"fngateway/core/async"
	"fngateway/internal/settings"
)

// ownWriter records the status of an answer of the gateway's own
// endpoints, for their log line.
type ownWriter struct {
	http.ResponseWriter
	status int
}

func (w *ownWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *ownWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush flushes the underlying writer, if it can.
func (w *ownWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		if w.status == 0 {
			w.status = http.StatusOK
		}
		f.Flush()
	}
}

// Unwrap is for http.ResponseController.
func (w *ownWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// logOwn writes the log line of a request to the gateway's own endpoints
// (/_gateway/), at GatewayEndpointLogLevel: the per-request line's
// method, path, route (/_gateway/), status, code, attempts (0) and
// durationMs.
func (h *Handler) logOwn(r *http.Request, w *ownWriter, start time.Time) {
	ctx := r.Context()
	level := h.Settings.GatewayEndpointLogLevel.Level()
	if !h.Logger.Handler().Enabled(ctx, level) {
		return
	}
	status := w.status
	if status == 0 {
		status = http.StatusOK // net/http sends 200 for a handler that wrote nothing
		if ctx.Err() != nil {
			status = 499 // the client left first
		}
	}
	h.Logger.LogAttrs(ctx, level, "request",
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.String("route", "/_gateway/"),
		slog.Int("status", status),
		slog.String("code", w.Header().Get("X-Gateway-Error")),
		slog.Int("attempts", 0),
		slog.Int64("durationMs", time.Since(start).Milliseconds()))
}

// LogAsyncEnd returns an async.Async OnEnd that writes one line to logger
// when an async request ends (docs/observability.md#when-an-async-request-ends), in whichever invocation that
// is: "async request ended" with the request's id (async, as the request
// line names it), its final state, status, code and attempts, and
// durationMs from its arrival to its committed result. Info level; Warn
// for an ending that is not a success. With an EMF namespace (setting
// EmfNamespace) the line is in CloudWatch Embedded Metric Format too: its
// attempts again as async_attempts, and async_succeeded, async_failed, async_canceled and
// async_expired, 1 for its state and 0 for the others, in the namespace's
// dimensionless series.
func LogAsyncEnd(logger *slog.Logger, ns settings.EmfNamespace) func(ctx context.Context, e async.End) {
	return func(ctx context.Context, e async.End) {
		level := slog.LevelInfo
		if e.State != async.StateSucceeded {
			level = slog.LevelWarn
		}
		attrs := []slog.Attr{
			slog.String("async", e.ID),
			slog.String("state", string(e.State)),
			slog.Int("status", e.Status),
			slog.String("code", e.Code),
			slog.Int("attempts", e.Attempts),
			slog.Int64("durationMs", e.Completed.Sub(e.Arrival).Milliseconds()),
		}
		if ns != "" {
			attrs = append(attrs,
				slog.Int("async_attempts", e.Attempts),
				slog.Int64("async_succeeded", one(e.State == async.StateSucceeded)),
				slog.Int64("async_failed", one(e.State == async.StateFailed)),
				slog.Int64("async_canceled", one(e.State == async.StateCanceled)),
				slog.Int64("async_expired", one(e.State == async.StateExpired)),
				slog.Any("_aws", emfAsyncEndDirective(ns, time.Now())))
		}
		logger.LogAttrs(ctx, level, "async request ended", attrs...)
	}
}

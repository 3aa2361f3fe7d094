package main

import (
	"context"
	"log/slog"
	"os"

	"fngateway/adapters/httpapi"
	"fngateway/infra/otel"
)

// wireTelemetry builds the OpenTelemetry export the standard OTEL_*
// variables name (docs/observability.md#turning-it-on) and connects it to h: the observer of its
// attempts and continuations, the server span around it, the trace ids in
// its log lines, and the metrics; the caller wraps h in the returned
// telemetry's Handler and shuts it down. Without an endpoint it creates
// nothing and returns a nil *otel.Telemetry. perInvocation is the export
// of a host frozen between invocations (Lambda), flushed by the caller. It
// must run after h's async wiring and Init.
func wireTelemetry(ctx context.Context, h *httpapi.Handler, cloud string, perInvocation bool) (*otel.Telemetry, error) {
	o := otel.Options{Lookup: os.LookupEnv, Resource: hostResource(cloud), PerInvocation: perInvocation,
		Stats: h.Stats, BufferedBytes: h.BufferedBytes}
	if h.Async != nil && h.Async.Continuations != nil {
		c := h.Async.Continuations
		o.BusySlots = func() int64 { return int64(c.Max() - c.Free()) }
	}
	tel, err := otel.New(ctx, o)
	if err != nil || tel == nil {
		return nil, err
	}
	h.Forwarder.Observer = tel
	if hd, ok := httpapi.WithTraceIDs(h.Logger.Handler(), tel.SpanIDs); ok {
		h.Logger = slog.New(hd) // the JSON handler's own short path
	} else {
		h.Logger = slog.New(tel.LogHandler(h.Logger.Handler()))
	}
	return tel, nil
}

// hostResource returns the resource attributes the host tells: the cloud,
// the function's name, instance and region.
func hostResource(cloud string) map[string]string {
	switch cloud {
	case "aws":
		return map[string]string{"cloud.provider": "aws", "faas.name": os.Getenv("AWS_LAMBDA_FUNCTION_NAME"),
			"faas.instance": os.Getenv("AWS_LAMBDA_LOG_STREAM_NAME"), "faas.version": os.Getenv("AWS_LAMBDA_FUNCTION_VERSION"),
			"cloud.region": os.Getenv("AWS_REGION")}
	case "azure":
		return map[string]string{"cloud.provider": "azure", "faas.name": os.Getenv("WEBSITE_SITE_NAME"),
			"faas.instance": os.Getenv("WEBSITE_INSTANCE_ID"), "cloud.region": os.Getenv("REGION_NAME")}
	}
	return map[string]string{}
}

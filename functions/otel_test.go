package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"fngateway/adapters/httpapi"
	"fngateway/adapters/local"
	"fngateway/internal/settings"
)

// TestTelemetryOnlyWithEndpoint: without an OTLP endpoint nothing of
// OpenTelemetry is created (the handler is the HTTP face itself, no
// observer); with one, the handler is wrapped and attempts are observed;
// OTEL_SDK_DISABLED=true wins over an endpoint.
func TestTelemetryOnlyWithEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		on   bool
	}{
		{"no endpoint", map[string]string{}, false},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, true},
		{"disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_SDK_DISABLED": "true"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_SDK_DISABLED"} {
				t.Setenv(k, tc.env[k])
			}
			s := settings.DefaultSettings()
			if err := s.Hosts.Decode("http://127.0.0.1:1"); err != nil {
				t.Fatal(err)
			}
			gw, err := assemble(context.Background(), &s, local.Caps(), slog.New(httpapi.NewJSONLogHandler(t.Output())))
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				gw.drain(ctx)
			}()
			_, plain := gw.handler.(*httpapi.Live) // not wrapped by the telemetry
			on := gw.telemetry != nil && gw.api.Forwarder.Observer != nil && !plain
			if on != tc.on || (!tc.on && (gw.telemetry != nil || gw.api.Forwarder.Observer != nil || !plain)) {
				t.Errorf("telemetry on = %v (telemetry %v, observer %v, plain handler %v); want %v",
					on, gw.telemetry != nil, gw.api.Forwarder.Observer != nil, plain, tc.on)
			}
		})
	}
}

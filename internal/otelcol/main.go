// Command otelcol is the OpenTelemetry receiver the trace and metric tests
// assert on: the OpenTelemetry Collector's own OTLP receiver and the
// contrib file exporter, built from their modules at one release (pinned
// in this directory's go.mod, a module of its own so that none of it
// reaches the gateway's dependencies). `make tools` builds it into
// .tools/bin/otelcol; internal/emulators starts it.
//
// The Collector's telemetry is reduced to a logger on standard error: no
// metrics or traces of its own, and no resource detectors.
package main

import (
	"context"
	"log"
	"os"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func components() (otelcol.Factories, error) {
	var f otelcol.Factories
	var err error
	if f.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory()); err != nil {
		return f, err
	}
	if f.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](fileexporter.NewFactory()); err != nil {
		return f, err
	}
	f.Telemetry = telemetry.NewFactory(
		func() component.Config { return &struct{}{} },
		telemetry.WithCreateLogger(stderrLogger),
	)
	return f, nil
}

// stderrLogger logs at info level, in the console format, to standard
// error: the emulator reads the receiver's "Starting HTTP server" line for
// the address it bound.
func stderrLogger(context.Context, telemetry.LoggerSettings, component.Config) (*zap.Logger, component.ShutdownFunc, error) {
	enc := zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())
	core := zapcore.NewCore(enc, zapcore.Lock(os.Stderr), zapcore.InfoLevel)
	return zap.New(core), nil, nil
}

func main() {
	set := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{Command: "otelcol", Description: "OTLP receiver and file exporter for the gateway's tests", Version: "test"},
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory()},
				DefaultScheme:     "file",
			},
		},
	}
	if err := otelcol.NewCommand(set).Execute(); err != nil {
		log.Fatal(err)
	}
}

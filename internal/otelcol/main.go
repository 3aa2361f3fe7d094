// Command otelcol is the OpenTelemetry receiver the trace and metric tests
// assert on: the OpenTelemetry Collector's own OTLP receiver
// (go.opentelemetry.io/collector/receiver/otlpreceiver, pinned in this
// directory's go.mod, a module of its own so that none of it reaches the
// gateway's dependencies), listening for OTLP/HTTP only, and appending
// every request it accepts as one line of OTLP JSON to a file. `make tools`
// builds it into .tools/bin/otelcol; internal/emulators starts it:
//
//	otelcol -file PATH [-endpoint 127.0.0.1:0]
//
// It drives the receiver directly instead of running the full Collector
// (otelcol, service, confmap providers, the contrib file exporter): the
// tests need one receiver and one file, and the Collector's service
// framework (its own telemetry, Prometheus, cobra, configuration
// resolution) is most of what building it costs: see
// docs/development.md for the figures. The receiver is the Collector's
// own, so what it accepts and answers is what a Collector's would be; the
// lines are the encoding the file exporter wrote (ptrace/pmetric
// JSONMarshaler).
//
// Its own telemetry is a console logger on standard error, at info level;
// the receiver's "Starting HTTP server" line names the address it bound,
// and "Everything is ready" follows once it serves.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func main() {
	file := flag.String("file", "", "the file each received request is appended to, as one line of OTLP JSON (required)")
	endpoint := flag.String("endpoint", "127.0.0.1:0", "host:port the OTLP/HTTP receiver listens on (port 0: one it picks, logged)")
	flag.Parse()
	if *file == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "otelcol: usage: otelcol -file PATH [-endpoint HOST:PORT]")
		os.Exit(2)
	}
	logger := zap.New(zapcore.NewCore(
		zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()),
		zapcore.Lock(os.Stderr), zapcore.InfoLevel))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, logger, *file, *endpoint); err != nil {
		logger.Error("otelcol failed", zap.Error(err))
		os.Exit(1)
	}
}

// run starts the receiver, serves until ctx ends (main's: SIGTERM or
// SIGINT) or the receiver's HTTP server fails, and shuts it down.
func run(ctx context.Context, logger *zap.Logger, path, endpoint string) error {
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open the output file -file %q: %w", path, err)
	}
	defer out.Close()
	w := &lineWriter{f: out}

	factory := otlpreceiver.NewFactory()
	cfg := factory.CreateDefaultConfig().(*otlpreceiver.Config)
	// The default config enables no protocol (a YAML `http:` key would):
	// enable HTTP with its defaults, gRPC stays off.
	cfg.Protocols.HTTP.GetOrInsertDefault().ServerConfig.NetAddr.Endpoint = endpoint

	set := receiver.Settings{
		ID: component.NewID(factory.Type()),
		TelemetrySettings: component.TelemetrySettings{
			Logger:         logger,
			TracerProvider: tracenoop.NewTracerProvider(),
			MeterProvider:  metricnoop.NewMeterProvider(),
			Resource:       pcommon.NewResource(),
		},
		BuildInfo: component.BuildInfo{Command: "otelcol", Description: "OTLP/HTTP receiver writing OTLP JSON lines, for the gateway's tests", Version: "test"},
	}
	traces, err := consumer.NewTraces(jsonLines(w, (&ptrace.JSONMarshaler{}).MarshalTraces))
	if err != nil {
		return err
	}
	metrics, err := consumer.NewMetrics(jsonLines(w, (&pmetric.JSONMarshaler{}).MarshalMetrics))
	if err != nil {
		return err
	}

	// One config, one receiver: the factory shares it between the two
	// signals, so rcv and the metrics receiver are the same component.
	rcv, err := factory.CreateTraces(ctx, set, cfg, traces)
	if err != nil {
		return fmt.Errorf("create the traces receiver: %w", err)
	}
	if _, err := factory.CreateMetrics(ctx, set, cfg, metrics); err != nil {
		return fmt.Errorf("create the metrics receiver: %w", err)
	}

	h := &host{fatal: make(chan error, 1)}
	if err := rcv.Start(context.WithoutCancel(ctx), h); err != nil {
		return fmt.Errorf("start the receiver on -endpoint %q: %w", endpoint, err)
	}
	logger.Info("Everything is ready. Begin running and processing data.")

	var fatal error
	select {
	case <-ctx.Done():
		logger.Info("Shutting down", zap.NamedError("cause", context.Cause(ctx)))
	case fatal = <-h.fatal:
	}
	return errors.Join(fatal, rcv.Shutdown(context.WithoutCancel(ctx)))
}

// lineWriter appends whole lines to a file: one Write each, under a mutex,
// so that requests served at once never interleave and a reader sees at
// most one unfinished line, the last.
// jsonLines is a consumer that writes each export it is given, marshalled
// to OTLP JSON, as one line of w.
func jsonLines[T any](w *lineWriter, marshal func(T) ([]byte, error)) func(context.Context, T) error {
	return func(_ context.Context, data T) error {
		b, err := marshal(data)
		if err != nil {
			return err
		}
		return w.writeLine(b)
	}
}

type lineWriter struct {
	mu sync.Mutex
	f  *os.File
}

func (w *lineWriter) writeLine(b []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err := w.f.Write(append(b, '\n'))
	return err
}

// host is the receiver's component.Host: no extensions (the receiver's
// config names no authenticator), and a fatal error of its HTTP server
// (reported after Start returned) ends the process.
type host struct{ fatal chan error }

func (*host) GetExtensions() map[component.ID]component.Component {
	return map[component.ID]component.Component{}
}

// Report implements componentstatus.Reporter.
func (h *host) Report(ev *componentstatus.Event) {
	if ev.Status() == componentstatus.StatusFatalError {
		select {
		case h.fatal <- ev.Err():
		default:
		}
	}
}

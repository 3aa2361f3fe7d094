// Command functions is the gateway's one binary. It picks its host at
// start-up (CONTRACT §1): AWS Lambda when AWS_LAMBDA_RUNTIME_API is set, an
// Azure Functions custom handler when FUNCTIONS_CUSTOMHANDLER_PORT is set,
// and otherwise a local server on ListenAddr.
//
//	functions            run the gateway on the host the environment names
//	functions --demo     run it locally in front of three built-in backends
//	functions explain    print the budget timeline of a request
//	functions check URL  probe a deployed gateway, report pass/fail
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"fngateway/adapters/httpapi"
	"fngateway/adapters/local"
	"fngateway/core"
	"fngateway/infra/otel"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "explain" {
		os.Exit(runExplain(os.Args[2:], os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == "check" {
		os.Exit(runCheck(os.Args[2:], os.Stdout, os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run starts the gateway and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	logger := slog.New(httpapi.NewJSONLogHandler(stdout))
	demo := false
	for _, a := range args {
		switch a {
		case "--demo", "-demo":
			demo = true
		case "-h", "--help", "help":
			fmt.Fprintln(stdout, "usage: functions [--demo] | functions explain [flags] | functions check [flags] <URL>")
			return 0
		default:
			fmt.Fprintf(stderr, "functions: unknown argument %q; want --demo, explain, check or nothing\n", a)
			return 2
		}
	}
	switch {
	case os.Getenv("AWS_LAMBDA_RUNTIME_API") != "":
		return runLambda(ctx, stdout, stderr)
	case os.Getenv("FUNCTIONS_CUSTOMHANDLER_PORT") != "":
		return runAzureFunctions(ctx, logger, stderr)
	}
	var demoBackends *demoSet
	if demo {
		d, err := startDemo(ctx)
		if err != nil {
			fmt.Fprintf(stderr, "functions: demo backends: %v\n", err)
			return 1
		}
		defer d.Close()
		d.setEnv()
		demoBackends = d
	}
	s, limit, err := loadSettings(0)
	if err != nil {
		fmt.Fprintf(stderr, "functions: %v\n", err)
		return 2
	}
	gw, err := newGateway(ctx, s, limit, local.Caps(), logger)
	if err != nil {
		fmt.Fprintf(stderr, "functions: %v\n", err)
		if se := (*core.SettingError)(nil); errors.As(err, &se) {
			return 2
		}
		return 1
	}
	srv := &local.Server{Addr: s.ListenAddr, Handler: gw.handler, Limit: limit, Logger: logger,
		Ready: func(a net.Addr) {
			if demoBackends != nil {
				demoBackends.printHelp(stderr, a.String())
			}
		}}
	workers := make(chan struct{})
	go func() {
		defer close(workers)
		gw.runWorkers(ctx)
	}()
	if code := serveAndDrain(ctx, srv.Run, gw, logger, stderr); code != 0 {
		return code
	}
	<-workers
	logger.Info("stopped")
	return 0
}

// serveAndDrain runs serve until ctx ends, and meanwhile drains gw's
// continuations once ctx is done: on SIGTERM the server stops taking
// requests (the local worker stops receiving) while the continuations in
// progress get core.DrainGrace to finish; those that cannot are stopped and
// their claims released, so the queued continuation resumes them at once.
// It returns the process exit code.
func serveAndDrain(ctx context.Context, serve func(context.Context) error, gw *gateway, logger *slog.Logger, stderr io.Writer) int {
	drained := make(chan error, 1)
	go func() {
		<-ctx.Done()
		dctx, cancel := context.WithTimeout(context.Background(), core.DrainGrace)
		defer cancel()
		drained <- gw.drain(dctx)
	}()
	if err := serve(ctx); err != nil {
		fmt.Fprintf(stderr, "functions: %v\n", err)
		return 1
	}
	if err := <-drained; err != nil {
		logger.Warn("draining continuations", slog.String("err", err.Error()))
	}
	return 0
}

// gateway is the assembled gateway: the HTTP handler, what runs
// continuations in-process, and what drains them at shutdown.
type gateway struct {
	handler    http.Handler
	api        *httpapi.Handler
	telemetry  *otel.Telemetry // nil: no export
	runWorkers func(ctx context.Context)
	drain      func(ctx context.Context) error
}

// newGateway connects the store, queue and core to the HTTP handler, for a
// host that can do what host states.
func newGateway(ctx context.Context, s *core.Settings, limit time.Duration, host core.HostCaps, logger *slog.Logger) (*gateway, error) {
	stats := &core.Stats{}
	fwd := &core.Forwarder{
		Transport:   core.NewTransport(),
		BackoffBase: s.RetryBackoffMs.D(),
		Stats:       stats,
	}
	if err := upstreamPolicy(ctx, s, fwd); err != nil {
		return nil, err
	}
	h := &httpapi.Handler{Settings: s, Forwarder: fwd, Stats: stats, Logger: logger, Host: host}
	gw := &gateway{handler: h, api: h, runWorkers: func(context.Context) {}, drain: func(context.Context) error { return nil }}
	if err := wireAsync(ctx, s, h, gw, limit, logger); err != nil {
		return nil, err
	}
	h.Init()
	cloud := ""
	if host.Name == "lambda" {
		cloud = "aws"
	}
	tel, err := wireTelemetry(ctx, h, gw, cloud, cloud == "aws")
	if err != nil {
		return nil, err
	}
	gw.telemetry = tel
	return gw, nil
}

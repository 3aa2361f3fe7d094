// Command functions is the gateway's one binary. It picks its host at
// start-up (docs/settings.md#read-from-the-platform): AWS Lambda when AWS_LAMBDA_RUNTIME_API is set, an
// Azure Functions custom handler when FUNCTIONS_CUSTOMHANDLER_PORT is set,
// and otherwise a local server on ListenAddr.
//
//	gateway                  run the gateway on the host the environment names
//	gateway --demo           run it locally in front of three built-in backends
//	gateway explain          print the budget timeline of a request
//	gateway check URL        probe a deployed gateway, report pass/fail
//	gateway deadletters list | show <id> | redrive | purge [--dry-run] [<id>…]
//	                         look at, send back or discard the continuations set aside
//
// (go build -o gateway ./functions: functions/ is the source folder.)
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

	"fngateway/adapters/azurefunctions"
	"fngateway/adapters/httpapi"
	"fngateway/adapters/lambda"
	"fngateway/adapters/local"
	"fngateway/core"
	"fngateway/core/async"
	"fngateway/infra/filestore"
	"fngateway/infra/otel"
	"fngateway/internal/ops"
	"fngateway/internal/settings"
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
	if len(os.Args) > 1 && os.Args[1] == "deadletters" {
		code := runDeadLetters(ctx, os.Args[2:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
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
			fmt.Fprintln(stdout, "usage: gateway [--demo] | gateway explain [flags] | gateway check [flags] <URL> | gateway deadletters list|show|redrive")
			return 0
		default:
			fmt.Fprintf(stderr, "gateway: unknown argument %q; want --demo, explain, check, deadletters or nothing\n", a)
			return 2
		}
	}
	var err error
	switch {
	case os.Getenv("AWS_LAMBDA_RUNTIME_API") != "":
		err = runLambda(ctx, logger)
	case os.Getenv("FUNCTIONS_CUSTOMHANDLER_PORT") != "":
		err = runAzureFunctions(ctx, logger)
	default:
		err = runLocal(ctx, demo, logger, stderr)
	}
	return ops.ExitCode(stderr, err)
}

// runLocal runs the gateway as a local server on ListenAddr, with the
// in-process queue worker, until ctx ends (SIGTERM), and with --demo in
// front of the demo backends.
func runLocal(ctx context.Context, demo bool, logger *slog.Logger, stderr io.Writer) error {
	var demoBackends *demoSet
	env := os.LookupEnv
	if demo {
		d, err := startDemo(ctx)
		if err != nil {
			return fmt.Errorf("demo backends: %w", err)
		}
		defer d.Close()
		env = d.under(env)
		demoBackends = d
	}
	s, limit, reloader, err := openSettingsFrom(ctx, env, 0, logger)
	if err != nil {
		return err
	}
	gw, err := assemble(ctx, s, local.Caps(), logger)
	if err != nil {
		return err
	}
	gw.serveSettings(reloader)
	ln, err := net.Listen("tcp", s.ListenAddr)
	if err != nil {
		// Nothing is left behind: the store directory this start created
		// goes too.
		gw.abandon(ctx)
		return fmt.Errorf("setting ListenAddr=%q: %w", s.ListenAddr, err)
	}
	srv := &local.Server{Listener: ln, Handler: gw.handler, Limit: limit, Logger: logger,
		Ready: func(a net.Addr) {
			if demoBackends != nil {
				demoBackends.printHelp(stderr, a.String())
			}
		}}
	var g group
	addServer(&g, ctx, srv.Run, gw, logger)
	addUntilInterrupted(&g, ctx, reloader.Run)
	if gw.async != nil {
		w := localWorker(s, gw.async, limit, logger)
		addUntilInterrupted(&g, ctx, w.Run)
	}
	if files := gw.files; files != nil {
		addUntilInterrupted(&g, ctx, func(ctx context.Context) {
			files.RunSweeper(ctx, 0, 0, func(err error) {
				logger.WarnContext(ctx, "sweeping expired async requests", slog.String("err", err.Error()))
			})
		})
	}
	if err := g.Run(); err != nil {
		return err
	}
	logger.Info("stopped")
	return nil
}

// addServer adds to g a server, which serves until ctx ends (SIGTERM) or
// another of g's goroutines returns, and the drain of gw's continuations
// at the same moment: the server stops taking requests (the local worker
// stops receiving) while the continuations in progress get async.DrainGrace
// to finish; those that cannot are stopped and their claims released, so
// the queued continuation resumes them at once. A server that fails to
// start ends the group.
func addServer(g *group, ctx context.Context, serve func(context.Context) error, gw *gateway, logger *slog.Logger) {
	term, stopTerm := context.WithCancel(ctx)
	g.Add(func() error { <-term.Done(); return nil }, func(error) { stopTerm() })
	sctx, stop := context.WithCancel(ctx)
	g.Add(func() error { return serve(sctx) }, func(error) { stop() })
	drain := make(chan struct{})
	g.Add(func() error {
		<-drain
		dctx, cancel := context.WithTimeout(context.Background(), async.DrainGrace)
		defer cancel()
		if err := gw.drain(dctx); err != nil {
			logger.Warn("draining continuations", slog.String("err", err.Error()))
		}
		return nil
	}, func(error) { close(drain) })
}

// addUntilInterrupted adds to g a goroutine that runs until ctx ends or
// it is interrupted.
func addUntilInterrupted(g *group, ctx context.Context, run func(context.Context)) {
	ctx, stop := context.WithCancel(ctx)
	g.Add(func() error { run(ctx); return nil }, func(error) { stop() })
}

// gateway is the assembled gateway: the parts built from the settings for
// one host.
type gateway struct {
	// handler is what the host serves: api, wrapped by the telemetry.
	handler http.Handler
	// api is the gateway's HTTP face as assembled.
	api *httpapi.Handler
	// live serves with api, or with the copy of it a settings reload
	// swapped in.
	live *httpapi.Live
	// async runs continuations; nil with AsyncModeEnabled=false.
	async *async.Async
	// files is the embedded store (AsyncStore=file:), which sweeps what
	// expired; nil otherwise.
	files *filestore.Store
	// telemetry exports traces and metrics; nil without an OTLP endpoint.
	telemetry *otel.Telemetry
	// undo removes what assembling created (the embedded store's
	// directories); nil when nothing was.
	undo func()
}

// abandon undoes a gateway that will never serve: its telemetry is shut
// down and what assembling created is removed, so that a failed start-up
// leaves nothing behind.
func (gw *gateway) abandon(ctx context.Context) {
	if gw.telemetry != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		gw.telemetry.Shutdown(sctx)
	}
	if gw.undo != nil {
		gw.undo()
	}
}

// assemble builds the gateway from the settings for a host that can do
// what host states: the Forwarder with its upstream policy, the HTTP face,
// the async engine over its store and queue (only with AsyncModeEnabled)
// and the telemetry. What only one host runs (the local worker, the
// Lambda handler, the Functions server) its run path builds.
func assemble(ctx context.Context, s *settings.Settings, host core.HostCaps, logger *slog.Logger) (_ *gateway, err error) {
	stats := &core.Stats{}
	transport := core.NewTransport()
	transport.MaxResponseHeaderBytes = int64(s.MaxResponseHeaderBytes)
	fwd := &core.Forwarder{
		Transport:   transport,
		BackoffBase: s.RetryBackoffMs.D(),
		Stats:       stats,
	}
	if err := upstreamPolicy(ctx, s, fwd); err != nil {
		return nil, err
	}
	h := &httpapi.Handler{Settings: s, Forwarder: fwd, Stats: stats, Logger: logger, Host: host}
	gw := &gateway{handler: h, api: h}
	// docs/deploy-aws.md#how-it-runs: with async off nothing is opened, so a host with a
	// read-only file system (Lambda's /var/task) starts without a store.
	if s.AsyncModeEnabled {
		var p *asyncParts
		if p, err = openAsync(ctx, s); err != nil {
			return nil, err
		}
		// A start-up that fails after this leaves nothing behind: the
		// directories the embedded store created are removed.
		defer func() {
			if err != nil && p.undo != nil {
				p.undo()
			}
		}()
		if err := async.ValidateTopics(s.UserProfiles, p.notifier); err != nil {
			return nil, err
		}
		gw.async, gw.undo = newAsync(s, p, fwd, stats, host, logger), p.undo
		h.Async = gw.async
		if p.files != nil {
			gw.files, h.Blobs = p.files, p.files
		}
	}
	h.Init()
	// A host frozen between invocations (Lambda) flushes its export after
	// each one.
	tel, err := wireTelemetry(ctx, h, hostCloud(host), !host.WorkAfterAnswer)
	if err != nil {
		return nil, err
	}
	gw.live = httpapi.NewLive(h)
	gw.handler = gw.live
	if tel != nil {
		gw.handler, gw.telemetry = tel.Handler(gw.live), tel
	}
	return gw, nil
}

// hostCloud is the cloud a host runs in, as hostResource names it.
func hostCloud(host core.HostCaps) string {
	switch host.Name {
	case lambda.Caps().Name:
		return "aws"
	case azurefunctions.Caps().Name:
		return "azure"
	}
	return ""
}

// drain gives the continuations in progress until ctx ends to finish and
// stops the rest, releasing their claims; sends the notifications queued
// for the background sender; and shuts the telemetry down.
func (gw *gateway) drain(ctx context.Context) error {
	var err error
	if a := gw.async; a != nil {
		err = a.Continuations.Shutdown(ctx)
		// Notifications queued for the background sender go out before
		// the process exits, with a few seconds of their own.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if ferr := a.FlushNotifications(fctx); ferr != nil {
			err = errors.Join(err, fmt.Errorf("flush notifications: %w", ferr))
		}
	}
	if gw.telemetry != nil {
		err = errors.Join(err, gw.telemetry.Shutdown(ctx))
	}
	return err
}

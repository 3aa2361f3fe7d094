package main

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"fngateway/adapters/lambda"
	"fngateway/core"
	"fngateway/core/async"
)

// runLambda runs the gateway as an AWS Lambda function: the runtime loop
// takes the invocations; only SQS events deliver continuations (the local
// queue worker does not run here). It returns only when start-up fails.
//
// The execution limit is each invocation's deadline. When the environment
// says the function's timeout (AWS_LAMBDA_FUNCTION_TIMEOUT, as the runtime
// emulator sets it, or FunctionTimeoutSecs), the settings are checked
// against it at start-up; otherwise against the timeout the first
// invocation's deadline tells, and a setting that does not fit fails every
// invocation with the one-line setting error.
func runLambda(ctx context.Context, logger *slog.Logger) error {
	var hostLimit time.Duration
	if v, ok := os.LookupEnv("AWS_LAMBDA_FUNCTION_TIMEOUT"); ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n <= 0 {
			return &core.SettingError{Name: "AWS_LAMBDA_FUNCTION_TIMEOUT", Value: v, Want: "want a positive whole number of seconds"}
		}
		hostLimit = time.Duration(n) * time.Second
	}
	s, limit, reloader, err := openSettings(ctx, hostLimit, logger)
	if err != nil {
		return err
	}
	gw, err := assemble(ctx, s, lambda.CapsFor(s.InvokeMode), logger)
	if err != nil {
		return err
	}
	gw.serveSettings(reloader)
	h := &lambda.Handler{HTTP: gw.handler, InvokeMode: s.InvokeMode, Limit: s.FunctionTimeoutSecs.D(), Logger: logger}
	if limit == 0 {
		// Lambda does not tell a function its timeout before an invocation:
		// check the settings against the first invocation's deadline.
		explicit := func(name string) bool { _, ok := lookup(name); return ok }
		h.Check = func(timeout time.Duration) error { return s.Validate(timeout, explicit) }
	}
	if gw.async != nil {
		h.Continuations = gw.async
		// A continuation that failed transiently comes back after its
		// backoff, not after the queue's whole visibility timeout.
		if q, ok := gw.async.Queue.(async.VisibilityExtender); ok {
			h.Queue = q
		}
	}
	if tel := gw.telemetry; tel != nil {
		// Before each invocation returns: the process may be frozen next.
		margin := s.FunctionLimitMarginMs.D()
		h.Flush = func(ctx context.Context) { tel.Flush(ctx, margin/2) }
	}
	var g group
	// The runtime loop has no stop: the Lambda service ends the process.
	g.Add(func() error { lambda.Start(h); return nil }, func(error) {})
	// Polled between invocations too: a frozen process catches up on thaw.
	addUntilInterrupted(&g, ctx, reloader.Run)
	return g.Run()
}

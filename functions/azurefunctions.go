package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"fngateway/adapters/azurefunctions"
	"fngateway/core"
	"fngateway/internal/settings"
)

// defaultAzureQueue is AsyncQueue's default for AsyncStore=azure, and the
// queue functions/continuation/function.json is triggered by.
const defaultAzureQueue = "gateway-continuations"

// runAzureFunctions runs the gateway as an Azure Functions custom handler
// (FUNCTIONS_CUSTOMHANDLER_PORT is set) until ctx ends (SIGTERM). Only the
// queue trigger delivers continuations on this host: no queue worker runs
// in-process.
func runAzureFunctions(ctx context.Context, logger *slog.Logger) error {
	// Before the settings, stores and queues are opened: a request the host
	// held meanwhile has waited that long too.
	started := time.Now()
	logger = slog.New(azurefunctions.LogHandler(logger.Handler()))
	port := os.Getenv("FUNCTIONS_CUSTOMHANDLER_PORT")
	if n, err := strconv.Atoi(strings.TrimSpace(port)); err != nil || n < 1 || n > 65535 {
		return &core.SettingError{Name: "FUNCTIONS_CUSTOMHANDLER_PORT", Value: port, Want: "want a TCP port number (1-65535), as the Functions host sets it"}
	}
	lim, err := azurefunctions.LoadLimits(azurefunctions.LookupEnv)
	if err != nil {
		return err
	}
	authEnabled, err := websiteAuthEnabled(os.LookupEnv)
	if err != nil {
		return err
	}
	s, limit, reloader, err := openSettings(ctx, lim.Invocation, logger)
	if err != nil {
		return err
	}
	// FunctionTimeoutSecs, when set, may only shorten the host's limits.
	lim.Invocation = limit
	if limit > 0 {
		lim.HTTP = min(limit, azurefunctions.HTTPLimit)
	}
	if s.AsyncModeEnabled {
		if s.AsyncStore != "azure" {
			return &core.SettingError{Name: "AsyncStore", Value: s.AsyncStore,
				Want: "want azure on the Azure Functions host when AsyncModeEnabled=true: only the queue trigger delivers continuations there"}
		}
		if err := checkContinuationQueue(s); err != nil {
			return err
		}
	}
	gw, err := assemble(ctx, s, azurefunctions.Caps(), logger)
	if err != nil {
		return err
	}
	gw.serveSettings(reloader)
	srv := &azurefunctions.Server{
		Addr:    net.JoinHostPort("127.0.0.1", strings.TrimSpace(port)),
		Gateway: gw.handler,
		Limits:  lim,
		Started: started,
		Logger:  logger,
		// X-MS-CLIENT-PRINCIPAL* are the platform's only when App
		// Service Authentication is on.
		AuthEnabled: authEnabled,
	}
	if gw.async != nil {
		srv.Continuations = gw.async
	}
	// Logged only once start-up can no longer fail: a bad setting is
	// the process's one line of output.
	if lim.Warning != "" {
		logger.Warn(lim.Warning)
	}
	gc := gcInForce()
	ft := azurefunctions.FormatTimeSpan(lim.Function)
	if lim.Function == 0 {
		ft = "-1 (unbounded)"
	}
	logger.Info("azure functions host",
		slog.String("functionTimeout", ft),
		slog.String("functionTimeoutSource", lim.Source),
		slog.Int64("httpLimitMs", lim.HTTP.Milliseconds()),
		slog.Int64("httpLeadMs", azurefunctions.HTTPLead.Milliseconds()),
		slog.Int64("startupMs", time.Since(started).Milliseconds()),
		slog.Int64("invocationLimitMs", lim.Invocation.Milliseconds()),
		slog.Bool("async", bool(s.AsyncModeEnabled)),
		slog.Bool("appServiceAuthentication", authEnabled),
		// The collector's pace and soft limit, from the InstanceMemoryMB
		// the module writes (or GOGC and GOMEMLIMIT when set).
		slog.Int("gogc", gc.Percent),
		slog.Int64("memoryLimitBytes", gc.Limit))
	var g group
	addServer(&g, ctx, srv.Run, gw, logger)
	addUntilInterrupted(&g, ctx, reloader.Run)
	return g.Run()
}

// websiteAuthEnabled reads WEBSITE_AUTH_ENABLED, which App Service sets to
// True when App Service Authentication is on for the app ("Environment
// variables and app settings in Azure App Service": read-only, injected to
// indicate whether App Service authentication is enabled). Unset or empty
// means off; a value that is not a boolean stops the start-up.
func websiteAuthEnabled(lookup func(string) (string, bool)) (bool, error) {
	v, _ := lookup("WEBSITE_AUTH_ENABLED")
	if strings.TrimSpace(v) == "" {
		return false, nil
	}
	on, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return false, &core.SettingError{Name: "WEBSITE_AUTH_ENABLED", Value: v,
			Want: "want True or False, as App Service sets it when App Service Authentication is on or off"}
	}
	return on, nil
}

// checkContinuationQueue makes sure continuations are enqueued where the
// continuation function is triggered: AsyncQueue and the queueName of
// continuation/function.json must name the same queue.
func checkContinuationQueue(s *settings.Settings) error {
	root := os.Getenv("FUNCTIONS_APP_ROOT_PATH")
	if root == "" {
		return nil
	}
	q, err := azurefunctions.ContinuationQueue(root, os.LookupEnv)
	if err != nil {
		return &core.SettingError{Name: "FUNCTIONS_APP_ROOT_PATH", Value: root, Want: "want the function app's files: " + err.Error()}
	}
	name := s.AsyncQueue
	if name == "" {
		name = defaultAzureQueue
	}
	if q != "" && q != name {
		return &core.SettingError{Name: "AsyncQueue", Value: name,
			Want: fmt.Sprintf("want the queue continuation/function.json is triggered by, %q: change both together", q)}
	}
	return nil
}

package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"fngateway/adapters/httpapi"
	"fngateway/adapters/local"
	"fngateway/core"
	"fngateway/infra/filestore"
)

// wireAsync connects the async store and queue that AsyncStore and
// AsyncQueue name, and the in-process worker of the local host. With
// AsyncModeEnabled=false it opens nothing.
func wireAsync(ctx context.Context, s *core.Settings, h *httpapi.Handler, gw *gateway, limit time.Duration, logger *slog.Logger) error {
	if !s.AsyncModeEnabled {
		// CONTRACT §1: with async off nothing is opened, so a host with a
		// read-only file system (Lambda's /var/task) starts without a store.
		return nil
	}
	var (
		store    core.Store
		queue    core.Queue
		notifier core.Notifier
	)
	switch {
	case strings.HasPrefix(s.AsyncStore, "file:"):
		fs, err := filestore.Open(strings.TrimPrefix(s.AsyncStore, "file:"))
		if err != nil {
			return fmt.Errorf("setting AsyncStore=%q: %w", s.AsyncStore, err)
		}
		store, queue, notifier = fs, fs, fs
		h.Blobs = fs
	case s.AsyncStore == "azure":
		az, err := openAzure(ctx, s)
		if err != nil {
			return err
		}
		store, queue, notifier = az.store, az.queue, az.notifier
	case strings.HasPrefix(s.AsyncStore, "s3:"):
		parts, err := openAWS(ctx, s)
		if err != nil {
			return err
		}
		store, queue, notifier = parts.store, parts.queue, parts.notifier
	default:
		return &core.SettingError{Name: "AsyncStore", Value: s.AsyncStore, Want: "want file:<dir>, azure or s3://<bucket>[/<prefix>]"}
	}
	a := &core.Async{
		Store:     store,
		Queue:     queue,
		Notifier:  notifier,
		Forwarder: h.Forwarder,
		Router:    core.NewRouter(s),
		TTL:       s.AsyncTTLSecs.D(),
		Timeout:   s.AsyncTimeout.D(),
		Margin:    s.FunctionLimitMarginMs.D(),
		Stats:     h.Stats,
	}
	h.Async = a
	w := &local.Worker{
		Queue:      queue,
		Async:      a,
		Logger:     logger,
		Visibility: s.AsyncTimeout.D() + s.FunctionLimitMarginMs.D() + 30*time.Second,
		Limit:      limit,
	}
	gw.runWorkers = w.Run
	return nil
}

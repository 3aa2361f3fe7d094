package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
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
		sweeper  *filestore.Store // the embedded store sweeps what expired
	)
	switch {
	case strings.HasPrefix(s.AsyncStore, "file:"):
		fs, err := filestore.Open(strings.TrimPrefix(s.AsyncStore, "file:"))
		if err != nil {
			return fmt.Errorf("setting AsyncStore=%q: %w", s.AsyncStore, err)
		}
		store, queue, notifier = fs, fs, fs
		h.Blobs = fs
		sweeper = fs
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
	if err := s.UserProfiles.ValidateTopics(notifier); err != nil {
		return err
	}
	a := &core.Async{
		Store:          store,
		Queue:          queue,
		Notifier:       notifier,
		Forwarder:      h.Forwarder,
		Router:         core.NewRouter(s),
		TTL:            s.AsyncTTLSecs.D(),
		Timeout:        s.AsyncTimeout.D(),
		Margin:         s.FunctionLimitMarginMs.D(),
		TriggerTimeout: s.AsyncTriggerTimeout.D(),
		Continuations:  core.NewProfileContinuations(int(s.MaxContinuations), s.ContinuationsPerProfile()),
		ScopeHeaders:   s.IdempotencyScopeHeaders,
		Stats:          h.Stats,
		Host:           h.Host,
		OnError: func(ctx context.Context, id string, err error) {
			logger.WarnContext(ctx, "async", slog.String("id", id), slog.String("err", err.Error()))
		},
	}
	h.Async = a
	// The worker's messages stay hidden for one lease, renewed while they
	// run; a queue that cannot renew hides them for a whole attempt.
	visibility := core.DefaultLease
	if _, ok := queue.(core.VisibilityExtender); !ok {
		visibility = s.AsyncTimeout.D() + s.FunctionLimitMarginMs.D() + 30*time.Second
	}
	w := &local.Worker{
		Queue:      queue,
		Async:      a,
		Logger:     logger,
		Visibility: visibility,
		Limit:      limit,
	}
	gw.runWorkers = func(ctx context.Context) {
		var wg sync.WaitGroup
		if sweeper != nil {
			wg.Go(func() {
				sweeper.RunSweeper(ctx, 0, 0, func(err error) {
					logger.WarnContext(ctx, "sweeping expired async requests", slog.String("err", err.Error()))
				})
			})
		}
		w.Run(ctx)
		wg.Wait()
	}
	gw.drain = func(ctx context.Context) error {
		err := a.Continuations.Shutdown(ctx)
		// Notifications queued for the background sender go out before
		// the process exits, with a few seconds of their own.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if ferr := a.FlushNotifications(fctx); ferr != nil {
			err = errors.Join(err, fmt.Errorf("flush notifications: %w", ferr))
		}
		return err
	}
	return nil
}

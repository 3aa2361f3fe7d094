package main

import (
	"context"
	"errors"
	"fmt"
	"fngateway/adapters/httpapi"
	"fngateway/internal/settings"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"fngateway/adapters/local"
	"fngateway/core"
	"fngateway/core/async"
	"fngateway/infra/filestore"
)

// asyncParts are the store, queue and notifier AsyncStore and AsyncQueue
// name.
type asyncParts struct {
	store    async.Store
	queue    async.Queue
	notifier async.Notifier
	files    *filestore.Store // the embedded store (file:), nil otherwise
	// undo removes what opening the store created (the embedded store's
	// directories), for a start-up that fails after; nil: nothing to undo.
	undo func()
}

// removeCreated returns a function that removes the first directory on
// the path to dir that does not exist now (dir itself, or the first of its
// missing parents), with all it then holds: what opening a store in dir
// creates. It does nothing when dir exists already.
func removeCreated(dir string) func() {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return func() {}
	}
	created := ""
	for d := abs; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || !errors.Is(err, fs.ErrNotExist) {
			break
		}
		created = d
		if filepath.Dir(d) == d {
			break
		}
	}
	if created == "" {
		return func() {}
	}
	return func() { os.RemoveAll(created) }
}

// openAsync connects the async store and queue that AsyncStore and
// AsyncQueue name.
func openAsync(ctx context.Context, s *settings.Settings) (*asyncParts, error) {
	if s.NotificationTopicArns != "" && !strings.HasPrefix(s.AsyncStore, "s3:") {
		return nil, &core.SettingError{Name: "NotificationTopicArns", Value: s.NotificationTopicArns,
			Want: "want it unset unless AsyncStore is s3:// (SNS topics; other stores notify on their own service)"}
	}
	switch {
	case strings.HasPrefix(s.AsyncStore, "file:"):
		dir := strings.TrimPrefix(s.AsyncStore, "file:")
		undo := removeCreated(dir)
		fs, err := filestore.Open(dir)
		if err != nil {
			undo()
			return nil, fmt.Errorf("setting AsyncStore=%q: %w", s.AsyncStore, err)
		}
		return &asyncParts{store: fs, queue: fs, notifier: fs, files: fs, undo: undo}, nil
	case s.AsyncStore == "azure":
		az, err := openAzure(ctx, s)
		if err != nil {
			return nil, err
		}
		return &asyncParts{store: az.store, queue: az.queue, notifier: az.notifier}, nil
	case strings.HasPrefix(s.AsyncStore, "s3:"):
		parts, err := openAWS(ctx, s)
		if err != nil {
			return nil, err
		}
		return &asyncParts{store: parts.store, queue: parts.queue, notifier: parts.notifier}, nil
	}
	return nil, &core.SettingError{Name: "AsyncStore", Value: s.AsyncStore, Want: "want file:<dir>, azure or s3://<bucket>[/<prefix>]"}
}

// newAsync is the async engine over p, forwarding with fwd.
func newAsync(s *settings.Settings, p *asyncParts, fwd *core.Forwarder, stats *core.Stats, host core.HostCaps, logger *slog.Logger) *async.Async {
	return &async.Async{
		Store:          p.store,
		Queue:          p.queue,
		Notifier:       p.notifier,
		Forwarder:      fwd,
		Router:         s.Router(),
		TTL:            s.AsyncTTLSecs.D(),
		PollMax:        s.AsyncPollMaxSecs.D(),
		Timeout:        s.AsyncTimeout.D(),
		Margin:         s.FunctionLimitMarginMs.D(),
		TriggerTimeout: s.AsyncTriggerTimeout.D(),
		Continuations:  async.NewProfileContinuations(int(s.MaxContinuations), s.ContinuationsPerProfile()),
		ScopeHeaders:   s.IdempotencyScopeHeaders,
		Stats:          stats,
		Predictor:      predictor(s),
		Host:           host,
		OnError: func(ctx context.Context, id string, err error) {
			logger.WarnContext(ctx, "async", slog.String("id", id), slog.String("err", err.Error()))
		},
		OnEnd: httpapi.LogAsyncEnd(logger, s.EmfNamespace),
	}
}

// localWorker is the local host's in-process queue worker for a's queue.
// Its messages stay hidden for one lease, renewed while they run; a queue
// that cannot renew hides them for a whole attempt.
func localWorker(s *settings.Settings, a *async.Async, limit time.Duration, logger *slog.Logger) *local.Worker {
	visibility := async.DefaultLease
	if _, ok := a.Queue.(async.VisibilityExtender); !ok {
		visibility = s.AsyncTimeout.D() + s.FunctionLimitMarginMs.D() + 30*time.Second
	}
	return &local.Worker{Queue: a.Queue, Async: a, Logger: logger, Visibility: visibility, Limit: limit}
}

// predictor is predictive hand-off, on when AsyncPredictWindow is set.
func predictor(s *settings.Settings) *async.Predictor {
	if s.AsyncPredictWindow <= 0 {
		return nil
	}
	return &async.Predictor{Window: int(s.AsyncPredictWindow)}
}

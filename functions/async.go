package main

import (
	"context"
	"errors"
	"fmt"
	"fngateway/adapters/httpapi"
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
	"fngateway/internal/settings"
)

// asyncParts are the store, queue and notifier AsyncStore and AsyncQueue
// name, and, for a tool that asked (deadLetterQuery), the queue's dead
// letters.
type asyncParts struct {
	store    async.Store
	queue    async.Queue
	notifier async.Notifier
	files    *filestore.Store // the embedded store (file:), nil otherwise
	// undo removes what opening the store created (the embedded store's
	// directories), for a start-up that fails after; nil: nothing to undo.
	undo func()
	// deadLetters are the continuation queue's dead letters, and where
	// says where they are; nil without a deadLetterQuery.
	deadLetters async.DeadLetters
	where       string
}

// deadLetterQuery asks openAsync for the dead letters too, for a tool that
// works beside a running gateway (`gateway deadletters`): the embedded
// store is opened beside it (filestore.OpenBeside), not for serving.
type deadLetterQuery struct {
	// dlq is the SQS dead-letter queue's URL, "" for the redrive policy's.
	dlq string
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
// AsyncQueue name, for the gateway to serve from.
func openAsync(ctx context.Context, s *settings.Settings) (*asyncParts, error) {
	return openStores(ctx, s, os.Getenv, nil)
}

// openStores connects the async store and queue that AsyncStore and
// AsyncQueue name: the one place the stores are opened, for the gateway
// (dl nil) and for the dead-letter command (dl non-nil). getenv reads the
// environment the storage settings' identity-based forms come from
// (azureStorageConfig).
func openStores(ctx context.Context, s *settings.Settings, getenv func(string) string, dl *deadLetterQuery) (*asyncParts, error) {
	if s.NotificationTopicArns != "" && !strings.HasPrefix(s.AsyncStore, "s3:") {
		return nil, &core.SettingError{Name: "NotificationTopicArns", Value: s.NotificationTopicArns,
			Want: "want it unset unless AsyncStore is s3:// (SNS topics; other stores notify on their own service)"}
	}
	if dl != nil && dl.dlq != "" && (strings.HasPrefix(s.AsyncStore, "file:") || s.AsyncStore == "azure") {
		return nil, &core.SettingError{Name: "--dlq", Value: dl.dlq, Want: "want it only with AsyncStore=s3://"}
	}
	switch {
	case strings.HasPrefix(s.AsyncStore, "file:") && dl != nil:
		dir := strings.TrimPrefix(s.AsyncStore, "file:")
		fs, err := filestore.OpenBeside(dir)
		if err != nil {
			return nil, &core.SettingError{Name: "AsyncStore", Value: s.AsyncStore, Want: err.Error()}
		}
		return &asyncParts{store: fs, queue: fs, notifier: fs, deadLetters: fs.DeadLetters(), where: dir + "/quarantine"}, nil
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
		return openAzure(ctx, s, getenv, dl)
	case strings.HasPrefix(s.AsyncStore, "s3:"):
		return openAWS(ctx, s, dl)
	}
	return nil, &core.SettingError{Name: "AsyncStore", Value: s.AsyncStore, Want: "want file:<dir>, azure or s3://<bucket>[/<prefix>]"}
}

// openDeadLetters connects the store, the continuation queue and its dead
// letters that the settings in env name (AsyncStore, AsyncQueue and
// AzureWebJobsStorage with its __ forms, read as the gateway reads them:
// settings.EnvLookup), and says where the dead letters are.
func openDeadLetters(ctx context.Context, env func(string) (string, bool), dlq string) (*async.Redriver, string, error) {
	lookup := settings.EnvLookup(env)
	get := func(name string) string { v, _ := lookup(name); return v }
	s := settings.DefaultSettings()
	if v, ok := lookup("AsyncStore"); ok {
		s.AsyncStore = v
	}
	s.AsyncQueue, s.AzureWebJobsStorage = get("AsyncQueue"), get("AzureWebJobsStorage")
	p, err := openStores(ctx, &s, get, &deadLetterQuery{dlq: dlq})
	if err != nil {
		return nil, "", err
	}
	return &async.Redriver{Store: p.store, Queue: p.queue, DeadLetters: p.deadLetters}, p.where, nil
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

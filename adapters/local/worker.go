package local

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"time"

	"fngateway/core"
)

// Worker runs continuations in-process: it receives queue messages and
// hands each to the async engine, as a queue trigger would in the cloud.
// Set its fields and call Run once.
type Worker struct {
	// Queue is where continuations wait. Required.
	Queue core.Queue
	// Async processes one message. Required.
	Async *core.Async
	// Logger receives one line per failed message. Nil discards.
	Logger *slog.Logger
	// Visibility hides a received message while it is processed; it should
	// outlast one attempt (AsyncTimeout) plus the margin.
	Visibility time.Duration
	// Limit, if positive, is each continuation's execution limit
	// (FunctionTimeoutSecs), as a fresh invocation would have.
	Limit time.Duration
	// Poll is the wait between empty receives. Zero means 100 ms.
	Poll time.Duration
	// Concurrency bounds the continuations run at once. Zero means 16.
	Concurrency int
	// MaxDequeue is the delivery count after which an undecodable message
	// is dropped (it is logged whole first). Zero means 5.
	MaxDequeue int
}

// Run receives and processes messages until ctx is done, then waits for
// those in progress.
func (w *Worker) Run(ctx context.Context) {
	log := w.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	poll := w.Poll
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	slots := w.Concurrency
	if slots <= 0 {
		slots = 16
	}
	sem := make(chan struct{}, slots)
	defer func() {
		for range slots {
			sem <- struct{}{}
		}
	}()
	for ctx.Err() == nil {
		free := slots - len(sem)
		var msgs []core.Message
		var err error
		if free > 0 {
			msgs, err = w.Queue.Receive(ctx, min(free, 32), w.Visibility)
			if err != nil && ctx.Err() == nil {
				log.WarnContext(ctx, "receiving continuations", slog.String("err", err.Error()))
			}
		}
		for _, m := range msgs {
			sem <- struct{}{}
			go func() {
				defer func() { <-sem }()
				w.process(ctx, log, m)
			}()
		}
		if len(msgs) == 0 {
			t := time.NewTimer(poll)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
	}
}

func (w *Worker) process(ctx context.Context, log *slog.Logger, m core.Message) {
	// A continuation runs to its own end even while the process shuts
	// down; its message stays hidden and comes back if it is killed.
	pctx := context.WithoutCancel(ctx)
	if w.Limit > 0 {
		var cancel context.CancelFunc
		pctx, cancel = context.WithTimeout(pctx, w.Limit)
		defer cancel()
	}
	err := w.Async.Process(pctx, m.Body)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	switch {
	case err == nil:
		if cerr := w.Queue.Complete(cctx, m); cerr != nil && !errors.Is(cerr, core.ErrNotFound) {
			log.WarnContext(ctx, "completing a continuation", slog.String("messageId", m.ID), slog.String("err", cerr.Error()))
		}
	case errors.Is(err, core.ErrBadMessage):
		max := w.MaxDequeue
		if max <= 0 {
			max = 5
		}
		log.ErrorContext(ctx, "undecodable continuation message",
			slog.String("messageId", m.ID), slog.Int("dequeueCount", m.DequeueCount),
			slog.String("body", base64.StdEncoding.EncodeToString(m.Body)), slog.String("err", err.Error()))
		if m.DequeueCount >= max {
			w.Queue.Complete(cctx, m)
		}
	default:
		log.WarnContext(ctx, "continuation failed; the queue will deliver it again",
			slog.String("messageId", m.ID), slog.String("err", err.Error()))
	}
}

package local

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"sync"
	"time"

	"fngateway/core"
	"fngateway/core/async"
)

// maxReceive is the most messages one receive asks for.
const maxReceive = 32

// Worker runs continuations in-process: it receives queue messages and
// hands each to the async engine, as a queue trigger would in the cloud.
// Set its fields and call Run once.
//
// It works on at most as many continuations at once as Async.Continuations
// has free slots, shared with the in-process finishes after a 202: while
// every slot is taken it receives nothing, and messages wait on the queue.
// A message whose request's profile holds its share of the slots already
// (async.Continuations.PerProfile) is hidden again for ProfileWait, and the
// worker goes on with other profiles' messages.
// A received message stays hidden for Visibility, renewed every third of it
// while its continuation runs when the queue implements
// async.VisibilityExtender, so that a message whose process died comes back
// within one Visibility.
type Worker struct {
	// Queue is where continuations wait. Required.
	Queue async.Queue
	// Async processes one message. Required. Its Continuations bounds the
	// work; if nil, the worker bounds itself to
	// core.DefaultMaxContinuations.
	Async *async.Async
	// Logger receives one line per failed message. Nil discards.
	Logger *slog.Logger
	// Visibility hides a received message while it is processed. With a
	// queue that implements async.VisibilityExtender it is renewed as a
	// heartbeat and may be short; otherwise it should outlast one attempt
	// (AsyncTimeout) plus the margin. Zero means async.DefaultLease.
	Visibility time.Duration
	// Limit, if positive, is each continuation's execution limit
	// (FunctionTimeoutSecs), as a fresh invocation would have.
	Limit time.Duration
	// Poll is the wait between empty receives. Zero means 100 ms.
	Poll time.Duration
	// ProfileWait is how long a message stays hidden when the profile of
	// its request holds its share of the slots
	// (async.Continuations.PerProfile) before it is received again. Zero
	// means DefaultProfileWait.
	ProfileWait time.Duration
	// MaxDequeue is the delivery count after which an undecodable message
	// is dropped (it is logged whole first) by a queue that cannot set it
	// aside; one that can (the embedded store) sets it aside at its first
	// delivery. Zero means 5.
	MaxDequeue int
}

// Run receives and processes messages until ctx is done, then stops
// receiving and waits for the continuations in progress: they finish, or
// they are stopped by the Continuations' Shutdown, which releases their
// claims; their messages are then made visible again at once.
func (w *Worker) Run(ctx context.Context) {
	log := w.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	poll := w.Poll
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	slots := w.Async.Continuations
	if slots == nil {
		slots = async.NewContinuations(0)
	}
	var running sync.WaitGroup
	defer running.Wait()
	for ctx.Err() == nil {
		// A slot first: nothing is received that cannot run at once. Only
		// that one slot is held while the receive waits (a queue may long-
		// poll), so in-process finishes keep the others.
		work, done, err := slots.Start(ctx)
		if err != nil {
			return
		}
		ext, _ := w.Queue.(async.VisibilityExtender)
		n := 1
		if ext != nil {
			// Messages beyond the free slots can be shown again at once.
			n = min(maxReceive, 1+slots.Free())
		}
		msgs, err := w.Queue.Receive(ctx, n, w.visibility())
		if err != nil && ctx.Err() == nil {
			log.WarnContext(ctx, "receiving continuations", slog.String("err", err.Error()))
			w.endSetAside(ctx, log, err)
		}
		taken := []func(){done}
		for len(taken) < len(msgs) {
			_, more, ok := slots.TryStart()
			if !ok {
				break
			}
			taken = append(taken, more)
		}
		if len(msgs) > len(taken) {
			// The slots filled meanwhile: the rest wait on the queue.
			for _, m := range msgs[len(taken):] {
				if _, xerr := ext.Extend(ctx, m, 0); xerr != nil && ctx.Err() == nil {
					log.WarnContext(ctx, "returning a continuation to the queue", slog.String("messageId", m.ID), slog.String("err", xerr.Error()))
				}
			}
			msgs = msgs[:len(taken)]
		}
		for i, m := range msgs {
			release, ok := w.holdProfile(ctx, slots, m)
			if !ok {
				// Its profile holds its share of the slots: the message
				// waits on the queue, hidden for a moment, and the
				// worker goes on with other profiles' messages.
				w.later(ctx, ext, log, m)
				taken[i]()
				continue
			}
			running.Add(1)
			go func() {
				defer running.Done()
				defer taken[i]()
				defer release()
				w.process(work, log, m)
			}()
		}
		for _, d := range taken[len(msgs):] {
			d()
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

// DefaultProfileWait is how long a message whose profile holds its share
// of the continuation slots stays hidden when Worker.ProfileWait is zero.
const DefaultProfileWait = time.Second

// holdProfile counts m against the profile of the request it names
// (async.Continuations.HoldProfile). A message that names no request that
// can still run ends quickly and counts against no profile.
func (w *Worker) holdProfile(ctx context.Context, slots *async.Continuations, m async.Message) (release func(), ok bool) {
	profile, known := w.Async.MessageProfile(ctx, m.Body)
	if !known {
		return func() {}, true
	}
	return slots.HoldProfile(profile)
}

// later hides m for ProfileWait, so that it is received again once its
// profile may have a free slot. A queue that cannot change a message's
// visibility shows it again after its receive's visibility.
func (w *Worker) later(ctx context.Context, ext async.VisibilityExtender, log *slog.Logger, m async.Message) {
	if ext == nil {
		return
	}
	wait := w.ProfileWait
	if wait <= 0 {
		wait = DefaultProfileWait
	}
	if _, err := ext.Extend(ctx, m, wait); err != nil && ctx.Err() == nil {
		log.WarnContext(ctx, "returning a continuation to the queue", slog.String("messageId", m.ID), slog.String("err", err.Error()))
	}
}

func (w *Worker) visibility() time.Duration {
	if w.Visibility > 0 {
		return w.Visibility
	}
	return async.DefaultLease
}

// quarantiner is implemented by queues that can set a received message
// aside for an operator (the embedded store moves its file to
// quarantine/): an undecodable message is then logged once and never
// delivered again, rather than dropped after MaxDequeue deliveries.
type quarantiner interface {
	Quarantine(ctx context.Context, m async.Message) error
}

// process runs one message under work, which ends only when a shutdown
// stops the continuations in progress; its cleanup (settling the message)
// runs after that too, with a timeout of its own.
func (w *Worker) process(work context.Context, log *slog.Logger, m async.Message) {
	pctx := work
	if w.Limit > 0 {
		var cancel context.CancelFunc
		pctx, cancel = context.WithTimeout(pctx, w.Limit)
		defer cancel()
	}
	ext, _ := w.Queue.(async.VisibilityExtender)
	beat := w.heartbeat(ext, m)
	err := w.Async.Process(pctx, m.Body)
	m = beat()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(work), 10*time.Second)
	defer cancel()
	switch {
	case err == nil:
		if cerr := w.Queue.Complete(cctx, m); cerr != nil && !errors.Is(cerr, async.ErrNotFound) {
			log.WarnContext(work, "completing a continuation", slog.String("messageId", m.ID), slog.String("err", cerr.Error()))
		}
	case errors.Is(err, async.ErrBadMessage):
		max := w.MaxDequeue
		if max <= 0 {
			max = 5
		}
		attrs := []slog.Attr{slog.String("messageId", m.ID), slog.Int("dequeueCount", m.DequeueCount),
			slog.String("body", base64.StdEncoding.EncodeToString(m.Body)), slog.String("err", err.Error())}
		if q, ok := w.Queue.(quarantiner); ok {
			// Set aside at once, logged once: no delivery can decode it.
			qerr := q.Quarantine(cctx, m)
			if qerr != nil {
				attrs = append(attrs, slog.String("quarantineErr", qerr.Error()))
			}
			log.LogAttrs(work, slog.LevelError, "undecodable continuation message set aside", attrs...)
			return
		}
		log.LogAttrs(work, slog.LevelError, "undecodable continuation message", attrs...)
		if m.DequeueCount >= max {
			w.Queue.Complete(cctx, m)
		}
	case errors.Is(context.Cause(work), async.ErrDraining):
		// Stopped at shutdown, its claim released: show the message again
		// at once, so the next instance resumes without waiting.
		if ext != nil {
			if _, xerr := ext.Extend(cctx, m, 0); xerr != nil {
				log.WarnContext(work, "releasing a continuation's message", slog.String("messageId", m.ID), slog.String("err", xerr.Error()))
			}
		}
		log.InfoContext(work, "continuation stopped at shutdown; its claim is released",
			slog.String("messageId", m.ID), slog.String("err", err.Error()))
	case errors.Is(err, async.ErrNewerFormat):
		// Written by a newer release (a rolling deploy, a rollback): left
		// on the queue, untouched, for an instance that can read it.
		log.WarnContext(work, "continuation left for a newer release: its format is newer than this build reads; the queue will deliver it again",
			slog.String("messageId", m.ID), slog.String("err", err.Error()))
	default:
		log.WarnContext(work, "continuation failed; the queue will deliver it again",
			slog.String("messageId", m.ID), slog.String("err", err.Error()))
	}
}

// heartbeat keeps m hidden while its continuation runs, renewing its
// visibility every third of it. The returned stop ends the heartbeat and
// returns m with its latest receipt. Without an extender it does nothing.
func (w *Worker) heartbeat(ext async.VisibilityExtender, m async.Message) (stop func() async.Message) {
	if ext == nil {
		return func() async.Message { return m }
	}
	vis := w.visibility()
	cur := m
	end := core.Beat(context.Background(), vis/3, func(ctx context.Context) bool {
		next, err := ext.Extend(ctx, cur, vis)
		switch {
		case err == nil:
			cur = next
		case errors.Is(err, async.ErrNotFound), errors.Is(err, async.ErrConflict):
			return false // no longer ours: the claim's lease guards the work
		}
		return true
	})
	return func() async.Message {
		end()
		return cur
	}
}

// setAside is a receive error that reports a message set aside whose body
// names a request (filestore.SetAsideError).
type setAside interface {
	error
	SetAsideRequest() string
}

// endSetAside ends, as Failed with the reason, every request that a
// message set aside by the queue names (docs/operations.md#dead-letters: a quarantined message
// never leaves its request running until its expiry). err may join
// several reports.
func (w *Worker) endSetAside(ctx context.Context, log *slog.Logger, err error) {
	var walk func(error)
	walk = func(err error) {
		if sa, ok := err.(setAside); ok {
			if id := sa.SetAsideRequest(); id != "" {
				if eerr := w.Async.EndSetAside(ctx, id, "its continuation message was set aside as a dead letter: "+sa.Error()); eerr != nil {
					log.WarnContext(ctx, "ending a request whose message was set aside", slog.String("async", id), slog.String("err", eerr.Error()))
				}
			}
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
}

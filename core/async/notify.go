package async

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"fngateway/core"
)

// maxPendingNotes bounds the background sender's queue; beyond it a
// notification is dropped, counted and reported, never sent out of turn.
const maxPendingNotes = 1024

// notifyTimeout bounds one notification sent in the background.
const notifyTimeout = 10 * time.Second

// pendingNote is a notification waiting for the background sender.
type pendingNote struct {
	ctx       context.Context // the cause's, without its cancellation
	topic, id string
	body      []byte
}

// sender sends the lifecycle notifications of one engine through its
// Notifier port: before notify returns, or, where the host may work after
// answering, through the ordered background sender. A sender is a plain
// value over the engine's notifier; its methods are safe for concurrent use.
type sender struct {
	port Notifier
	// queue is the background sender, or nil to send before notify returns.
	queue   *notifier
	stats   *core.Stats
	onError reporter
}

// notify sends a lifecycle notification when the request has a topic. A
// notification that fails does not fail the request: its error goes to
// OnError. Where the host may work after answering (Host.WorkAfterAnswer)
// it is queued for one background sender, which sends in order; otherwise
// it is sent before notify returns. When maxPendingNotes wait already, it
// is dropped: counted in Stats (async_notifications_dropped) and reported
// to OnError, so that no notification overtakes one queued before it.
func (s sender) notify(ctx context.Context, topic, id, status string) {
	if s.port == nil || topic == "" {
		return
	}
	b, _ := json.Marshal(notification{RequestGUID: id, Status: status, Timestamp: time.Now().UTC().Format(time.RFC3339), TopicName: topic,
		RequestID: core.RequestIDFrom(ctx)})
	n := pendingNote{ctx: context.WithoutCancel(ctx), topic: topic, id: id, body: b}
	if s.queue == nil {
		s.send(ctx, n)
		return
	}
	if !s.queue.enqueue(n, s.send) {
		s.stats.CountNotificationDropped()
		s.onError.report(ctx, id, fmt.Errorf("async %s: notification %s to topic %q dropped: %d notifications wait to be sent already",
			id, status, topic, maxPendingNotes))
	}
}

// send sends n now; a failure goes to OnError.
func (s sender) send(ctx context.Context, n pendingNote) {
	if err := s.port.Notify(ctx, n.topic, n.body); err != nil {
		s.onError.report(ctx, n.id, fmt.Errorf("async %s: notification to topic %q lost: %w", n.id, n.topic, err))
	}
}

// FlushNotifications waits until the notifications queued for the
// background sender have been sent (or have failed), or ctx ends, whose
// error it then returns. A host calls it at shutdown, after the
// continuations drained, so that notifications are not lost with the
// process.
func (a *Async) FlushNotifications(ctx context.Context) error { return a.notes.flush(ctx) }

// notifier is the ordered background sender of notifications: one
// goroutine, started when the first notification is queued and ended when
// none is left, sends them oldest first, so those of one request go out in
// the order they were made. It holds at most maxPendingNotes. The zero
// value is ready; its methods are safe for concurrent use.
type notifier struct {
	mu      sync.Mutex
	pending []pendingNote
	running bool
	idle    chan struct{} // closed when the running sender stops
}

// enqueue queues n for the sender, which passes each notification to send
// with a context bounded by notifyTimeout. It returns false, queuing
// nothing, when maxPendingNotes wait already.
func (q *notifier) enqueue(n pendingNote, send func(context.Context, pendingNote)) bool {
	q.mu.Lock()
	if len(q.pending) >= maxPendingNotes {
		q.mu.Unlock()
		return false
	}
	q.pending = append(q.pending, n)
	start := !q.running
	if start {
		q.running, q.idle = true, make(chan struct{})
	}
	q.mu.Unlock()
	if start {
		go q.run(send)
	}
	return true
}

// run sends the queued notifications, oldest first, until none are left.
func (q *notifier) run(send func(context.Context, pendingNote)) {
	for {
		q.mu.Lock()
		if len(q.pending) == 0 {
			q.running = false
			close(q.idle)
			q.idle = nil
			q.mu.Unlock()
			return
		}
		n := q.pending[0]
		q.pending[0] = pendingNote{}
		q.pending = q.pending[1:]
		q.mu.Unlock()
		ctx, cancel := context.WithTimeout(n.ctx, notifyTimeout)
		send(ctx, n)
		cancel()
	}
}

// flush waits until the sender is idle or ctx ends, whose error it then
// returns.
func (q *notifier) flush(ctx context.Context) error {
	q.mu.Lock()
	idle := q.idle
	q.mu.Unlock()
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

package aws

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"fngateway/core"
	"fngateway/internal/emulators"
)

// TestQueue runs Queues against one fauxqs; subtests use queues of their
// own and run in parallel.
func TestQueue(t *testing.T) {
	t.Parallel()
	f := emulators.StartFauxqs(t)

	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		q := newQueueOn(t, f, uniqueName("rt")) // created by the first Enqueue
		body := []byte(`{"v":1,"id":"0123456789abcdef0123456789abcdef"}`)
		if err := q.Enqueue(ctx, body, 0); err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		msgs, err := q.Receive(ctx, 32, time.Minute)
		if err != nil {
			t.Fatalf("Receive: %v", err)
		}
		if len(msgs) != 1 {
			t.Fatalf("Receive: %d messages, want 1", len(msgs))
		}
		m := msgs[0]
		if string(m.Body) != string(body) || m.DequeueCount != 1 || m.ID == "" || m.Receipt == "" {
			t.Fatalf("Receive = %+v, want body %s, DequeueCount 1, an id and a receipt", m, body)
		}
		if err := q.Complete(ctx, m); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		if msgs, err := q.Receive(ctx, 32, time.Minute); err != nil || len(msgs) != 0 {
			t.Fatalf("Receive after Complete = %d messages, %v; want none", len(msgs), err)
		}
	})

	t.Run("PlainText", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		name := uniqueName("plain")
		q := newQueueOn(t, f, name)
		body := `{"v":1,"id":"ffffffffffffffffffffffffffffffff"}`
		if err := q.Enqueue(ctx, []byte(body), 0); err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		// Another SQS client sees the text itself, not base64.
		out, err := q.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: sdkaws.String(f.QueueURL(name))})
		if err != nil || len(out.Messages) != 1 {
			t.Fatalf("ReceiveMessage: %d messages, %v", len(out.Messages), err)
		}
		if got := deref(out.Messages[0].Body); got != body {
			t.Fatalf("message text = %q, want %q", got, body)
		}
	})

	t.Run("VisibilityRedelivery", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		q := newQueueOn(t, f, uniqueName("vis"))
		if err := q.Enqueue(ctx, []byte("again"), 0); err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		start := time.Now()
		first, err := q.Receive(ctx, 1, 2*time.Second)
		if err != nil || len(first) != 1 {
			t.Fatalf("first Receive: %d messages, %v", len(first), err)
		}
		// This Receive waits up to 1 s, inside the 2 s.
		if msgs, err := q.Receive(ctx, 1, time.Second); err != nil || len(msgs) != 0 {
			t.Fatalf("Receive while hidden: %d messages, %v; want none", len(msgs), err)
		}
		var second []core.Message
		eventually(t, 10*time.Second, "redelivery after the visibility timeout", func() bool {
			second, err = q.Receive(ctx, 1, time.Minute)
			return err == nil && len(second) == 1
		})
		if d := time.Since(start); d < 1900*time.Millisecond {
			t.Errorf("redelivered %v after a 2 s visibility timeout", d)
		}
		m := second[0]
		if m.ID != first[0].ID || string(m.Body) != "again" || m.DequeueCount != 2 {
			t.Fatalf("redelivery = %+v, want message %s again with DequeueCount 2", m, first[0].ID)
		}
		if err := q.Complete(ctx, m); err != nil {
			t.Fatalf("Complete with the new receipt: %v", err)
		}
		if msgs, err := q.Receive(ctx, 1, time.Minute); err != nil || len(msgs) != 0 {
			t.Fatalf("Receive after Complete: %d messages, %v; want none", len(msgs), err)
		}
	})

	t.Run("Delay", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		q := newQueueOn(t, f, uniqueName("delay"))
		start := time.Now()
		if err := q.Enqueue(ctx, []byte("later"), 1500*time.Millisecond); err != nil { // rounded up to 2 s
			t.Fatalf("Enqueue: %v", err)
		}
		if msgs, err := q.Receive(ctx, 1, time.Minute); err != nil || len(msgs) != 0 {
			t.Fatalf("Receive before the delay: %d messages, %v; want none", len(msgs), err)
		}
		eventually(t, 10*time.Second, "the delayed message", func() bool {
			msgs, err := q.Receive(ctx, 1, time.Minute)
			return err == nil && len(msgs) == 1
		})
		if d := time.Since(start); d < 1900*time.Millisecond {
			t.Errorf("a message delayed 2 s was visible after %v", d)
		}
	})

	t.Run("ReceiveLimit", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		q := newQueueOn(t, f, uniqueName("limit"))
		for i := range 12 {
			if err := q.Enqueue(ctx, fmt.Appendf(nil, "m%d", i), 0); err != nil {
				t.Fatalf("Enqueue: %v", err)
			}
		}
		msgs, err := q.Receive(ctx, 32, time.Minute)
		if err != nil || len(msgs) == 0 || len(msgs) > 10 {
			t.Fatalf("Receive(32) = %d messages, %v; want 1 to 10 (SQS's limit)", len(msgs), err)
		}
		one, err := q.Receive(ctx, 0, time.Minute)
		if err != nil || len(one) != 1 {
			t.Fatalf("Receive(0) = %d messages, %v; want 1", len(one), err)
		}
	})

	t.Run("ReceiveCreatesQueue", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		name := uniqueName("recv")
		q := newQueueOn(t, f, name)
		msgs, err := q.Receive(ctx, 1, time.Minute)
		if err != nil || msgs == nil || len(msgs) != 0 {
			t.Fatalf("Receive from a missing queue = %#v, %v; want an empty slice", msgs, err)
		}
		if _, err := q.client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &name}); err != nil {
			t.Fatalf("queue not created: %v", err)
		}
	})

	t.Run("BadBodies", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		q := newQueueOn(t, f, uniqueName("bad"))
		for _, body := range [][]byte{nil, []byte("\xff\xfe"), []byte("nul\x00"), make([]byte, MaxMessageSize+1)} {
			if err := q.Enqueue(ctx, body, 0); err == nil {
				t.Errorf("Enqueue(%.20q): no error", body)
			}
		}
		if err := q.Enqueue(ctx, []byte(strings.Repeat("é", MaxMessageSize/2)), 0); err != nil {
			t.Errorf("Enqueue of %d bytes of UTF-8: %v", MaxMessageSize, err)
		}
	})

	t.Run("CompleteStale", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		q := newQueueOn(t, f, uniqueName("stale"))
		if err := q.Enqueue(ctx, []byte("x"), 0); err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		// SQS refuses an invalid receipt handle (ReceiptHandleIsInvalid,
		// which Complete reports as ErrNotFound); fauxqs ignores it. Either
		// way the message stays.
		err := q.Complete(ctx, core.Message{ID: "m", Receipt: "not-a-receipt"})
		if err != nil && !errors.Is(err, core.ErrNotFound) {
			t.Fatalf("Complete with an invalid receipt: error = %v, want ErrNotFound or none", err)
		}
		if msgs, err := q.Receive(ctx, 1, time.Minute); err != nil || len(msgs) != 1 {
			t.Fatalf("after Complete with an invalid receipt: %d messages, %v; want the message", len(msgs), err)
		}
	})
}

// TestQueueDown: an unreachable server fails fast.
func TestQueueDown(t *testing.T) {
	t.Parallel()
	f := emulators.StartFauxqs(t)
	q := newQueueOn(t, f, uniqueName("down"))
	f.Stop()
	ctx := testContext(t)
	start := time.Now()
	if err := q.Enqueue(ctx, []byte("x"), 0); err == nil {
		t.Fatal("Enqueue with the server down: no error")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Enqueue with the server down took %v, want about a second", d)
	}
}

func TestNotifier(t *testing.T) {
	t.Parallel()
	f := emulators.StartFauxqs(t)
	n := NewNotifier(fauxqsConfig(f))
	ctx := testContext(t)
	topic := uniqueName("topic")
	bodies := []string{`{"RequestGuid":"a","Status":"Queued"}`, `{"RequestGuid":"a","Status":"AsyncProcessed"}`}
	for _, b := range bodies {
		if err := n.Notify(ctx, topic, []byte(b)); err != nil { // the first creates the queue
			t.Fatalf("Notify: %v", err)
		}
	}
	url, err := n.client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &topic})
	if err != nil {
		t.Fatalf("topic queue: %v", err)
	}
	var got []string
	eventually(t, 10*time.Second, "both notifications", func() bool {
		out, err := n.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: url.QueueUrl, MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatalf("ReceiveMessage: %v", err)
		}
		for _, m := range out.Messages {
			got = append(got, deref(m.Body))
		}
		return len(got) >= len(bodies)
	})
	if len(got) != 2 || !(got[0] == bodies[0] && got[1] == bodies[1] || got[0] == bodies[1] && got[1] == bodies[0]) {
		t.Fatalf("notifications = %q, want %q", got, bodies)
	}

	// A queue deleted after its URL was cached is made again.
	if _, err := n.client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: url.QueueUrl}); err != nil {
		t.Fatalf("DeleteQueue: %v", err)
	}
	if err := n.Notify(ctx, topic, []byte("again")); err != nil {
		t.Fatalf("Notify after the queue was deleted: %v", err)
	}

	for _, bad := range []string{"", "has space", "a.fifo", strings.Repeat("x", 81)} {
		if err := n.Notify(ctx, bad, []byte("x")); err == nil {
			t.Errorf("Notify(topic %q): no error", bad)
		}
	}
}

// TestQueueDelayClamped: a delay past SQS's 15 minutes is clamped, not
// refused (SQS refuses DelaySeconds over 900), and the message waits.
func TestQueueDelayClamped(t *testing.T) {
	t.Parallel()
	q := newTestQueue(t)
	ctx := testContext(t)
	if err := q.Enqueue(ctx, []byte("much later"), 20*time.Minute); err != nil {
		t.Fatalf("Enqueue with a 20-minute delay: %v", err)
	}
	if msgs, err := q.Receive(ctx, 10, time.Minute); err != nil || len(msgs) != 0 {
		t.Fatalf("Receive: %d messages, %v; want none (delayed)", len(msgs), err)
	}
}

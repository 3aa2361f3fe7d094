package aws

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"fngateway/core/async"
	"fngateway/internal/emulators"
	"fngateway/internal/testutil"
)

// TestQueue runs Queues against one fauxqs; subtests use queues of their
// own and run in parallel. What every Queue must do (delivery, visibility,
// redelivery, delay, Extend) is core/async/porttest's, run by TestQueuePort;
// here is what is SQS's own.
func TestQueue(t *testing.T) {
	t.Parallel()
	f := emulators.StartFauxqs(t)

	t.Run("PlainText", func(t *testing.T) {
		t.Parallel()
		ctx := testutil.Context(t)
		name := testutil.UniqueName("plain")
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

	t.Run("DelayRoundsUp", func(t *testing.T) {
		t.Parallel()
		ctx := testutil.Context(t)
		q := newQueueOn(t, f, testutil.UniqueName("delay"))
		start := time.Now()
		if err := q.Enqueue(ctx, []byte("later"), 1500*time.Millisecond); err != nil { // rounded up to 2 s
			t.Fatalf("Enqueue: %v", err)
		}
		if msgs, err := q.Receive(ctx, 1, time.Minute); err != nil || len(msgs) != 0 {
			t.Fatalf("Receive before the delay: %d messages, %v; want none", len(msgs), err)
		}
		testutil.Eventually(t, 10*time.Second, "the delayed message", func() bool {
			msgs, err := q.Receive(ctx, 1, time.Minute)
			return err == nil && len(msgs) == 1
		})
		if d := time.Since(start); d < 1900*time.Millisecond {
			t.Errorf("a message delayed 2 s was visible after %v", d)
		}
	})

	t.Run("ReceiveLimit", func(t *testing.T) {
		t.Parallel()
		ctx := testutil.Context(t)
		q := newQueueOn(t, f, testutil.UniqueName("limit"))
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
		ctx := testutil.Context(t)
		name := testutil.UniqueName("recv")
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
		ctx := testutil.Context(t)
		q := newQueueOn(t, f, testutil.UniqueName("bad"))
		for _, body := range [][]byte{nil, []byte("\xff\xfe"), []byte("nul\x00"), make([]byte, maxMessageSize+1)} {
			if err := q.Enqueue(ctx, body, 0); err == nil {
				t.Errorf("Enqueue(%.20q): no error", body)
			}
		}
		if err := q.Enqueue(ctx, []byte(strings.Repeat("é", maxMessageSize/2)), 0); err != nil {
			t.Errorf("Enqueue of %d bytes of UTF-8: %v", maxMessageSize, err)
		}
	})

	t.Run("CompleteStale", func(t *testing.T) {
		t.Parallel()
		ctx := testutil.Context(t)
		q := newQueueOn(t, f, testutil.UniqueName("stale"))
		if err := q.Enqueue(ctx, []byte("x"), 0); err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		// SQS refuses an invalid receipt handle (ReceiptHandleIsInvalid,
		// which Complete reports as ErrNotFound); fauxqs ignores it. Either
		// way the message stays.
		err := q.Complete(ctx, async.Message{ID: "m", Receipt: "not-a-receipt"})
		if err != nil && !errors.Is(err, async.ErrNotFound) {
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
	q := newQueueOn(t, f, testutil.UniqueName("down"))
	f.Stop()
	ctx := testutil.Context(t)
	start := time.Now()
	if err := q.Enqueue(ctx, []byte("x"), 0); err == nil {
		t.Fatal("Enqueue with the server down: no error")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Enqueue with the server down took %v, want about a second", d)
	}
}

// TestQueueExtend covers what Extend does beyond porttest's checks: a
// visibility past SQS's 12 hours is clamped, not refused, and a deleted
// message cannot be extended.
func TestQueueExtend(t *testing.T) {
	t.Parallel()
	q := newTestQueue(t)
	ctx := testutil.Context(t)
	if err := q.Enqueue(ctx, []byte("x"), 0); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	const vis = 3 * time.Second
	var msgs []async.Message
	testutil.Eventually(t, 10*time.Second, "the message", func() bool {
		var err error
		msgs, err = q.Receive(ctx, 1, vis)
		return err == nil && len(msgs) == 1
	})
	received := time.Now()
	m, err := q.Extend(ctx, msgs[0], 13*time.Hour)
	if err != nil {
		t.Fatalf("Extend by 13 hours: %v; want it clamped to 12", err)
	}
	if m.Receipt != msgs[0].Receipt || m.ID != msgs[0].ID {
		t.Errorf("Extend returned %+v; want the message as received (SQS keeps the receipt)", m)
	}
	// Past the visibility it was received with, and half as long again
	// for the emulator's clock; a later check (a loaded machine) only
	// proves more, as the extended visibility lasts 12 hours.
	time.Sleep(time.Until(received.Add(vis + vis/2))) // asserting an absence, derived from vis
	if again, err := q.Receive(ctx, 1, time.Minute); err != nil || len(again) != 0 {
		t.Fatalf("Receive after Extend = %d messages, %v; want none (still hidden)", len(again), err)
	}
	if err := q.Complete(ctx, m); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if _, err := q.Extend(ctx, m, time.Minute); !errors.Is(err, async.ErrNotFound) {
		t.Errorf("Extend of a deleted message: error = %v; want ErrNotFound", err)
	}
}

// TestIsLostMessage: the errors SQS gives for a receipt handle that no
// longer holds its message, including the InvalidParameterValue AWS
// answers for a handle of an earlier receipt, which fauxqs does not send.
func TestIsLostMessage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"ReceiptHandleIsInvalid", &types.ReceiptHandleIsInvalid{}, true},
		{"MessageNotInflight", fmt.Errorf("op: %w", &types.MessageNotInflight{}), true},
		{"stale handle", &smithy.GenericAPIError{Code: "InvalidParameterValue",
			Message: "Value AQEB for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change."}, true},
		{"stale handle, query protocol code", &smithy.GenericAPIError{Code: "AWS.SimpleQueueService.InvalidParameterValue",
			Message: "Value x for parameter ReceiptHandle is invalid."}, true},
		{"other parameter", &smithy.GenericAPIError{Code: "InvalidParameterValue", Message: "Value 99999 for parameter VisibilityTimeout is invalid."}, false},
		{"throttled", &types.RequestThrottled{}, false},
		{"plain", errors.New("connection refused"), false},
	} {
		if got := isLostMessage(tc.err); got != tc.want {
			t.Errorf("%s: isLostMessage(%v) = %v; want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// TestQueueDelayClamped: a delay past SQS's 15 minutes is clamped, not
// refused (SQS refuses DelaySeconds over 900), and the message waits.
func TestQueueDelayClamped(t *testing.T) {
	t.Parallel()
	q := newTestQueue(t)
	ctx := testutil.Context(t)
	if err := q.Enqueue(ctx, []byte("much later"), 20*time.Minute); err != nil {
		t.Fatalf("Enqueue with a 20-minute delay: %v", err)
	}
	if msgs, err := q.Receive(ctx, 10, time.Minute); err != nil || len(msgs) != 0 {
		t.Fatalf("Receive: %d messages, %v; want none (delayed)", len(msgs), err)
	}
}

package aws

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"fngateway/internal/emulators"
	"fngateway/internal/testutil"
)

// newRedrivenQueue creates on f a queue whose RedrivePolicy moves a message
// received more than maxReceive times to a dead-letter queue, and returns
// the queue's and the dead-letter queue's URLs.
func newRedrivenQueue(tb testing.TB, f *emulators.Fauxqs, maxReceive int) (queueURL, dlqURL string) {
	tb.Helper()
	ctx := testutil.Context(tb)
	c := fauxqsConfig(f).sqsClient()
	name := testutil.UniqueName("dl")
	dlq, err := createQueue(ctx, c, name+"-dlq", nil)
	if err != nil {
		tb.Fatal(err)
	}
	policy := fmt.Sprintf(`{"deadLetterTargetArn":"arn:aws:sqs:%s:000000000000:%s-dlq","maxReceiveCount":%d}`, emulators.FauxqsRegion, name, maxReceive)
	q, err := createQueue(ctx, c, name, map[string]string{"RedrivePolicy": policy})
	if err != nil {
		tb.Fatal(err)
	}
	return q, dlq
}

// TestDeadLetterQueue: the dead-letter queue is found from the queue's
// RedrivePolicy; a message SQS moved there after maxReceiveCount receives
// is listed with its body, deliveries and send time; Release shows it again
// and Delete removes it. A queue without a RedrivePolicy says so.
func TestDeadLetterQueue(t *testing.T) {
	f := emulators.StartFauxqs(t)
	ctx := testutil.Context(t)
	cfg := fauxqsConfig(f)
	queueURL, wantDLQ := newRedrivenQueue(t, f, 1)
	got, err := DeadLetterQueueURL(ctx, cfg, queueURL)
	if err != nil || got != wantDLQ {
		t.Fatalf("DeadLetterQueueURL = %q, %v; want %q", got, err, wantDLQ)
	}
	plain := newQueueOn(t, f, testutil.UniqueName("plain"))
	if err := plain.Enqueue(ctx, []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := DeadLetterQueueURL(ctx, cfg, plain.url); !errors.Is(err, ErrNoRedrivePolicy) {
		t.Errorf("DeadLetterQueueURL of a queue without one = %v; want ErrNoRedrivePolicy", err)
	}

	q, err := NewQueue(cfg, queueURL)
	if err != nil {
		t.Fatal(err)
	}
	bodies := []string{`{"v":1,"id":"0123456789abcdef0123456789abcdef"}`, `{"v":1,"id":"fedcba9876543210fedcba9876543210"}`}
	for _, b := range bodies {
		if err := q.Enqueue(ctx, []byte(b), 0); err != nil {
			t.Fatal(err)
		}
	}
	// Received once each and not completed: the next receive moves them.
	ms, err := q.Receive(ctx, 10, time.Minute)
	if err != nil || len(ms) != 2 {
		t.Fatalf("Receive = %d messages, %v; want 2", len(ms), err)
	}
	for _, m := range ms {
		if _, err := q.Extend(ctx, m, 0); err != nil {
			t.Fatal(err)
		}
	}
	if ms, err := q.Receive(ctx, 10, time.Minute); err != nil || len(ms) != 0 {
		t.Fatalf("second Receive = %d messages, %v; want none: moved to the dead-letter queue", len(ms), err)
	}
	dl, err := NewDeadLetters(cfg, got)
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	ls, err := dl.List(ctx, 100, time.Minute)
	if err != nil || len(ls) != 2 {
		t.Fatalf("List = %+v, %v; want the 2 dead letters", ls, err)
	}
	var seen []string
	for _, l := range ls {
		seen = append(seen, string(l.Body))
		if l.ID == "" || l.Receipt == "" || l.Deliveries < 1 || l.SentAt.IsZero() || l.SentAt.After(before) {
			t.Errorf("dead letter %+v: want id, receipt, deliveries ≥ 1 and the send time", l)
		}
	}
	slices.Sort(seen)
	if !slices.Equal(seen, bodies) {
		t.Errorf("bodies %q; want %q", seen, bodies)
	}
	// Held: a second listing sees none until released.
	if again, _ := dl.List(ctx, 100, time.Minute); len(again) != 0 {
		t.Errorf("a listing while held = %d letters; want 0", len(again))
	}
	if err := dl.Release(ctx, ls[0]); err != nil {
		t.Fatal(err)
	}
	if err := dl.Delete(ctx, ls[1]); err != nil {
		t.Fatal(err)
	}
	again, err := dl.List(ctx, 100, time.Minute)
	if err != nil || len(again) != 1 || again[0].ID != ls[0].ID {
		t.Errorf("after Release and Delete: %+v, %v; want only the released one", again, err)
	}
	for _, bad := range []string{"", "arn:aws:s3:::bucket", "arn:aws:sqs:us-east-1::q", "arn:aws:sqs:us-east-1:1:bad name"} {
		if _, _, err := parseQueueARN(bad); err == nil {
			t.Errorf("parseQueueARN(%q) = nil; want an error", bad)
		}
	}
}

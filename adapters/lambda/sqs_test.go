package lambda

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"
	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"fngateway/core/async"
	awsinfra "fngateway/infra/aws"
	"fngateway/internal/emulators"
)

// extender records the visibility changes asked of it.
type extender struct {
	mu   sync.Mutex
	got  map[string]time.Duration // receipt → visibility
	fail error
}

func (x *extender) Extend(_ context.Context, m async.Message, visibility time.Duration) (async.Message, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.fail != nil {
		return m, x.fail
	}
	if x.got == nil {
		x.got = map[string]time.Duration{}
	}
	x.got[m.Receipt] = visibility
	return m, nil
}

func sqsRecord(id, body string, receiveCount int) events.SQSMessage {
	return events.SQSMessage{MessageId: id, ReceiptHandle: "rh-" + id, Body: body, EventSource: "aws:sqs",
		Attributes: map[string]string{"ApproximateReceiveCount": strconv.Itoa(receiveCount)}}
}

func sqsEvent(tb testing.TB, recs ...events.SQSMessage) []byte {
	tb.Helper()
	b, err := json.Marshal(events.SQSEvent{Records: recs})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestSQSRedelivery: a record whose continuation failed transiently is
// hidden for its backoff (by its receive count, at most the invocation's
// time limit) before it is listed; a malformed one is left to the
// visibility timeout; a failed change still lists the record.
func TestSQSRedelivery(t *testing.T) {
	const s = time.Second
	c := continuer{
		"bad":       fmt.Errorf("process continuation: %w", async.ErrBadMessage),
		"transient": errors.New("store down"),
	}
	backoff := async.Redelivery{Base: 10 * s, Max: 5 * time.Minute, Jitter: func() float64 { return 1 }}
	event := sqsEvent(t,
		sqsRecord("ok", "ok", 1),
		sqsRecord("first", "transient", 1),
		sqsRecord("third", "transient", 3),
		sqsRecord("late", "transient", 9),
		sqsRecord("bad", "bad", 1),
	)
	tests := []struct {
		name  string
		limit time.Duration // the invocation's time limit; zero: none
		want  map[string]time.Duration
	}{
		{"by receive count", 0, map[string]time.Duration{"rh-first": 10 * s, "rh-third": 40 * s, "rh-late": 5 * time.Minute}},
		{"within the invocation's limit", 60 * s, map[string]time.Duration{"rh-first": 10 * s, "rh-third": 40 * s, "rh-late": 60 * s}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { // no time passes in the bubble: the limit's share is exact
				x := &extender{}
				h := &Handler{HTTP: echo, Continuations: c, Queue: x, Redelivery: backoff, Limit: tt.limit}
				out, err := h.Invoke(context.Background(), event)
				if err != nil {
					t.Fatal(err)
				}
				if n := len(out.(events.SQSEventResponse).BatchItemFailures); n != 4 {
					t.Errorf("%d batch item failures; want 4", n)
				}
				if len(x.got) != len(tt.want) {
					t.Errorf("visibility changes %v; want %v", x.got, tt.want)
				}
				for rh, want := range tt.want {
					if got := x.got[rh]; got != want {
						t.Errorf("%s hidden for %v; want %v", rh, got, want)
					}
				}
			})
		})
	}
	t.Run("change fails", func(t *testing.T) {
		x := &extender{fail: errors.New("sqs down")}
		h := &Handler{HTTP: echo, Continuations: c, Queue: x, Redelivery: backoff}
		out, err := h.Invoke(context.Background(), event)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(out.(events.SQSEventResponse).BatchItemFailures); n != 4 {
			t.Errorf("%d batch item failures; want 4: a record whose visibility could not change is still listed", n)
		}
	})
}

// TestSQSRedeliveryFauxqs: against fauxqs, a continuation message that
// failed transiently is delivered again after its backoff, not after the
// queue's visibility timeout (here 600 s, 6 × a 100 s function timeout).
// Lower bound: no receive that ended before the invocation started plus the
// backoff got it. Upper bound: the first receive that starts after the
// invocation ended plus the backoff gets it (fauxqs checks visibility
// deadlines at every receive, so its granularity adds nothing), whatever
// the machine's speed.
func TestSQSRedeliveryFauxqs(t *testing.T) {
	f := emulators.StartFauxqs(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cfg := sdkaws.Config{Region: emulators.FauxqsRegion, Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}
	client := sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = sdkaws.String(f.Endpoint()) })
	const visibility = 600 // s
	created, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: sdkaws.String("continuations"),
		Attributes: map[string]string{string(types.QueueAttributeNameVisibilityTimeout): strconv.Itoa(visibility)}})
	if err != nil {
		t.Fatalf("create queue: %v\n%s", err, f.Log())
	}
	queueURL := *created.QueueUrl
	q, err := awsinfra.NewQueue(awsinfra.Config{AWS: cfg, SQSEndpoint: f.Endpoint()}, queueURL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &queueURL, MessageBody: sdkaws.String(`{"v":1,"id":"0123456789abcdef0123456789abcdef"}`)}); err != nil {
		t.Fatal(err)
	}
	receive := func() []types.Message {
		t.Helper()
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &queueURL, MaxNumberOfMessages: 1,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount}})
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		return out.Messages
	}
	// The event source mapping's receive, with the queue's visibility.
	msgs := receive()
	if len(msgs) != 1 {
		t.Fatalf("received %d messages; want the one sent", len(msgs))
	}
	m := msgs[0]
	rec := events.SQSMessage{MessageId: *m.MessageId, ReceiptHandle: *m.ReceiptHandle, Body: *m.Body, EventSource: "aws:sqs",
		Attributes: map[string]string{"ApproximateReceiveCount": m.Attributes["ApproximateReceiveCount"]}}

	const backoff = 2 * time.Second // whole seconds, as SQS takes them
	h := &Handler{
		HTTP:          echo,
		Continuations: continuer{*m.Body: errors.New("store down")},
		Queue:         q,
		Redelivery:    async.Redelivery{Base: backoff, Jitter: func() float64 { return 1 }},
	}
	ictx, icancel := context.WithTimeout(ctx, 100*time.Second) // the invocation's deadline
	before := time.Now()
	out, err := h.Invoke(ictx, sqsEvent(t, rec))
	after := time.Now()
	icancel()
	if err != nil {
		t.Fatal(err)
	}
	if f := out.(events.SQSEventResponse).BatchItemFailures; len(f) != 1 || f[0].ItemIdentifier != rec.MessageId {
		t.Fatalf("batch item failures %+v; want the message", f)
	}
	for {
		start := time.Now()
		got := receive()
		end := time.Now()
		if len(got) == 1 {
			if end.Before(before.Add(backoff)) {
				t.Fatalf("delivered again %v after the invocation started; want not before the backoff, %v", end.Sub(before), backoff)
			}
			if n := got[0].Attributes["ApproximateReceiveCount"]; n != "2" {
				t.Errorf("ApproximateReceiveCount %s; want 2", n)
			}
			t.Logf("delivered again %v after the invocation ended (backoff %v)", end.Sub(after), backoff)
			return
		}
		if !start.Before(after.Add(backoff)) {
			t.Fatalf("not delivered again %v after the invocation ended; want it visible after the backoff, %v (not the %d s visibility timeout)", start.Sub(after), backoff, visibility)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

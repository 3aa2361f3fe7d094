package aws

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"fngateway/core/async"
)

var (
	_ async.Queue              = (*Queue)(nil)
	_ async.VisibilityExtender = (*Queue)(nil)
)

// Limits of SQS standard queues.
const (
	// maxMessageSize is the largest body Enqueue and Notify accept, the
	// size every SQS-compatible server takes (AWS itself now takes up to
	// 1 MiB; a continuation is a few dozen bytes).
	maxMessageSize = 256 << 10
	// maxDelay is the longest delay SQS gives a message. Enqueue clamps
	// longer ones: core re-enqueues a continuation that is not due yet.
	maxDelay = 15 * time.Minute
	// maxReceive is the most messages one ReceiveMessage returns.
	maxReceive = 10
	// maxVisibility is the longest visibility timeout SQS accepts.
	maxVisibility = 12 * time.Hour
	// receiveWait is how long Receive waits for a message when none is
	// visible (long polling, which, unlike a short poll, asks every SQS
	// server, so it never misses a waiting message).
	receiveWait = 1
	// retention is how long the continuation queue keeps a message: the
	// longest SQS allows (14 days), as an async request may live long.
	retention = 14 * 24 * time.Hour
)

// Queue implements async.Queue on an SQS standard queue named by its URL.
// Message text is the body itself (plain: SQS carries UTF-8 text, which
// core's continuation JSON is). The queue is created on first use when
// missing, named after its URL's last segment, with the longest message
// retention (14 days). A Queue is safe for concurrent use.
type Queue struct {
	client *sqs.Client
	url    string
	name   string
}

// NewQueue returns the Queue for queueURL, an SQS queue URL (see
// ParseQueueURL). Requests go to the SQS endpoint of cfg (the region's, or
// an override); the URL names the queue. It does no I/O.
func NewQueue(cfg Config, queueURL string) (*Queue, error) {
	name, err := ParseQueueURL(queueURL)
	if err != nil {
		return nil, fmt.Errorf("sqs queue %q: %w", queueURL, err)
	}
	return &Queue{client: cfg.sqsClient(), url: queueURL, name: name}, nil
}

// Enqueue sends body as a message that becomes visible after delay,
// rounded up to whole seconds and clamped to maxDelay (15 minutes, SQS's
// limit). Bodies longer than maxMessageSize, or that are not text SQS
// accepts (UTF-8 without most control characters), are refused. A missing
// queue is created and the send tried once more.
func (q *Queue) Enqueue(ctx context.Context, body []byte, delay time.Duration) error {
	if err := checkBody(body); err != nil {
		return fmt.Errorf("enqueue to %s: %w", q.name, err)
	}
	in := &sqs.SendMessageInput{
		QueueUrl:     &q.url,
		MessageBody:  sdkaws.String(string(body)),
		DelaySeconds: seconds(delay, 0, maxDelay),
	}
	_, err := q.client.SendMessage(ctx, in)
	if isMissingQueue(err) {
		if err := q.create(ctx); err != nil {
			return fmt.Errorf("enqueue: %w", err)
		}
		_, err = q.client.SendMessage(ctx, in)
	}
	if err != nil {
		return fmt.Errorf("enqueue to %s: %w", q.name, err)
	}
	return nil
}

// Receive returns up to limit visible messages (at most 10, SQS's limit;
// at least 1) and hides each for visibility, rounded up to whole seconds,
// at least 1 s and at most 12 hours. When none is visible it waits up to a
// second for one (long polling) before returning an empty slice.
// DequeueCount is SQS's ApproximateReceiveCount.
func (q *Queue) Receive(ctx context.Context, limit int, visibility time.Duration) ([]async.Message, error) {
	out, err := q.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    &q.url,
		MaxNumberOfMessages:         int32(min(max(limit, 1), maxReceive)),
		VisibilityTimeout:           seconds(visibility, time.Second, maxVisibility),
		WaitTimeSeconds:             receiveWait,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount},
	})
	if isMissingQueue(err) {
		// A queue that does not exist holds nothing; create it for
		// the senders.
		if err := q.create(ctx); err != nil {
			return nil, fmt.Errorf("receive: %w", err)
		}
		return []async.Message{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("receive from %s: %w", q.name, err)
	}
	msgs := make([]async.Message, 0, len(out.Messages))
	for _, m := range out.Messages {
		msg := async.Message{ID: deref(m.MessageId), Receipt: deref(m.ReceiptHandle), Body: []byte(deref(m.Body))}
		if c, err := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)]); err == nil {
			msg.DequeueCount = c
		}
		msgs = append(msgs, msg)
	}
	return msgs, nil
}

// Complete deletes a received message by its receipt handle. If the
// handle is not valid or the queue is gone, the error wraps
// async.ErrNotFound.
func (q *Queue) Complete(ctx context.Context, m async.Message) error {
	_, err := q.client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &q.url, ReceiptHandle: &m.Receipt})
	var invalid *types.ReceiptHandleIsInvalid
	if errors.As(err, &invalid) || isMissingQueue(err) {
		return fmt.Errorf("complete message %s: %w", m.ID, async.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("complete message %s: %w", m.ID, err)
	}
	return nil
}

// Extend hides the received message m for visibility from now, rounded
// up to whole seconds and at most 12 hours (SQS's limit, which also counts
// from the message's first receipt); zero makes it visible at once. SQS
// keeps the receipt handle, so m is returned as it is. A message that is
// gone, no longer in flight, or received again since (its handle is then
// stale), and a queue that is gone, give an error wrapping async.ErrNotFound.
func (q *Queue) Extend(ctx context.Context, m async.Message, visibility time.Duration) (async.Message, error) {
	_, err := q.client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl:          &q.url,
		ReceiptHandle:     &m.Receipt,
		VisibilityTimeout: seconds(visibility, 0, maxVisibility),
	})
	if isLostMessage(err) || isMissingQueue(err) {
		return m, fmt.Errorf("extend message %s: %w", m.ID, async.ErrNotFound)
	}
	if err != nil {
		return m, fmt.Errorf("extend message %s: %w", m.ID, err)
	}
	return m, nil
}

// isLostMessage reports whether err says a receipt handle no longer holds
// its message: not a handle (ReceiptHandleIsInvalid), a message no longer
// in flight (MessageNotInflight), or, as SQS answers a handle from an
// earlier receipt or of a deleted message, InvalidParameterValue about the
// ReceiptHandle.
func isLostMessage(err error) bool {
	var invalid *types.ReceiptHandleIsInvalid
	var notInflight *types.MessageNotInflight
	if errors.As(err, &invalid) || errors.As(err, &notInflight) {
		return true
	}
	var ae smithy.APIError
	return errors.As(err, &ae) && strings.HasSuffix(ae.ErrorCode(), "InvalidParameterValue") &&
		strings.Contains(ae.ErrorMessage(), "ReceiptHandle")
}

// create creates the queue with the longest retention, tolerating one
// that exists.
func (q *Queue) create(ctx context.Context) error {
	_, err := createQueue(ctx, q.client, q.name, map[string]string{
		string(types.QueueAttributeNameMessageRetentionPeriod): strconv.Itoa(int(retention / time.Second)),
	})
	return err
}

// createQueue creates a standard queue and returns its URL. SQS answers an
// existing queue's URL when the attributes agree; a queue that exists with
// other attributes (QueueNameExists) is looked up instead.
func createQueue(ctx context.Context, client *sqs.Client, name string, attrs map[string]string) (string, error) {
	out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: attrs})
	var exists *types.QueueNameExists
	if errors.As(err, &exists) {
		got, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &name})
		if err != nil {
			return "", fmt.Errorf("create queue %s: %w", name, err)
		}
		return deref(got.QueueUrl), nil
	}
	if err != nil {
		return "", fmt.Errorf("create queue %s: %w", name, err)
	}
	return deref(out.QueueUrl), nil
}

// isMissingQueue reports whether err says the queue does not exist.
func isMissingQueue(err error) bool {
	var missing *types.QueueDoesNotExist
	return err != nil && (errors.As(err, &missing) || hasCode(err, "AWS.SimpleQueueService.NonExistentQueue"))
}

// checkBody refuses a message body SQS would not take.
func checkBody(body []byte) error {
	if len(body) > maxMessageSize {
		return fmt.Errorf("message of %d bytes: longer than %d bytes", len(body), maxMessageSize)
	}
	if len(body) == 0 {
		return errors.New("empty message")
	}
	if !validText(body) {
		return errors.New("message is not text SQS accepts (UTF-8 without control characters but tab, LF and CR)")
	}
	return nil
}

// seconds rounds d up to whole seconds within [least, most].
func seconds(d time.Duration, least, most time.Duration) int32 {
	s := (max(d, least) + time.Second - 1) / time.Second
	return int32(min(s, most/time.Second))
}

// validText reports whether b is text SQS accepts in a message: UTF-8 of
// #x9, #xA, #xD, #x20 to #xD7FF, #xE000 to #xFFFD and #x10000 to #x10FFFF.
func validText(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		switch {
		case r == 0x9 || r == 0xA || r == 0xD:
		case r >= 0x20 && r <= 0xD7FF, r >= 0xE000 && r <= 0xFFFD, r >= 0x10000:
		default:
			return false
		}
	}
	return true
}

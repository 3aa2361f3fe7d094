package azure

import (
	"context"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2/queueerror"

	"fngateway/core/async"
)

var (
	_ async.Queue              = (*Queue)(nil)
	_ async.VisibilityExtender = (*Queue)(nil)
)

// Limits of Azure Queue storage.
const (
	// MaxMessageSize is the largest body Enqueue and Notify accept: Azure
	// takes messages of up to 64 KiB of text, and the body travels as
	// base64, which is 4/3 as long.
	MaxMessageSize = 48 << 10
	// maxReceive is the most messages one Receive returns.
	maxReceive = 32
	// maxVisibility is the longest visibility timeout Azure accepts.
	maxVisibility = 7 * 24 * time.Hour
)

// Queue implements async.Queue on an Azure Storage queue. Message text is
// the base64 of the body, which the Functions queue trigger decodes by
// default. Messages never expire (time-to-live -1), since an async request
// may outlive the service's 7-day default. The queue is created on first
// use when missing. A Queue is made by Account.Queue and is safe for
// concurrent use.
type Queue struct {
	q *queueClient
}

// Enqueue adds body as a message that becomes visible after delay, rounded
// up to whole seconds and capped at 7 days (the service's limit). Bodies
// longer than MaxMessageSize are refused.
func (q *Queue) Enqueue(ctx context.Context, body []byte, delay time.Duration) error {
	opts := &azqueue.EnqueueMessageOptions{
		TimeToLive:        to.Ptr(int32(-1)),
		VisibilityTimeout: to.Ptr(seconds(delay, 0)),
	}
	if err := q.q.enqueue(ctx, body, opts); err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	return nil
}

// Receive returns up to limit visible messages (at most 32, the service's
// limit; at least 1) and hides each for visibility, rounded up to whole
// seconds, at least 1 s and at most 7 days. A message whose text is not
// valid base64 is returned with its raw text as Body, so that it fails
// alone where the body is decoded, and its neighbours are unaffected.
func (q *Queue) Receive(ctx context.Context, limit int, visibility time.Duration) ([]async.Message, error) {
	n := min(max(limit, 1), maxReceive)
	opts := &azqueue.DequeueMessagesOptions{
		NumberOfMessages:  to.Ptr(int32(n)),
		VisibilityTimeout: to.Ptr(seconds(visibility, 1)),
	}
	resp, err := q.q.client.DequeueMessages(ctx, opts)
	if queueerror.HasCode(err, queueerror.QueueNotFound) {
		// A queue that does not exist holds nothing; create it for
		// the senders.
		if err := q.q.create(ctx); err != nil {
			return nil, fmt.Errorf("receive: %w", err)
		}
		return []async.Message{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("receive from %s: %w", q.q.name, err)
	}
	msgs := make([]async.Message, 0, len(resp.Messages))
	for _, m := range resp.Messages {
		if m == nil {
			continue
		}
		msg := async.Message{
			ID:      deref(m.MessageID),
			Receipt: deref(m.PopReceipt),
		}
		if m.DequeueCount != nil {
			msg.DequeueCount = int(*m.DequeueCount)
		}
		text := deref(m.MessageText)
		if body, err := base64.StdEncoding.DecodeString(text); err == nil {
			msg.Body = body
		} else {
			msg.Body = []byte(text)
		}
		msgs = append(msgs, msg)
	}
	return msgs, nil
}

// Complete deletes a received message. If the message is gone or its
// receipt is stale (it was received again since), the error wraps
// async.ErrNotFound.
func (q *Queue) Complete(ctx context.Context, m async.Message) error {
	_, err := q.q.client.DeleteMessage(ctx, m.ID, m.Receipt, nil)
	if queueerror.HasCode(err, queueerror.MessageNotFound, queueerror.PopReceiptMismatch, queueerror.QueueNotFound) {
		return fmt.Errorf("complete message %s: %w", m.ID, async.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("complete message %s: %w", m.ID, err)
	}
	return nil
}

// Extend hides the received message m for visibility from now, rounded up
// to whole seconds and capped at 7 days (0: visible again at once), with
// Update Message. The service issues a new pop receipt: the returned
// Message carries it, and Complete or a later Extend needs it. The message
// text is written back unchanged (the base64 of m.Body). A message that is
// gone, or received again since, is an error wrapping async.ErrNotFound.
func (q *Queue) Extend(ctx context.Context, m async.Message, visibility time.Duration) (async.Message, error) {
	text := base64.StdEncoding.EncodeToString(m.Body)
	resp, err := q.q.client.UpdateMessage(ctx, m.ID, m.Receipt, text,
		&azqueue.UpdateMessageOptions{VisibilityTimeout: to.Ptr(seconds(visibility, 0))})
	if queueerror.HasCode(err, queueerror.MessageNotFound, queueerror.PopReceiptMismatch, queueerror.QueueNotFound) {
		return m, fmt.Errorf("extend message %s: %w", m.ID, async.ErrNotFound)
	}
	if err != nil {
		return m, fmt.Errorf("extend message %s: %w", m.ID, err)
	}
	if resp.PopReceipt != nil {
		m.Receipt = *resp.PopReceipt
	}
	return m, nil
}

// queueClient is one queue, created on demand.
type queueClient struct {
	name   string
	client *azqueue.QueueClient
}

func newQueueClient(svc *azqueue.ServiceClient, name string) *queueClient {
	return &queueClient{name: name, client: svc.NewQueueClient(name)}
}

// enqueue sends body as base64 text; a missing queue is created and the
// send tried once more.
func (c *queueClient) enqueue(ctx context.Context, body []byte, opts *azqueue.EnqueueMessageOptions) error {
	return c.send(ctx, body, opts, true)
}

// send sends body as base64 text; a missing queue is created and the send
// tried once more when create is set, and is an error naming it otherwise.
func (c *queueClient) send(ctx context.Context, body []byte, opts *azqueue.EnqueueMessageOptions, create bool) error {
	if len(body) > MaxMessageSize {
		return fmt.Errorf("message of %d bytes for queue %s: longer than %d bytes", len(body), c.name, MaxMessageSize)
	}
	text := base64.StdEncoding.EncodeToString(body)
	_, err := c.client.EnqueueMessage(ctx, text, opts)
	if queueerror.HasCode(err, queueerror.QueueNotFound) {
		if !create {
			return fmt.Errorf("queue %s does not exist: the deployment creates every notification queue (terraform/azure notification_topics)", c.name)
		}
		if err := c.create(ctx); err != nil {
			return err
		}
		_, err = c.client.EnqueueMessage(ctx, text, opts)
	}
	if err != nil {
		return fmt.Errorf("send to queue %s: %w", c.name, err)
	}
	return nil
}

// create creates the queue, tolerating one that exists.
func (c *queueClient) create(ctx context.Context) error {
	_, err := c.client.Create(ctx, nil)
	if err != nil && !queueerror.HasCode(err, queueerror.QueueAlreadyExists) {
		return fmt.Errorf("create queue %s: %w", c.name, err)
	}
	return nil
}

// seconds rounds d up to whole seconds within [least, 7 days].
func seconds(d time.Duration, least int32) int32 {
	s := (d + time.Second - 1) / time.Second
	return int32(min(max(s, time.Duration(least)), maxVisibility/time.Second))
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

package aws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"fngateway/core/async"
)

var _ async.DeadLetters = (*DeadLetters)(nil)

// ErrNoRedrivePolicy is wrapped by the error DeadLetterQueueURL returns for
// a queue that has no dead-letter queue.
var ErrNoRedrivePolicy = errors.New("queue has no RedrivePolicy")

// DeadLetterQueueURL returns the URL of the dead-letter queue of the SQS
// queue at queueURL: the deadLetterTargetArn of its RedrivePolicy
// attribute (GetQueueAttributes), looked up by name and owner account
// (GetQueueUrl). A queue without one is an error wrapping
// ErrNoRedrivePolicy.
func DeadLetterQueueURL(ctx context.Context, cfg Config, queueURL string) (string, error) {
	name, err := ParseQueueURL(queueURL)
	if err != nil {
		return "", fmt.Errorf("sqs queue %q: %w", queueURL, err)
	}
	client := cfg.sqsClient()
	out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       &queueURL,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameRedrivePolicy},
	})
	if err != nil {
		return "", fmt.Errorf("read the RedrivePolicy of queue %s: %w", name, err)
	}
	raw := out.Attributes[string(types.QueueAttributeNameRedrivePolicy)]
	if raw == "" {
		return "", fmt.Errorf("queue %s: %w", name, ErrNoRedrivePolicy)
	}
	var policy struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
	}
	if err := json.Unmarshal([]byte(raw), &policy); err != nil {
		return "", fmt.Errorf("queue %s: RedrivePolicy %.200q: %w", name, raw, err)
	}
	account, dlq, err := parseQueueARN(policy.DeadLetterTargetArn)
	if err != nil {
		return "", fmt.Errorf("queue %s: RedrivePolicy deadLetterTargetArn: %w", name, err)
	}
	got, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &dlq, QueueOwnerAWSAccountId: &account})
	if err != nil {
		return "", fmt.Errorf("look up dead-letter queue %s: %w", dlq, err)
	}
	return deref(got.QueueUrl), nil
}

// parseQueueARN splits an SQS queue ARN, arn:<partition>:sqs:<region>:<account>:<name>.
func parseQueueARN(arn string) (account, name string, err error) {
	p := strings.Split(arn, ":")
	if len(p) != 6 || p[0] != "arn" || p[2] != "sqs" || p[4] == "" {
		return "", "", fmt.Errorf("%.200q is not an SQS queue ARN arn:<partition>:sqs:<region>:<account id>:<queue name>", arn)
	}
	if err := checkQueueName(p[5]); err != nil {
		return "", "", fmt.Errorf("%.200q: %w", arn, err)
	}
	return p[4], p[5], nil
}

// DeadLetters is an SQS dead-letter queue as the dead letters of the
// continuation queue. Make it with NewDeadLetters; it is safe for
// concurrent use.
type DeadLetters struct {
	client *sqs.Client
	url    string
	name   string
}

// NewDeadLetters returns the DeadLetters on the SQS queue at dlqURL. It does
// no I/O.
func NewDeadLetters(cfg Config, dlqURL string) (*DeadLetters, error) {
	name, err := ParseQueueURL(dlqURL)
	if err != nil {
		return nil, fmt.Errorf("sqs dead-letter queue %q: %w", dlqURL, err)
	}
	return &DeadLetters{client: cfg.sqsClient(), url: dlqURL, name: name}, nil
}

// List receives up to max messages, each hidden for hold (rounded up to
// whole seconds, at least 1 s), until a receive that waits a second finds
// none. SQS has no peek: every receive counts in ApproximateReceiveCount;
// Deliveries is that count less this listing's own receive. SentAt is
// SentTimestamp.
func (d *DeadLetters) List(ctx context.Context, max int, hold time.Duration) ([]async.DeadLetter, error) {
	out := []async.DeadLetter{}
	seen := map[string]bool{}
	for len(out) < max {
		got, err := d.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:            &d.url,
			MaxNumberOfMessages: int32(min(max-len(out), maxReceive)),
			VisibilityTimeout:   seconds(hold, time.Second, maxVisibility),
			WaitTimeSeconds:     receiveWait,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{
				types.MessageSystemAttributeNameApproximateReceiveCount,
				types.MessageSystemAttributeNameSentTimestamp,
			},
		})
		if err != nil {
			return nil, fmt.Errorf("receive from %s: %w", d.name, err)
		}
		if len(got.Messages) == 0 {
			break
		}
		for _, m := range got.Messages {
			id := deref(m.MessageId)
			if seen[id] {
				continue
			}
			seen[id] = true
			l := async.DeadLetter{ID: id, Receipt: deref(m.ReceiptHandle), Body: []byte(deref(m.Body))}
			if c, err := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)]); err == nil {
				// This listing's own receive is not a delivery.
				l.Deliveries = c - 1
			}
			if ms, err := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
				l.SentAt = time.UnixMilli(ms).UTC()
			}
			out = append(out, l)
		}
	}
	return out, nil
}

// Delete deletes the listed message l.
func (d *DeadLetters) Delete(ctx context.Context, l async.DeadLetter) error {
	_, err := d.client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &d.url, ReceiptHandle: &l.Receipt})
	if err != nil {
		return fmt.Errorf("delete message %s from %s: %w", l.ID, d.name, err)
	}
	return nil
}

// Release makes the listed message l visible again at once.
func (d *DeadLetters) Release(ctx context.Context, l async.DeadLetter) error {
	_, err := d.client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: &d.url, ReceiptHandle: &l.Receipt, VisibilityTimeout: 0,
	})
	if err != nil {
		return fmt.Errorf("release message %s in %s: %w", l.ID, d.name, err)
	}
	return nil
}

// URL returns the dead-letter queue's URL.
func (d *DeadLetters) URL() string { return d.url }

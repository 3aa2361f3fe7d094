package aws

import (
	"context"
	"fmt"
	"sync"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"fngateway/core/async"
)

var (
	_ async.Notifier     = (*Notifier)(nil)
	_ async.TopicChecker = (*Notifier)(nil)
)

// Notifier implements async.Notifier on SQS: a topic is the standard queue
// of that name in the client's account and region, created on first use
// when missing (with SQS's default retention, 4 days) unless NoCreate is
// set. Queue URLs are looked up once and kept. A Notifier is safe for
// concurrent use once NoCreate is set.
type Notifier struct {
	// NoCreate makes a missing queue an error naming it instead of creating
	// it: on Lambda, where Terraform creates every queue and the function's
	// role may not create any (CONTRACT §6). Zero: create (local, emulators).
	NoCreate bool

	client *sqs.Client
	urls   sync.Map // topic → queue URL
}

// NewNotifier returns the Notifier sending to queues of cfg's account and
// region. It does no I/O.
func NewNotifier(cfg Config) *Notifier {
	return &Notifier{client: cfg.sqsClient()}
}

// CheckTopic reports whether Notify accepts topic as a standard queue name
// (1–80 letters, digits, hyphens and underscores; not a FIFO queue's
// ".fifo"), so that a bad topic stops the start-up.
func (n *Notifier) CheckTopic(topic string) error { return checkQueueName(topic) }

// Notify sends body to the queue named topic. A topic that is not a valid
// standard queue name (1–80 letters, digits, hyphens and underscores) and
// a body Enqueue would refuse are refused. A queue deleted since its URL
// was looked up is looked up (or created) again once.
func (n *Notifier) Notify(ctx context.Context, topic string, body []byte) error {
	if err := n.CheckTopic(topic); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	if err := checkBody(body); err != nil {
		return fmt.Errorf("notify %s: %w", topic, err)
	}
	send := func() error {
		url, err := n.queueURL(ctx, topic)
		if err != nil {
			return err
		}
		_, err = n.client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: sdkaws.String(string(body))})
		return err
	}
	err := send()
	if isMissingQueue(err) {
		n.urls.Delete(topic)
		err = send()
	}
	if err != nil {
		return fmt.Errorf("notify %s: %w", topic, err)
	}
	return nil
}

// queueURL returns the URL of the queue named topic, creating the queue
// when missing.
func (n *Notifier) queueURL(ctx context.Context, topic string) (string, error) {
	if u, ok := n.urls.Load(topic); ok {
		return u.(string), nil
	}
	out, err := n.client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &topic})
	var url string
	switch {
	case isMissingQueue(err) && n.NoCreate:
		return "", fmt.Errorf("queue %s does not exist: the deployment creates every notification queue (terraform/aws notification_topics)", topic)
	case isMissingQueue(err):
		if url, err = createQueue(ctx, n.client, topic, nil); err != nil {
			return "", err
		}
	case err != nil:
		return "", fmt.Errorf("get queue url: %w", err)
	default:
		url = deref(out.QueueUrl)
	}
	n.urls.Store(topic, url)
	return url, nil
}

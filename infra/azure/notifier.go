package azure

import (
	"context"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"

	"fngateway/core/async"
)

var (
	_ async.Notifier     = (*Notifier)(nil)
	_ async.TopicChecker = (*Notifier)(nil)
)

// CheckTopic reports whether Notify accepts topic as a queue name
// (3–63 lower-case letters, digits and single hyphens).
func (n *Notifier) CheckTopic(topic string) error { return checkName("queue", topic) }

// Notifier implements async.Notifier on Azure Queue storage: a topic is a
// queue of that name on the account, created on first use when missing
// unless NoCreate is set. Message text is the base64 of the body, with the
// service's default time-to-live (7 days). A Notifier is made by
// Account.Notifier and is safe for concurrent use once NoCreate is set.
type Notifier struct {
	// NoCreate makes a missing queue an error naming it instead of creating
	// it: on the Azure Functions host, where Terraform creates every queue
	// (docs/terraform.md#inputs-at-a-glance). Zero: create (local, Azurite).
	NoCreate bool

	svc *azqueue.ServiceClient
}

// Notify sends body to the queue named topic. A topic that is not a valid
// queue name (3–63 lower-case letters, digits and single hyphens) and a
// body longer than MaxMessageSize are refused.
func (n *Notifier) Notify(ctx context.Context, topic string, body []byte) error {
	if err := n.CheckTopic(topic); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	if err := newQueueClient(n.svc, topic).send(ctx, body, nil, !n.NoCreate); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}

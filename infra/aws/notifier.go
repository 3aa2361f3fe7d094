package aws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"

	"fngateway/core/async"
)

var (
	_ async.Notifier     = (*Notifier)(nil)
	_ async.TopicChecker = (*Notifier)(nil)
)

// Notifier implements async.Notifier on SNS: a topic is the FIFO topic of
// that name (it ends in ".fifo"), and the notifications of one request
// reach every subscriber in the order they were published: each is
// published with the request's id as its message group and
// "<id>.<Status>" as its deduplication id, so a notification sent again
// (a continuation delivered twice) within SNS's 5-minute deduplication
// interval is delivered once ("Amazon SNS message grouping for FIFO
// topics", and Publish's MessageDeduplicationId, in the Amazon SNS API
// Reference).
//
// A topic's ARN is the one given to NewNotifier (the NotificationTopicArns
// setting the Terraform module writes); a topic without one is created on
// first use (CreateTopic, which returns the ARN of a topic that exists
// already) unless NoCreate is set. A Notifier is safe for concurrent use
// once NoCreate is set.
type Notifier struct {
	// NoCreate makes a topic without a given ARN an error naming it,
	// instead of creating the topic: on Lambda, where Terraform creates
	// every topic and the function's role may only publish to them
	// (docs/async-api.md#notifications-on-aws). Zero: create (local, emulators).
	NoCreate bool

	client *sns.Client
	given  map[string]string // topic → ARN, read-only
	made   sync.Map          // topic → ARN of a topic created here
}

// NewNotifier returns the Notifier publishing to topics of cfg's account
// and region; arns maps topic names to their ARNs (see ParseTopicARNs) and
// may be nil. It does no I/O.
func NewNotifier(cfg Config, arns map[string]string) *Notifier {
	return &Notifier{client: cfg.snsClient(), given: arns}
}

// CheckTopic reports whether Notify accepts topic: an SNS FIFO topic name
// (1–256 letters, digits, hyphens and underscores, ending in ".fifo"),
// and, with NoCreate, one whose ARN was given. A bad topic so stops the
// start-up instead of losing every notification.
func (n *Notifier) CheckTopic(topic string) error {
	if err := checkTopicName(topic); err != nil {
		return err
	}
	if _, ok := n.given[topic]; n.NoCreate && !ok {
		return fmt.Errorf("topic %q has no ARN in NotificationTopicArns: want a topic the deployment creates (terraform/aws notification_topics), which writes its ARN there", topic)
	}
	return nil
}

// Notify publishes body, a lifecycle notification (the JSON object of
// docs/async-api.md#notifications-on-aws, whose RequestGuid and Status give the message group and
// deduplication ids), to the topic named topic. A topic CheckTopic refuses,
// a body Enqueue would refuse and a body without RequestGuid or Status are
// refused. A topic created here and deleted since is created again once.
func (n *Notifier) Notify(ctx context.Context, topic string, body []byte) error {
	if err := n.CheckTopic(topic); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	if err := checkBody(body); err != nil {
		return fmt.Errorf("notify %s: %w", topic, err)
	}
	group, dedup, err := orderIDs(body)
	if err != nil {
		return fmt.Errorf("notify %s: %w", topic, err)
	}
	publish := func() error {
		arn, err := n.topicARN(ctx, topic)
		if err != nil {
			return err
		}
		_, err = n.client.Publish(ctx, &sns.PublishInput{
			TopicArn:               &arn,
			Message:                sdkaws.String(string(body)),
			MessageGroupId:         &group,
			MessageDeduplicationId: &dedup,
		})
		return err
	}
	err = publish()
	if _, given := n.given[topic]; isMissingTopic(err) && !given && !n.NoCreate {
		n.made.Delete(topic)
		err = publish()
	}
	if isMissingTopic(err) {
		return fmt.Errorf("notify %s: topic does not exist: the deployment creates every notification topic (terraform/aws notification_topics): %w", topic, err)
	}
	if err != nil {
		return fmt.Errorf("notify %s: %w", topic, err)
	}
	return nil
}

// topicARN returns the ARN of the topic named topic: the given one, or
// that of the FIFO topic CreateTopic creates (or finds).
func (n *Notifier) topicARN(ctx context.Context, topic string) (string, error) {
	if arn, ok := n.given[topic]; ok {
		return arn, nil
	}
	if n.NoCreate {
		return "", fmt.Errorf("topic %s has no ARN in NotificationTopicArns", topic)
	}
	if arn, ok := n.made.Load(topic); ok {
		return arn.(string), nil
	}
	out, err := n.client.CreateTopic(ctx, &sns.CreateTopicInput{
		Name:       &topic,
		Attributes: map[string]string{"FifoTopic": "true"},
	})
	if err != nil {
		return "", fmt.Errorf("create topic %s: %w", topic, err)
	}
	arn := deref(out.TopicArn)
	n.made.Store(topic, arn)
	return arn, nil
}

// isMissingTopic reports whether err says the topic does not exist.
func isMissingTopic(err error) bool {
	var missing *types.NotFoundException
	return err != nil && (errors.As(err, &missing) || hasCode(err, "NotFound"))
}

// orderIDs returns the message group id (the request's id) and the
// deduplication id ("<id>.<Status>") of a lifecycle notification.
func orderIDs(body []byte) (group, dedup string, err error) {
	var n struct {
		RequestGUID string `json:"RequestGuid"`
		Status      string `json:"Status"`
	}
	if err := json.Unmarshal(body, &n); err != nil || n.RequestGUID == "" || n.Status == "" {
		return "", "", errors.New(`not a lifecycle notification: want a JSON object with "RequestGuid" and "Status"`)
	}
	group, dedup = n.RequestGUID, n.RequestGUID+"."+n.Status
	if !validOrderID(dedup) {
		return "", "", fmt.Errorf("RequestGuid %q and Status %q: want at most %d letters, digits and ASCII punctuation together", n.RequestGUID, n.Status, maxOrderID-1)
	}
	return group, dedup, nil
}

// maxOrderID is the longest MessageGroupId and MessageDeduplicationId SNS
// takes: 128 letters, digits and ASCII punctuation (Amazon SNS API
// Reference, Publish).
const maxOrderID = 128

// validOrderID reports whether s is a MessageGroupId or
// MessageDeduplicationId SNS takes.
func validOrderID(s string) bool {
	if s == "" || len(s) > maxOrderID {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}

// SNS topic names: 1–256 letters, digits, hyphens and underscores, and a
// FIFO topic's name ends in ".fifo" (Amazon SNS API Reference,
// CreateTopic: Name).
const maxTopicName = 256

// checkTopicName applies SNS's rule for FIFO topic names.
func checkTopicName(name string) error {
	base, fifo := strings.CutSuffix(name, ".fifo")
	if !fifo {
		return fmt.Errorf("topic %q is not a FIFO topic: want a name ending in .fifo (only a FIFO topic keeps a request's notifications in order)", name)
	}
	if base == "" || len(name) > maxTopicName {
		return fmt.Errorf("invalid topic name %q: want 1 to %d characters, .fifo included", name, maxTopicName)
	}
	for i := 0; i < len(base); i++ {
		c := base[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("invalid topic name %q: want letters, digits, hyphens and underscores, then .fifo", name)
		}
	}
	return nil
}

// ParseTopicARNs parses a NotificationTopicArns value: SNS topic ARNs
// "arn:<partition>:sns:<region>:<account id>:<name>" separated by commas
// (spaces around them are ignored), each naming a FIFO topic; the result
// maps each topic's name, the ARN's last field, to its ARN. Empty text is
// an empty map. When region is not empty every ARN must be in it: a
// client publishes to its own region's topics.
func ParseTopicARNs(s, region string) (map[string]string, error) {
	out := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for arn := range strings.SplitSeq(s, ",") {
		arn = strings.TrimSpace(arn)
		name, arnRegion, err := parseTopicARN(arn)
		if err != nil {
			return nil, err
		}
		if region != "" && arnRegion != region {
			return nil, fmt.Errorf("topic ARN %q is in region %s: want topics of the function's region, %s", arn, arnRegion, region)
		}
		if prev, dup := out[name]; dup {
			return nil, fmt.Errorf("topic %s has two ARNs, %q and %q: want one", name, prev, arn)
		}
		out[name] = arn
	}
	return out, nil
}

// parseTopicARN checks one SNS topic ARN (Service Authorization Reference,
// "Resource types defined by Amazon SNS": arn:${Partition}:sns:${Region}:
// ${Account}:${TopicName}) and returns its topic's name and region.
func parseTopicARN(arn string) (name, region string, err error) {
	bad := func(why string) error {
		return fmt.Errorf("invalid topic ARN %q: want arn:<partition>:sns:<region>:<12-digit account id>:<topic name>: %s", arn, why)
	}
	f := strings.Split(arn, ":")
	if len(f) != 6 || f[0] != "arn" || f[2] != "sns" {
		return "", "", bad("not an SNS ARN")
	}
	if f[1] != "aws" && !(strings.HasPrefix(f[1], "aws-") && lowerWord(f[1][4:])) {
		return "", "", bad("unknown partition")
	}
	if !lowerWord(f[3]) {
		return "", "", bad("bad region")
	}
	if len(f[4]) != 12 || strings.Trim(f[4], "0123456789") != "" {
		return "", "", bad("bad account id")
	}
	if err := checkTopicName(f[5]); err != nil {
		return "", "", bad(err.Error())
	}
	return f[5], f[3], nil
}

// lowerWord reports whether s is lower-case letters, digits and inner
// hyphens, as partitions and regions are.
func lowerWord(s string) bool {
	if s == "" || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

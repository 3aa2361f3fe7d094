package aws

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"fngateway/core"
	"fngateway/core/async"
	"fngateway/internal/emulators"
	"fngateway/internal/settings"
	"fngateway/internal/testutil"
)

// note is a lifecycle notification as core/async makes it (docs/async-api.md#notifications-on-aws).
func note(tb testing.TB, id, status, topic string, at time.Time) []byte {
	tb.Helper()
	b, err := json.Marshal(map[string]string{"RequestGuid": id, "Status": status, "Timestamp": at.UTC().Format(time.RFC3339Nano), "topicName": topic})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// subscribedQueue creates a FIFO SQS queue subscribed to the topic arn
// with raw message delivery, as terraform/examples/aws does, and returns
// its URL.
func subscribedQueue(tb testing.TB, f *emulators.Fauxqs, arn string) string {
	tb.Helper()
	ctx := testutil.Context(tb)
	q := sqs.NewFromConfig(fauxqsConfig(f).AWS, func(o *sqs.Options) { o.BaseEndpoint = sdkaws.String(f.Endpoint()) })
	name := testutil.UniqueName("subscriber") + ".fifo"
	url, err := createQueue(ctx, q, name, map[string]string{"FifoQueue": "true"})
	if err != nil {
		tb.Fatalf("create the subscriber queue: %v", err)
	}
	attrs, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		tb.Fatalf("subscriber queue ARN: %v", err)
	}
	s := sns.NewFromConfig(fauxqsConfig(f).AWS, func(o *sns.Options) { o.BaseEndpoint = sdkaws.String(f.Endpoint()) })
	if _, err := s.Subscribe(ctx, &sns.SubscribeInput{
		TopicArn:   &arn,
		Protocol:   sdkaws.String("sqs"),
		Endpoint:   sdkaws.String(attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]),
		Attributes: map[string]string{"RawMessageDelivery": "true"},
	}); err != nil {
		tb.Fatalf("Subscribe: %v", err)
	}
	return url
}

// received is one notification a subscriber got, with its message group.
type received struct{ group, id, status string }

// drain receives and deletes the subscriber queue's messages until want
// have arrived, then until the queue is empty, and returns them in the
// order received.
func drain(tb testing.TB, f *emulators.Fauxqs, url string, want int) []received {
	tb.Helper()
	ctx := testutil.Context(tb)
	q := sqs.NewFromConfig(fauxqsConfig(f).AWS, func(o *sqs.Options) { o.BaseEndpoint = sdkaws.String(f.Endpoint()) })
	var got []received
	receive := func() int {
		out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: &url, MaxNumberOfMessages: 10,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameMessageGroupId},
		})
		if err != nil {
			tb.Fatalf("ReceiveMessage: %v", err)
		}
		for _, m := range out.Messages {
			var n struct{ RequestGuid, Status string }
			if err := json.Unmarshal([]byte(deref(m.Body)), &n); err != nil {
				tb.Fatalf("subscriber got %q: not the raw notification: %v", deref(m.Body), err)
			}
			got = append(got, received{m.Attributes[string(sqstypes.MessageSystemAttributeNameMessageGroupId)], n.RequestGuid, n.Status})
			if _, err := q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle}); err != nil {
				tb.Fatalf("DeleteMessage: %v", err)
			}
		}
		return len(out.Messages)
	}
	testutil.Eventually(tb, 20*time.Second, "the subscriber's notifications", func() bool {
		receive()
		return len(got) >= want
	})
	for receive() > 0 {
	}
	return got
}

// TestNotifierSNSOrder publishes two requests' notifications, interleaved
// and one of them twice (a redelivered continuation), through the
// Notifier to a FIFO topic created beforehand, as Terraform does, and
// reads them from an SQS FIFO queue subscribed to it: each request's
// states arrive in order, in the request's message group, and the repeated
// one only once although its timestamp differs.
func TestNotifierSNSOrder(t *testing.T) {
	t.Parallel()
	f := emulators.StartFauxqs(t)
	ctx := testutil.Context(t)
	admin := sns.NewFromConfig(fauxqsConfig(f).AWS, func(o *sns.Options) { o.BaseEndpoint = sdkaws.String(f.Endpoint()) })
	topic := testutil.UniqueName("events") + ".fifo"
	made, err := admin.CreateTopic(ctx, &sns.CreateTopicInput{Name: &topic, Attributes: map[string]string{"FifoTopic": "true"}})
	if err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	arn := deref(made.TopicArn)
	url := subscribedQueue(t, f, arn)

	arns, err := ParseTopicARNs(arn, emulators.FauxqsRegion)
	if err != nil {
		t.Fatalf("ParseTopicARNs(%q): %v", arn, err)
	}
	n := NewNotifier(fauxqsConfig(f), arns)
	n.NoCreate = true // as on Lambda: the given ARN only
	const a, b = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	start := time.Now()
	sent := []struct{ id, status string }{
		{a, "Queued"}, {b, "Queued"}, {a, "Processing"}, {b, "Processing"},
		{a, "Processing"}, // the continuation delivered again
		{b, "Failed"}, {a, "AsyncProcessed"},
	}
	for i, s := range sent {
		if err := n.Notify(ctx, topic, note(t, s.id, s.status, topic, start.Add(time.Duration(i)*time.Millisecond))); err != nil {
			t.Fatalf("Notify(%s %s): %v", s.id, s.status, err)
		}
	}
	got := drain(t, f, url, 6)
	byID := map[string][]string{}
	for _, r := range got {
		if r.group != r.id {
			t.Errorf("notification %s %s in message group %q, want the request's id", r.id, r.status, r.group)
		}
		byID[r.id] = append(byID[r.id], r.status)
	}
	for id, want := range map[string][]string{a: {"Queued", "Processing", "AsyncProcessed"}, b: {"Queued", "Processing", "Failed"}} {
		if !slices.Equal(byID[id], want) {
			t.Errorf("request %s: subscriber got %q, want %q (in order, the repeated Processing once)", id, byID[id], want)
		}
	}
	if len(got) != 6 {
		t.Errorf("subscriber got %d notifications %v, want 6", len(got), got)
	}
}

// TestNotifierCreates: without NoCreate (locally) a topic without an ARN is
// created as a FIFO topic on first use, and again once after it was deleted.
func TestNotifierCreates(t *testing.T) {
	t.Parallel()
	f := emulators.StartFauxqs(t)
	ctx := testutil.Context(t)
	n := NewNotifier(fauxqsConfig(f), nil)
	topic := testutil.UniqueName("local") + ".fifo"
	if err := n.Notify(ctx, topic, note(t, "r1", "Queued", topic, time.Now())); err != nil {
		t.Fatalf("Notify to a new topic: %v", err)
	}
	arn, ok := n.made.Load(topic)
	if !ok {
		t.Fatal("no topic created")
	}
	attrs, err := n.client.GetTopicAttributes(ctx, &sns.GetTopicAttributesInput{TopicArn: sdkaws.String(arn.(string))})
	if err != nil || attrs.Attributes["FifoTopic"] != "true" {
		t.Fatalf("created topic's attributes %v, %v; want a FIFO topic", attrs, err)
	}
	if _, err := n.client.DeleteTopic(ctx, &sns.DeleteTopicInput{TopicArn: sdkaws.String(arn.(string))}); err != nil {
		t.Fatalf("DeleteTopic: %v", err)
	}
	if err := n.Notify(ctx, topic, note(t, "r1", "Processing", topic, time.Now())); err != nil {
		t.Fatalf("Notify after the topic was deleted: %v", err)
	}
	if _, ok := n.made.Load(topic); !ok {
		t.Fatal("topic not created again")
	}
	if err := n.Notify(ctx, topic, []byte(`{"Status":"Queued"}`)); err == nil || !strings.Contains(err.Error(), "RequestGuid") {
		t.Errorf("Notify of a body without RequestGuid = %v; want an error saying what it wants", err)
	}
	if err := n.Notify(ctx, topic, []byte("not json")); err == nil {
		t.Error("Notify of a body that is not JSON: no error")
	}
}

// TestNotifierNoCreate: with NoCreate (on Lambda) a topic without a given
// ARN is refused by CheckTopic and Notify, naming it, and nothing is
// created; a given ARN whose topic is missing is an error naming the
// deployment.
func TestNotifierNoCreate(t *testing.T) {
	t.Parallel()
	f := emulators.StartFauxqs(t)
	ctx := testutil.Context(t)
	missing := testutil.UniqueName("missing") + ".fifo"
	gone := testutil.UniqueName("gone") + ".fifo"
	n := NewNotifier(fauxqsConfig(f), map[string]string{gone: "arn:aws:sns:" + emulators.FauxqsRegion + ":000000000000:" + gone})
	n.NoCreate = true
	if err := n.CheckTopic(missing); err == nil || !strings.Contains(err.Error(), "NotificationTopicArns") {
		t.Errorf("CheckTopic(%s) = %v; want an error naming NotificationTopicArns", missing, err)
	}
	if err := n.Notify(ctx, missing, note(t, "r", "Queued", missing, time.Now())); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("Notify to a topic without an ARN = %v; want an error naming it", err)
	}
	if err := n.Notify(ctx, gone, note(t, "r", "Queued", gone, time.Now())); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("Notify to a given topic that is missing = %v; want an error saying it does not exist", err)
	}
	out, err := n.client.ListTopics(ctx, &sns.ListTopicsInput{})
	if err != nil {
		t.Fatalf("ListTopics: %v", err)
	}
	if len(out.Topics) != 0 {
		t.Errorf("topics %v exist after Notify with NoCreate; want none", out.Topics)
	}
}

// TestNotifierCheckTopic: a topic that is not an SNS FIFO topic name is
// refused by CheckTopic and so stops the start-up (ValidateTopics).
func TestNotifierCheckTopic(t *testing.T) {
	t.Parallel()
	n := NewNotifier(Config{}, nil)
	for _, tc := range []struct {
		topic string
		ok    bool
	}{
		{"a.fifo", true},
		{"lifecycle.fifo", true},
		{"Life_Cycle-2.fifo", true},
		{strings.Repeat("x", 251) + ".fifo", true},
		{"", false},
		{".fifo", false},
		{strings.Repeat("x", 252) + ".fifo", false},
		{"lifecycle", false}, // a standard topic: no order
		{"has space.fifo", false},
		{"dotted.name.fifo", false},
		{"events.FIFO", false},
		{"slash/name.fifo", false},
		{"colon:name.fifo", false},
		{"é.fifo", false},
		{"nul\x00.fifo", false},
	} {
		err := n.CheckTopic(tc.topic)
		if (err == nil) != tc.ok {
			t.Errorf("CheckTopic(%.90q) = %v; want ok %v", tc.topic, err, tc.ok)
		}
		if !tc.ok && err != nil && !strings.Contains(err.Error(), "want") {
			t.Errorf("CheckTopic(%.90q) = %q; want it to say what a valid name is", tc.topic, err)
		}
		profiles := settings.Profiles{"u": {UserID: "u", Async: core.AsyncConfig{Enabled: true, Topic: tc.topic}}}
		err = async.ValidateTopics(profiles, n)
		var se *core.SettingError
		switch {
		case tc.topic == "" && err != nil: // no topic: nothing to check
			t.Errorf("ValidateTopics with no topic: %v", err)
		case tc.topic != "" && !tc.ok && (!errors.As(err, &se) || se.Name != "UserProfiles"):
			t.Errorf("ValidateTopics(topic %.90q) = %v; want a UserProfiles SettingError", tc.topic, err)
		case tc.ok && err != nil:
			t.Errorf("ValidateTopics(topic %.90q) = %v; want nil", tc.topic, err)
		}
	}
}

// TestParseTopicARNs covers the NotificationTopicArns forms.
func TestParseTopicARNs(t *testing.T) {
	const a = "arn:aws:sns:eu-west-1:123456789012:gw-batch-events.fifo"
	const b = "arn:aws:sns:eu-west-1:123456789012:other.fifo"
	for _, tc := range []struct {
		name, in, region string
		want             map[string]string
		mention          string
	}{
		{"empty", "", "eu-west-1", map[string]string{}, ""},
		{"one", a, "eu-west-1", map[string]string{"gw-batch-events.fifo": a}, ""},
		{"two, spaced", a + " , " + b, "eu-west-1", map[string]string{"gw-batch-events.fifo": a, "other.fifo": b}, ""},
		{"any region", a, "", map[string]string{"gw-batch-events.fifo": a}, ""},
		{"china", "arn:aws-cn:sns:cn-north-1:123456789012:x.fifo", "cn-north-1", map[string]string{"x.fifo": "arn:aws-cn:sns:cn-north-1:123456789012:x.fifo"}, ""},
		{"other region", a, "us-east-1", nil, "region"},
		{"duplicate name", a + ",arn:aws:sns:eu-west-1:210987654321:gw-batch-events.fifo", "", nil, "two ARNs"},
		{"empty element", a + ",", "", nil, "SNS ARN"},
		{"a name", "gw-batch-events.fifo", "", nil, "SNS ARN"},
		{"sqs", "arn:aws:sqs:eu-west-1:123456789012:q.fifo", "", nil, "SNS ARN"},
		{"standard topic", "arn:aws:sns:eu-west-1:123456789012:events", "", nil, ".fifo"},
		{"short account", "arn:aws:sns:eu-west-1:12345:e.fifo", "", nil, "account"},
		{"partition", "arn:gcp:sns:eu-west-1:123456789012:e.fifo", "", nil, "partition"},
		{"region case", "arn:aws:sns:EU-west-1:123456789012:e.fifo", "", nil, "region"},
		{"subscription", a + ":0c8b4a3e-1111-2222-3333-444455556666", "", nil, "SNS ARN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseTopicARNs(tc.in, tc.region)
			if tc.want == nil {
				if err == nil || !strings.Contains(err.Error(), tc.mention) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("ParseTopicARNs(%q) = %v, %v; want one line mentioning %q", tc.in, got, err, tc.mention)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTopicARNs(%q): %v", tc.in, err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("ParseTopicARNs(%q) = %v, want %v", tc.in, got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("ParseTopicARNs(%q)[%s] = %q, want %q", tc.in, k, got[k], v)
				}
			}
		})
	}
}

// FuzzParseTopicARNs: whatever parses maps each topic to an ARN ending in
// ":" and that name, whose name CheckTopic accepts, and the ARNs joined
// again parse to the same map.
func FuzzParseTopicARNs(f *testing.F) {
	for _, s := range []string{
		"", "arn:aws:sns:eu-west-1:123456789012:a.fifo",
		"arn:aws:sns:eu-west-1:123456789012:a.fifo, arn:aws-us-gov:sns:us-gov-west-1:123456789012:b_c-d.fifo",
		"arn:aws:sns:eu-west-1:123456789012:a", "arn:aws:sns::123456789012:a.fifo", ",", "arn:aws:sns:r:1:x.fifo",
	} {
		f.Add(s)
	}
	n := NewNotifier(Config{}, nil)
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseTopicARNs(s, "")
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q spans lines", err)
			}
			return
		}
		var arns []string
		for name, arn := range m {
			if !strings.HasSuffix(arn, ":"+name) || strings.TrimSpace(arn) != arn {
				t.Fatalf("%q maps %q to %q", s, name, arn)
			}
			if err := n.CheckTopic(name); err != nil {
				t.Fatalf("%q gives topic %q, which CheckTopic refuses: %v", s, name, err)
			}
			arns = append(arns, arn)
		}
		again, err := ParseTopicARNs(strings.Join(arns, ","), "")
		if err != nil || len(again) != len(m) {
			t.Fatalf("%q parses to %v; joined again: %v, %v", s, m, again, err)
		}
		for name, arn := range m {
			if again[name] != arn {
				t.Fatalf("%q: %s is %q, joined again %q", s, name, arn, again[name])
			}
		}
	})
}

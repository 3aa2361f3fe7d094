package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"fngateway/internal/emulators"
	"fngateway/internal/settings"
)

// deployedEnvironment reads the settings terraform/examples/aws deploys
// (kept equal to the module by go test ./terraform -run TestDeployedSettings)
// and expands its placeholders.
func deployedEnvironment(tb testing.TB, file string, values map[string]string) map[string]string {
	tb.Helper()
	b, err := os.ReadFile("../terraform/testdata/" + file)
	if err != nil {
		tb.Fatalf("read what the module deploys: %v", err)
	}
	var doc struct {
		Settings map[string]string `json:"settings"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || len(doc.Settings) == 0 {
		tb.Fatalf("%s: no settings (%v)", file, err)
	}
	env := map[string]string{}
	for k, v := range doc.Settings {
		env[k] = os.Expand(v, func(name string) string {
			val, ok := values[name]
			if !ok {
				tb.Fatalf("%s: %s holds placeholder ${%s}, which the test does not fill", file, k, name)
			}
			return val
		})
	}
	return env
}

// TestLambdaModuleEnvironment follows docs/deploy-aws.md on the emulated
// host: the function runs with exactly the environment the example deploys
// (only Hosts is the test's backend, and the placeholders known after apply
// are the emulators' bucket and queue), frozen between invocations. The
// first request is served; an async request (the example's "batch"
// profile) is answered 202 at the gateway's AsyncTriggerTimeout, its
// continuation is delivered as an SQS event, and the status URI answers
// the backend's own result; the per-request log line carries the EMF
// metrics the module turns on; and a queue subscribed to the profile's SNS
// FIFO topic gets the request's notifications in order.
func TestLambdaModuleEnvironment(t *testing.T) {
	t.Parallel()
	v := emulators.StartVersitygw(t)
	fq := emulators.StartFauxqs(t)

	// The backend: the first async attempt hangs until the 202 cancels it;
	// every other request is answered at once.
	var calls atomic.Int32
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		io.ReadAll(r.Body)
		if r.URL.Path == "/reports/slow" && n == 2 {
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusOK)
		fmt.Fprintf(w, "report for %s", r.URL.Path)
	}))
	t.Cleanup(be.Close)

	queueURL := fq.QueueURL("module-continuations")
	// The batch profile's notification topic, as the module creates it,
	// with an SQS FIFO queue subscribed as the example subscribes one.
	topicARN, eventsURL := notificationTopic(t, fq, "fngateway-batch-events.fifo")
	env := deployedEnvironment(t, "aws-environment.json", map[string]string{
		"BUCKET": "module-results", "QUEUE_URL": queueURL, "BATCH_TOPIC_ARN": topicARN,
	})
	if env["Hosts"] != "https://backend.example" {
		t.Fatalf("Hosts %q: the example's value changed; update this test", env["Hosts"])
	}
	env["Hosts"] = be.URL
	// What Lambda itself provides (the example's lambda_timeout, the role's
	// credentials, the region), here the emulators'.
	for k, val := range map[string]string{
		"AWS_LAMBDA_FUNCTION_TIMEOUT": "120",
		"AWS_ENDPOINT_URL_S3":         v.Endpoint(),
		"AWS_ENDPOINT_URL_SQS":        fq.Endpoint(),
		"AWS_ENDPOINT_URL_SNS":        fq.Endpoint(),
		"AWS_REGION":                  emulators.VersitygwRegion,
		"AWS_ACCESS_KEY_ID":           emulators.VersitygwAccessKey,
		"AWS_SECRET_ACCESS_KEY":       emulators.VersitygwSecretKey,
		"AWS_EC2_METADATA_DISABLED":   "true",
	} {
		env[k] = val
	}
	f := startFunction(t, binary, env)

	// 1. The first request.
	a, body, _ := f.invokeHTTP(t, httpEvent(t, "lambda-urls-request.json", httpRequest{method: "GET", rawPath: "/hello"}))
	if a.StatusCode != http.StatusOK || string(body) != "report for /hello" || a.Headers["X-Attempts"] != "1" {
		t.Fatalf("first request: %d %v %q; want 200 from the backend, x-Attempts 1", a.StatusCode, a.Headers, body)
	}
	if log := f.rie.Log(); !strings.Contains(log, `"Namespace":"FnGateway"`) {
		t.Errorf("the log line carries no EMF metrics under FnGateway:\n%s", log)
	}

	// 2. An async request: 202 at the gateway's default trigger.
	trigger := time.Duration(settings.DefaultSettings().AsyncTriggerTimeout)
	a, body, took := f.invokeHTTP(t, httpEvent(t, "lambda-urls-request.json", httpRequest{
		method: "POST", rawPath: "/reports/slow",
		headers: map[string]string{"s7pasyncmode": "true", "x-userprofile": "batch"},
		body:    []byte("payload"),
	}))
	var acc acceptedDoc
	if a.StatusCode != http.StatusAccepted || json.Unmarshal(body, &acc) != nil || acc.ID == "" {
		t.Fatalf("async request: %d %s; want 202", a.StatusCode, body)
	}
	if took < trigger {
		t.Errorf("202 after %v, before the %v trigger", took, trigger)
	}
	if a.Headers["Operation-Location"] == "" || a.Headers["Location"] != acc.StatusURI {
		t.Errorf("202 headers %v: want Location (the status URI) and Operation-Location", a.Headers)
	}

	// 3. The continuation, as the SQS event source mapping delivers it.
	msgID, msgBody, _ := receiveContinuation(t, sqsClient(fq), queueURL)
	if failed := f.invokeSQS(t, sqsEvent(t, [2]string{msgID, msgBody})); len(failed) != 0 {
		t.Fatalf("batch item failures %v, want none\n%s", failed, f.rie.Log())
	}

	// 4. The status URI answers the backend's own result.
	su, err := url.Parse(acc.StatusURI)
	if err != nil {
		t.Fatal(err)
	}
	sa, sb, _ := f.invokeHTTP(t, httpEvent(t, "lambda-urls-request.json", httpRequest{method: "GET", rawPath: su.EscapedPath()}))
	if sa.StatusCode != http.StatusOK || !bytes.Equal(sb, []byte("report for /reports/slow")) || sa.Headers["Content-Type"] != "text/plain" {
		t.Errorf("status URI: %d %v %q; want the backend's 200 text/plain report", sa.StatusCode, sa.Headers, sb)
	}

	// 5. The subscriber got the request's notifications through the SNS
	// FIFO topic, in order, in the request's message group.
	want := []string{"Queued", "Processing", "AsyncProcessed"}
	got := readNotifications(t, fq, eventsURL, len(want))
	var statuses []string
	for _, n := range got {
		if n.RequestGuid != acc.ID || n.group != acc.ID || n.TopicName != "fngateway-batch-events.fifo" {
			t.Errorf("notification %+v: want request %s's, in its message group, naming the topic", n, acc.ID)
		}
		statuses = append(statuses, n.Status)
	}
	if !slices.Equal(statuses, want) {
		t.Errorf("the topic's subscriber got %q, want %q in order\n%s", statuses, want, f.rie.Log())
	}
}

// notificationTopic creates the SNS FIFO topic name on f, and an SQS FIFO
// queue subscribed to it with raw message delivery (terraform/examples/aws),
// and returns the topic's ARN and the queue's URL.
func notificationTopic(tb testing.TB, f *emulators.Fauxqs, name string) (arn, queueURL string) {
	tb.Helper()
	ctx := tb.Context()
	cfg := sdkaws.Config{Region: emulators.FauxqsRegion, Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}
	topics := sns.NewFromConfig(cfg, func(o *sns.Options) { o.BaseEndpoint = sdkaws.String(f.Endpoint()) })
	topic, err := topics.CreateTopic(ctx, &sns.CreateTopicInput{Name: &name, Attributes: map[string]string{"FifoTopic": "true"}})
	if err != nil {
		tb.Fatalf("create topic %s: %v", name, err)
	}
	sq := sqsClient(f)
	q, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: sdkaws.String("subscriber-" + name), Attributes: map[string]string{"FifoQueue": "true"}})
	if err != nil {
		tb.Fatalf("create the subscriber queue: %v", err)
	}
	qa, err := sq.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		tb.Fatalf("the subscriber queue's ARN: %v", err)
	}
	if _, err := topics.Subscribe(ctx, &sns.SubscribeInput{
		TopicArn: topic.TopicArn, Protocol: sdkaws.String("sqs"),
		Endpoint:   sdkaws.String(qa.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]),
		Attributes: map[string]string{"RawMessageDelivery": "true"},
	}); err != nil {
		tb.Fatalf("subscribe: %v", err)
	}
	return *topic.TopicArn, *q.QueueUrl
}

// notification is a lifecycle notification a subscriber read, with the
// message group SNS delivered it in.
type notification struct {
	RequestGuid, Status, TopicName string
	group                          string
}

// readNotifications reads (and deletes) want notifications from the
// subscriber queue, in the order delivered, within loadMargin (they are
// published before the invocations that make them answer).
func readNotifications(tb testing.TB, f *emulators.Fauxqs, queueURL string, want int) []notification {
	tb.Helper()
	sq := sqsClient(f)
	var got []notification
	deadline := time.Now().Add(loadMargin)
	for len(got) < want && time.Now().Before(deadline) {
		out, err := sq.ReceiveMessage(tb.Context(), &sqs.ReceiveMessageInput{
			QueueUrl: &queueURL, MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameMessageGroupId},
		})
		if err != nil {
			tb.Fatalf("receive notifications: %v", err)
		}
		for _, m := range out.Messages {
			var n notification
			if err := json.Unmarshal([]byte(sdkaws.ToString(m.Body)), &n); err != nil {
				tb.Fatalf("notification %q: %v", sdkaws.ToString(m.Body), err)
			}
			n.group = m.Attributes[string(sqstypes.MessageSystemAttributeNameMessageGroupId)]
			got = append(got, n)
			if _, err := sq.DeleteMessage(tb.Context(), &sqs.DeleteMessageInput{QueueUrl: &queueURL, ReceiptHandle: m.ReceiptHandle}); err != nil {
				tb.Fatalf("delete a notification: %v", err)
			}
		}
	}
	if len(got) < want {
		tb.Fatalf("the topic's subscriber got %d notifications %+v within %v, want %d", len(got), got, loadMargin, want)
	}
	return got
}

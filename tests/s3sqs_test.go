package tests

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"fngateway/infra/aws"
	"fngateway/internal/emulators"
)

// s3sqsTopic is asyncProfile's topic on AWS: an SNS FIFO topic's name.
const s3sqsTopic = "u1-status.fifo"

// hasRepeat reports whether a status occurs twice in ss.
func hasRepeat(ss []string) bool {
	seen := map[string]bool{}
	for _, s := range ss {
		if seen[s] {
			return true
		}
		seen[s] = true
	}
	return false
}

// s3sqsEnv runs the gateway on S3 (versitygw), SQS and SNS (fauxqs),
// reached through the AWS SDK's own endpoint variables.
func s3sqsEnv(hosts string, v *emulators.Versitygw, f *emulators.Fauxqs) map[string]string {
	return map[string]string{
		"Hosts":                     hosts,
		"AsyncModeEnabled":          "true",
		"AsyncTriggerTimeout":       "300",
		"UserProfiles":              strings.Replace(asyncProfile, `"topic":"u1-status"`, `"topic":"`+s3sqsTopic+`"`, 1),
		"AsyncStore":                "s3://gateway-e2e/async",
		"AsyncQueue":                f.QueueURL("e2e-continuations"),
		"AWS_ENDPOINT_URL_S3":       v.Endpoint(),
		"AWS_ENDPOINT_URL_SQS":      f.Endpoint(),
		"AWS_ENDPOINT_URL_SNS":      f.Endpoint(),
		"AWS_REGION":                emulators.VersitygwRegion,
		"AWS_ACCESS_KEY_ID":         emulators.VersitygwAccessKey,
		"AWS_SECRET_ACCESS_KEY":     emulators.VersitygwSecretKey,
		"AWS_EC2_METADATA_DISABLED": "true",
		// Results are answered 303 to their presigned URL.
		"AsyncInlineResultBytes": "1",
	}
}

// lambdaS3SQSEnv is s3sqsEnv for the Lambda host: there, as the AWS module
// deploys it, the profile's topic exists before the function starts and its
// ARN is in NotificationTopicArns (the function creates no topic).
func lambdaS3SQSEnv(tb testing.TB, hosts string, v *emulators.Versitygw, f *emulators.Fauxqs) map[string]string {
	tb.Helper()
	env := s3sqsEnv(hosts, v, f)
	arn, _ := notificationTopic(tb, f, s3sqsTopic)
	env["NotificationTopicArns"] = arn
	return env
}

// TestAsyncS3SQS runs the async flow of the local host through S3 and
// SQS servers: 202, status, 303 to a presigned URL with the exact body, the
// header blob, a continuation delivered twice, lifecycle notifications
// through an SNS FIFO topic to a subscribed queue, and a hand-off while the
// store is down.
func TestAsyncS3SQS(t *testing.T) {
	t.Parallel()
	v := emulators.StartVersitygw(t)
	f := emulators.StartFauxqs(t)
	// The profile's topic and a subscriber; the local gateway has no ARN
	// for it (no NotificationTopicArns) and finds it by creating it again.
	_, eventsURL := notificationTopic(t, f, s3sqsTopic)
	// The backend holds the work until the test has the 202 and has
	// queued the duplicate; /reports/down is never released.
	var held releases
	be := newHeldBackend(t, 1500*time.Millisecond, held.hold)
	gw := StartGateway(t, s3sqsEnv(be.URL, v, f))

	_, acc, took := submitAsync(t, gw.URL, "/reports/s3", nil)
	// How soon after the trigger: BenchmarkAsyncHandoff/store=s3sqs.
	if took < 300*time.Millisecond || took > 300*time.Millisecond+loadMargin {
		t.Errorf("202 after %v; want after the 300 ms trigger", took)
	}
	// A presigned URL dies with the key or session that signed it: the 202
	// hands out gateway result URLs (TestAsyncResultURIOutlivesKey).
	if !strings.HasPrefix(acc.DataBlobURI, gw.URL+"/_gateway/async/"+acc.ID+"/data?sig=") {
		t.Errorf("data URI %q: want a gateway result URL on %s", acc.DataBlobURI, gw.URL)
	}

	// The queue delivers the continuation twice while the in-flight
	// attempt still runs: one backend call, one result.
	cfg := aws.Config{
		AWS: sdkaws.Config{
			Region:      emulators.FauxqsRegion,
			Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		},
		SQSEndpoint: f.Endpoint(),
	}
	q, err := aws.NewQueue(cfg, f.QueueURL("e2e-continuations"))
	if err != nil {
		t.Fatal(err)
	}
	dup := []byte(`{"v":1,"id":"` + acc.ID + `"}`)
	ctx := context.Background()
	if err := q.Enqueue(ctx, dup, 0); err != nil {
		t.Fatal(err)
	}
	held.release("/reports/s3")

	loc, _ := waitDone(t, acc.StatusURI, 1500*time.Millisecond+loadMargin) // the backend's delay
	if !strings.HasPrefix(loc, v.Endpoint()) {
		t.Errorf("303 Location %q: want a presigned URL on %s", loc, v.Endpoint())
	}
	resp, data, _ := Do(t, "GET", loc, nil, "")
	if resp.StatusCode != 200 || string(data) != "report for /reports/s3: payload-123" {
		t.Errorf("data blob via presigned URL = %d %q", resp.StatusCode, data)
	}
	resp, hb, hloc := readResultURI(t, acc.HeaderBlobURI)
	if !strings.HasPrefix(hloc, v.Endpoint()+"/gateway-e2e/async/u1-results/"+acc.ID+"/headers.json?") || !strings.Contains(hloc, "X-Amz-Signature=") {
		t.Errorf("header URI redirected to %q: want a presigned path-style URL on %s", hloc, v.Endpoint())
	}
	var h headerBlob
	if resp.StatusCode != 200 || json.Unmarshal(hb, &h) != nil || h.Status != 201 || h.ID != acc.ID {
		t.Fatalf("header blob = %d %s", resp.StatusCode, hb)
	}

	// A duplicate after completion is acknowledged and changes nothing.
	sq := sqs.NewFromConfig(cfg.AWS, func(o *sqs.Options) { o.BaseEndpoint = sdkaws.String(f.Endpoint()) })
	before := sqsCount(t, sq, f.QueueURL("e2e-continuations"))
	if err := q.Enqueue(ctx, dup, 0); err != nil {
		t.Fatal(err)
	}
	waitSQSCount(t, sq, f.QueueURL("e2e-continuations"), before)
	_, hb2, _ := readResultURI(t, acc.HeaderBlobURI)
	if string(hb2) != string(hb) {
		t.Errorf("the header blob changed after a duplicate delivery:\n%s\n%s", hb, hb2)
	}
	if got := be.total.Load(); got != 1 {
		t.Errorf("backend calls = %d; want 1", got)
	}

	// The profile's topic is the SNS FIFO topic of that name: its
	// subscriber gets the request's states in order, each once although
	// the continuation was delivered twice.
	var statuses []string
	deadline := time.Now().Add(loadMargin) // sent as the request is queued and done
	for !containsAll(statuses, "Queued", "AsyncProcessed") && time.Now().Before(deadline) {
		out, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &eventsURL, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatalf("receive notifications: %v", err)
		}
		for _, m := range out.Messages {
			var n struct{ RequestGuid, Status, Timestamp, TopicName string }
			if err := json.Unmarshal([]byte(sdkaws.ToString(m.Body)), &n); err != nil || n.RequestGuid != acc.ID || n.TopicName != s3sqsTopic {
				t.Errorf("notification %q: want JSON for %s on %s", sdkaws.ToString(m.Body), acc.ID, s3sqsTopic)
			}
			statuses = append(statuses, n.Status)
			if _, err := sq.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &eventsURL, ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatalf("delete a notification: %v", err)
			}
		}
	}
	if len(statuses) < 2 || statuses[0] != "Queued" || statuses[len(statuses)-1] != "AsyncProcessed" || hasRepeat(statuses) {
		t.Errorf("notifications %v: want Queued first, AsyncProcessed last, none twice", statuses)
	}

	// A tampered signature is refused by the S3 server itself.
	u, _ := url.Parse(loc)
	qs := u.Query()
	sig := qs.Get("X-Amz-Signature")
	flip := "0"
	if sig[0] == '0' {
		flip = "1"
	}
	qs.Set("X-Amz-Signature", flip+sig[1:])
	u.RawQuery = qs.Encode()
	if resp, _, _ := Do(t, "GET", u.String(), nil, ""); resp.StatusCode != 403 {
		t.Errorf("tampered signature: %d; want 403", resp.StatusCode)
	}

	t.Run("store down: 503 AsyncUnavailable, no 202", func(t *testing.T) {
		before := be.total.Load()
		v.Stop()
		defer v.Start(t)
		resp, body, took := Do(t, "POST", gw.URL+"/reports/down",
			map[string]string{"S7PAsyncMode": "true", "X-UserProfile": "u1"}, "payload")
		if resp.StatusCode != 503 {
			t.Fatalf("status = %d; want 503 (body %s)", resp.StatusCode, body)
		}
		if d := decodeError(t, resp, body); d.Error.Code != "AsyncUnavailable" {
			t.Errorf("code = %q; want AsyncUnavailable", d.Error.Code)
		}
		if resp.Header.Get("Location") != "" || resp.Header.Get("X-Data-Blob-Uri") != "" {
			t.Errorf("a 503 carries async URIs: %v", resp.Header)
		}
		if took > loadMargin {
			t.Errorf("503 after %v; want a quick answer", took)
		}
		if be.total.Load() != before+1 {
			t.Errorf("backend calls = %d; want %d", be.total.Load(), before+1)
		}
	})
}

func containsAll(have []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			found = found || h == w
		}
		if !found {
			return false
		}
	}
	return true
}

// sqsCount is the queue's messages, visible, in flight or delayed.
func sqsCount(tb testing.TB, c *sqs.Client, queueURL string) int {
	tb.Helper()
	out, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: &queueURL,
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		},
	})
	if err != nil {
		tb.Fatalf("queue attributes: %v", err)
	}
	n := 0
	for _, v := range out.Attributes {
		i, err := strconv.Atoi(v)
		if err != nil {
			tb.Fatalf("queue attributes %v: %v", out.Attributes, err)
		}
		n += i
	}
	return n
}

// waitSQSCount waits until the queue holds want messages: the gateway's
// worker has received and completed the others.
func waitSQSCount(tb testing.TB, c *sqs.Client, queueURL string, want int) {
	tb.Helper()
	deadline := time.Now().Add(loadMargin) // the worker receives at once
	for time.Now().Before(deadline) {
		if sqsCount(tb, c, queueURL) == want {
			return
		}
		time.Sleep(50 * time.Millisecond) // polling with a deadline
	}
	tb.Fatalf("the queue did not return to %d messages within %v", want, loadMargin)
}

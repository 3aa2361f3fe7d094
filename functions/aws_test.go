//go:build !noaws

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"fngateway/core"
	"fngateway/core/async"
	"fngateway/internal/emulators"
	"fngateway/internal/settings"
)

func TestOpenAWSSettingErrors(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	const queue = "https://sqs.us-east-1.amazonaws.com/123456789012/gateway-continuations"
	for _, tc := range []struct {
		name, store, queue string
		setting, mention   string
	}{
		{"no bucket", "s3://", queue, "AsyncStore", "s3://<bucket>"},
		{"bad bucket", "s3://Bad_Bucket", queue, "AsyncStore", "bucket name"},
		{"one slash", "s3:/bucket", queue, "AsyncStore", "s3://<bucket>"},
		{"dot segment", "s3://bucket/a/../b", queue, "AsyncStore", "segment"},
		{"no queue", "s3://bucket", "", "AsyncQueue", "SQS queue URL"},
		{"queue name only", "s3://bucket", "gateway-continuations", "AsyncQueue", "SQS queue URL"},
		{"no account", "s3://bucket", "https://sqs.us-east-1.amazonaws.com/gateway-continuations", "AsyncQueue", "SQS queue URL"},
		{"fifo", "s3://bucket", "https://sqs.us-east-1.amazonaws.com/123456789012/q.fifo", "AsyncQueue", "FIFO"},
		{"bad name", "s3://bucket", "https://sqs.us-east-1.amazonaws.com/123456789012/a%20b", "AsyncQueue", "queue name"},
		{"query", "s3://bucket", queue + "?x=1", "AsyncQueue", "SQS queue URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := openAWS(t.Context(), &settings.Settings{AsyncStore: tc.store, AsyncQueue: tc.queue}, nil)
			var se *core.SettingError
			if !errors.As(err, &se) {
				t.Fatalf("openAWS error = %v, want a SettingError", err)
			}
			if se.Name != tc.setting || !strings.Contains(se.Want, tc.mention) || strings.Contains(se.Error(), "\n") {
				t.Fatalf("error %q: want one line naming %s and mentioning %q", se.Error(), tc.setting, tc.mention)
			}
		})
	}
	t.Run("no region", func(t *testing.T) {
		t.Setenv("AWS_REGION", "")
		t.Setenv("AWS_DEFAULT_REGION", "")
		t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
		_, err := openAWS(t.Context(), &settings.Settings{AsyncStore: "s3://bucket", AsyncQueue: queue}, nil)
		var se *core.SettingError
		if !errors.As(err, &se) || se.Name != "AWS_REGION" {
			t.Fatalf("openAWS error = %v, want a SettingError naming AWS_REGION", err)
		}
	})
	// NotificationTopicArns: SNS FIFO topic ARNs of the SDK's region, and
	// only with an s3:// store.
	for _, tc := range []struct{ name, store, arns, mention string }{
		{"topic name", "s3://bucket", "events.fifo", "SNS ARN"},
		{"standard topic", "s3://bucket", "arn:aws:sns:us-east-1:123456789012:events", ".fifo"},
		{"other region", "s3://bucket", "arn:aws:sns:eu-west-1:123456789012:events.fifo", "region"},
		{"file store", "file:" + t.TempDir(), "arn:aws:sns:us-east-1:123456789012:events.fifo", "s3://"},
	} {
		t.Run("NotificationTopicArns "+tc.name, func(t *testing.T) {
			_, err := openAsync(t.Context(), &settings.Settings{AsyncStore: tc.store, AsyncQueue: queue, NotificationTopicArns: tc.arns})
			var se *core.SettingError
			if !errors.As(err, &se) || se.Name != "NotificationTopicArns" || !strings.Contains(se.Want, tc.mention) || strings.Contains(se.Error(), "\n") {
				t.Fatalf("openAsync error = %v; want one line naming NotificationTopicArns and mentioning %q", err, tc.mention)
			}
		})
	}
	t.Run("openAsync", func(t *testing.T) {
		_, err := openAsync(t.Context(), &settings.Settings{AsyncModeEnabled: true, AsyncStore: "s3:bucket"})
		var se *core.SettingError
		if !errors.As(err, &se) || se.Name != "AsyncStore" || !strings.Contains(se.Want, "s3://<bucket>") {
			t.Fatalf("openAsync(AsyncStore=s3:bucket) error = %v, want a SettingError on AsyncStore", err)
		}
	})
}

// TestOpenAWSEndpointsFromEnvironment: the SDK's default chain carries
// AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL_SQS and AWS_ENDPOINT_URL_SNS to the
// store, the queue and the notifier (publishing to the topic
// NotificationTopicArns names),
// and the custom S3 endpoint is addressed path-style (versitygw serves
// nothing else).
func TestOpenAWSEndpointsFromEnvironment(t *testing.T) {
	v := emulators.StartVersitygw(t)
	f := emulators.StartFauxqs(t)
	t.Setenv("AWS_ENDPOINT_URL_S3", v.Endpoint())
	t.Setenv("AWS_ENDPOINT_URL_SQS", f.Endpoint())
	t.Setenv("AWS_ENDPOINT_URL_SNS", f.Endpoint())
	t.Setenv("AWS_REGION", emulators.VersitygwRegion)
	t.Setenv("AWS_ACCESS_KEY_ID", emulators.VersitygwAccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", emulators.VersitygwSecretKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	parts, err := openAWS(ctx, &settings.Settings{
		AsyncStore: "s3://gateway-env/results",
		AsyncQueue: f.QueueURL("gateway-continuations"),
	}, nil)
	if err != nil {
		t.Fatalf("openAWS: %v", err)
	}
	if _, err := parts.store.Put(ctx, "gateway/records/r.json", []byte(`{}`), ""); err != nil {
		t.Fatalf("Put through AWS_ENDPOINT_URL_S3: %v", err)
	}
	if err := parts.store.WriteBlob(ctx, "results/id/data", strings.NewReader("result"), "text/plain", true); err != nil {
		t.Fatalf("WriteBlob: %v", err)
	}
	u, err := parts.store.SignURL(ctx, "results/id/data", time.Now().Add(time.Hour))
	if err != nil {
		t.Fatalf("SignURL: %v", err)
	}
	if want := v.Endpoint() + "/gateway-env/results/results/id/data?"; !strings.HasPrefix(u, want) {
		t.Fatalf("signed URL %s: want path-style %s…", u, want)
	}
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("GET signed URL: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "result" {
		t.Fatalf("GET signed URL: %d %q, want 200 %q", resp.StatusCode, body, "result")
	}
	msg := []byte(`{"v":1,"id":"0123456789abcdef0123456789abcdef"}`)
	if err := parts.queue.Enqueue(ctx, msg, 0); err != nil {
		t.Fatalf("Enqueue through AWS_ENDPOINT_URL_SQS: %v", err)
	}
	got, err := parts.queue.Receive(ctx, 10, time.Minute)
	if err != nil || len(got) != 1 || !bytes.Equal(got[0].Body, msg) {
		t.Fatalf("Receive = %v, %v; want the message", got, err)
	}
	// The topic as the module makes it, and its ARN in NotificationTopicArns.
	admin := sns.NewFromConfig(sdkaws.Config{Region: emulators.FauxqsRegion, Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")},
		func(o *sns.Options) { o.BaseEndpoint = sdkaws.String(f.Endpoint()) })
	topic, err := admin.CreateTopic(ctx, &sns.CreateTopicInput{Name: sdkaws.String("gateway-events.fifo"), Attributes: map[string]string{"FifoTopic": "true"}})
	if err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	parts, err = openAWS(ctx, &settings.Settings{
		AsyncStore:            "s3://gateway-env/results",
		AsyncQueue:            f.QueueURL("gateway-continuations"),
		NotificationTopicArns: *topic.TopicArn,
	}, nil)
	if err != nil {
		t.Fatalf("openAWS with NotificationTopicArns: %v", err)
	}
	if err := parts.notifier.Notify(ctx, "gateway-events.fifo", []byte(`{"RequestGuid":"0123456789abcdef0123456789abcdef","Status":"Queued"}`)); err != nil {
		t.Fatalf("Notify through AWS_ENDPOINT_URL_SNS: %v", err)
	}
}

// The SQS store of TestDeadLettersCommand: only the builds that link AWS
// (awsConfig) have it.
func init() {
	dlStores = append(dlStores, dlStore{"sqs", func(t *testing.T) (func(*testing.T, async.Queue), func(*gateway) async.Queue) {
		v := emulators.StartVersitygw(t)
		f := emulators.StartFauxqs(t)
		for k, val := range map[string]string{
			"AWS_ENDPOINT_URL_S3": v.Endpoint(), "AWS_ENDPOINT_URL_SQS": f.Endpoint(), "AWS_REGION": emulators.VersitygwRegion,
			"AWS_ACCESS_KEY_ID": emulators.VersitygwAccessKey, "AWS_SECRET_ACCESS_KEY": emulators.VersitygwSecretKey,
			"AWS_SESSION_TOKEN": "", "AWS_PROFILE": "", "AWS_CONFIG_FILE": filepath.Join(t.TempDir(), "none"),
			"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(t.TempDir(), "none"), "AWS_EC2_METADATA_DISABLED": "true",
			"AsyncStore": "s3://dl-test/async", "AsyncQueue": f.QueueURL("dl-continuations"),
		} {
			setEnv(t, k, val)
		}
		// The module's queues: a RedrivePolicy moves a message received
		// more than once (max_receive_count) to the dead-letter queue.
		cfg, err := awsConfig(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		c := sqs.NewFromConfig(cfg.AWS, func(o *sqs.Options) { o.BaseEndpoint = sdkaws.String(f.Endpoint()) })
		dlq, err := c.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: sdkaws.String("dl-continuations-dlq")})
		if err != nil {
			t.Fatal(err)
		}
		attrs, err := c.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: dlq.QueueUrl,
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
		if err != nil {
			t.Fatal(err)
		}
		policy := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":1}`, attrs.Attributes["QueueArn"])
		if _, err := c.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: sdkaws.String("dl-continuations"),
			Attributes: map[string]string{"RedrivePolicy": policy}}); err != nil {
			t.Fatal(err)
		}
		return func(t *testing.T, q async.Queue) {
				m := receiveOne(t, q)
				if _, err := q.(async.VisibilityExtender).Extend(t.Context(), m, 0); err != nil {
					t.Fatal(err)
				}
				if ms, err := q.Receive(t.Context(), 10, time.Minute); err != nil || len(ms) != 0 {
					t.Fatalf("receive past maxReceiveCount = %d, %v; want none: moved to the dead-letter queue", len(ms), err)
				}
			}, func(gw *gateway) async.Queue {
				return gw.async.Queue
			}
	}})
}

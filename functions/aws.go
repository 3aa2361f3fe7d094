package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/config"

	"fngateway/core"
	"fngateway/core/async"
	"fngateway/infra/aws"
)

type awsParts struct {
	store    async.Store
	queue    async.Queue
	notifier async.Notifier
}

// sqsQueueURLWant describes AsyncQueue's value with an s3:// store.
const sqsQueueURLWant = "want an SQS queue URL https://sqs.<region>.amazonaws.com/<account id>/<queue name> (a standard queue) when AsyncStore is s3://"

// openAWS connects AsyncStore=s3://<bucket>[/<prefix>] and the SQS queue
// AsyncQueue names. Credentials, region and endpoints come from the AWS
// SDK's default chain: the function role's credentials and AWS_REGION on
// Lambda; AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL_SQS / AWS_ENDPOINT_URL_SNS
// redirect the clients to S3-, SQS- and SNS-compatible servers (a custom S3
// endpoint is addressed path-style). Lifecycle notifications go to the SNS
// FIFO topics NotificationTopicArns lists. Nothing is contacted here: a
// wrong credential or endpoint shows in the first async hand-off (503
// AsyncUnavailable).
func openAWS(ctx context.Context, s *core.Settings) (*awsParts, error) {
	if _, _, err := aws.ParseLocation(s.AsyncStore); err != nil {
		return nil, &core.SettingError{Name: "AsyncStore", Value: s.AsyncStore, Want: err.Error()}
	}
	if s.AsyncQueue == "" {
		return nil, &core.SettingError{Name: "AsyncQueue", Value: "", Want: sqsQueueURLWant}
	}
	if _, err := aws.ParseQueueURL(s.AsyncQueue); err != nil {
		want := err.Error()
		if !strings.HasPrefix(want, "want") {
			want = sqsQueueURLWant + ": " + want
		}
		return nil, &core.SettingError{Name: "AsyncQueue", Value: s.AsyncQueue, Want: want}
	}
	cfg, err := awsConfig(ctx)
	if err != nil {
		return nil, err
	}
	store, err := aws.NewStore(cfg, s.AsyncStore)
	if err != nil {
		return nil, &core.SettingError{Name: "AsyncStore", Value: s.AsyncStore, Want: err.Error()}
	}
	queue, err := aws.NewQueue(cfg, s.AsyncQueue)
	if err != nil {
		return nil, &core.SettingError{Name: "AsyncQueue", Value: s.AsyncQueue, Want: err.Error()}
	}
	arns, err := aws.ParseTopicARNs(s.NotificationTopicArns, cfg.AWS.Region)
	if err != nil {
		return nil, &core.SettingError{Name: "NotificationTopicArns", Value: s.NotificationTopicArns, Want: err.Error()}
	}
	// On Lambda, Terraform creates every notification topic, writes their
	// ARNs, and the role may only publish to them (docs/async-api.md#notifications-on-aws): a topic
	// without an ARN stops the start-up (ValidateTopics), none is created.
	notifier := aws.NewNotifier(cfg, arns)
	notifier.NoCreate = os.Getenv("AWS_LAMBDA_RUNTIME_API") != ""
	return &awsParts{store: store, queue: queue, notifier: notifier}, nil
}

// awsConfig loads the AWS SDK's default configuration, which must name a
// region.
func awsConfig(ctx context.Context) (aws.Config, error) {
	sdk, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load the AWS SDK configuration (AWS_* variables, shared config files): %w", err)
	}
	if sdk.Region == "" {
		return aws.Config{}, &core.SettingError{Name: "AWS_REGION", Value: "",
			Want: "want the AWS region of the bucket and queue when AsyncStore is s3:// (Lambda sets it; elsewhere set AWS_REGION)"}
	}
	return aws.Config{AWS: sdk}, nil
}

//go:build !noaws

// The AWS wiring: everything of the gateway that links the AWS SDK. A build
// with -tags noaws (make package-azure) leaves it out; aws_off.go stands in.

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"fngateway/core"
	"fngateway/infra/aws"
	"fngateway/internal/settings"
)

// sqsQueueURLWant describes AsyncQueue's value with an s3:// store.
const sqsQueueURLWant = "want an SQS queue URL https://sqs.<region>.amazonaws.com/<account id>/<queue name> (a standard queue) when AsyncStore is s3://"

// openAWS connects AsyncStore=s3://<bucket>[/<prefix>] and the SQS queue
// AsyncQueue names. Credentials, region and endpoints come from
// loadAWSConfig (the AWS SDK's default chain; in the Lambda package only
// what Lambda gives): the function role's credentials and AWS_REGION on
// Lambda; AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL_SQS / AWS_ENDPOINT_URL_SNS
// redirect the clients to S3-, SQS- and SNS-compatible servers (a custom S3
// endpoint is addressed path-style). Lifecycle notifications go to the SNS
// FIFO topics NotificationTopicArns lists. Nothing is contacted here: a
// wrong credential or endpoint shows in the first async hand-off (503
// AsyncUnavailable). With dl, the dead-letter queue dl.dlq is connected
// too, by default the one AsyncQueue's redrive policy names (which asks
// SQS).
func openAWS(ctx context.Context, s *settings.Settings, dl *deadLetterQuery) (*asyncParts, error) {
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
	p := &asyncParts{store: store, queue: queue, notifier: notifier}
	if dl == nil {
		return p, nil
	}
	dlq := dl.dlq
	if dlq == "" {
		if dlq, err = aws.DeadLetterQueueURL(ctx, cfg, s.AsyncQueue); err != nil {
			if errors.Is(err, aws.ErrNoRedrivePolicy) {
				err = fmt.Errorf("%w; give the dead-letter queue with --dlq URL", err)
			}
			return nil, err
		}
	}
	if p.deadLetters, err = aws.NewDeadLetters(cfg, dlq); err != nil {
		return nil, err
	}
	p.where = "queue " + dlq
	return p, nil
}

// awsConfig loads the AWS SDK's default configuration, which must name a
// region.
func awsConfig(ctx context.Context) (aws.Config, error) {
	sdk, err := loadAWSConfig(ctx, "")
	if err != nil {
		return aws.Config{}, fmt.Errorf("load the AWS SDK configuration (AWS_* variables, shared config files): %w", err)
	}
	if sdk.Region == "" {
		return aws.Config{}, &core.SettingError{Name: "AWS_REGION", Value: "",
			Want: "want the AWS region of the bucket and queue when AsyncStore is s3:// (Lambda sets it; elsewhere set AWS_REGION)"}
	}
	return aws.Config{AWS: sdk}, nil
}

// sigv4Authorizer signs a route's requests for service in region with the
// credentials of loadAWSConfig (the function's role on Lambda).
func sigv4Authorizer(ctx context.Context, service, region string) (core.Authorizer, error) {
	cfg, err := loadAWSConfig(ctx, region)
	if err != nil {
		return nil, fmt.Errorf("AWS configuration: %w", err)
	}
	return aws.NewSigner(cfg.Credentials, service, region), nil
}

// checkSQSQueueURL checks a --dlq value, an SQS queue URL.
func checkSQSQueueURL(s string) error {
	_, err := aws.ParseQueueURL(s)
	return err
}

// sigv4Signer is the signer of `gateway check --aws-sigv4`: infra/aws's,
// for service lambda in region (default the SDK's), with the credentials of
// loadAWSConfig: the SDK's default chain (environment, shared config and
// credentials files, SSO, container and instance roles), or in the Lambda
// package (-tags lambdaonly) the environment's and the container endpoint's
// only. They must give credentials now.
func sigv4Signer(ctx context.Context, region string) (core.Authorizer, error) {
	cfg, err := loadAWSConfig(ctx, region)
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, errors.New("no region: give --region or set AWS_REGION")
	}
	if cfg.Credentials == nil {
		return nil, errors.New("no AWS credentials found")
	}
	// The SDK's configuration caches the credentials (an
	// aws.CredentialsCache), which the signer then shares.
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		return nil, fmt.Errorf("AWS credentials: %w", err)
	}
	return aws.NewSigner(cfg.Credentials, "lambda", cfg.Region), nil
}

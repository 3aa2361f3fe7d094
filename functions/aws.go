//go:build !noaws

// The AWS wiring: everything of the gateway that links the AWS SDK. A build
// with -tags noaws (make package-azure) leaves it out; aws_off.go stands in.

package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

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
// AsyncQueue names. Credentials, region and endpoints come from
// loadAWSConfig (the AWS SDK's default chain; in the Lambda package only
// what Lambda gives): the function role's credentials and AWS_REGION on
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

// openS3DeadLetters connects AsyncStore=s3://, its SQS queue and the
// dead-letter queue dlq (by default the queue's redrive policy's).
func openS3DeadLetters(ctx context.Context, store, queue, dlq string) (*async.Redriver, string, error) {
	if _, err := aws.ParseQueueURL(queue); err != nil {
		return nil, "", &core.SettingError{Name: "AsyncQueue", Value: queue, Want: sqsQueueURLWant}
	}
	cfg, err := awsConfig(ctx)
	if err != nil {
		return nil, "", err
	}
	st, err := aws.NewStore(cfg, store)
	if err != nil {
		return nil, "", &core.SettingError{Name: "AsyncStore", Value: store, Want: err.Error()}
	}
	q, err := aws.NewQueue(cfg, queue)
	if err != nil {
		return nil, "", &core.SettingError{Name: "AsyncQueue", Value: queue, Want: err.Error()}
	}
	if dlq == "" {
		if dlq, err = aws.DeadLetterQueueURL(ctx, cfg, queue); err != nil {
			if errors.Is(err, aws.ErrNoRedrivePolicy) {
				err = fmt.Errorf("%w; give the dead-letter queue with --dlq URL", err)
			}
			return nil, "", err
		}
	}
	dl, err := aws.NewDeadLetters(cfg, dlq)
	if err != nil {
		return nil, "", err
	}
	return &async.Redriver{Store: st, Queue: q, DeadLetters: dl}, "queue " + dlq, nil
}

// sigv4Signer returns a function that signs a request for service lambda
// with the credentials of loadAWSConfig: the SDK's default chain
// (environment, shared config and credentials files, SSO, container and
// instance roles), or in the Lambda package (-tags lambdaonly) the
// environment's and the container endpoint's only.
func sigv4Signer(ctx context.Context, region string) (func(context.Context, *http.Request, []byte) error, error) {
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
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		return nil, fmt.Errorf("AWS credentials: %w", err)
	}
	signer := v4.NewSigner()
	return func(ctx context.Context, req *http.Request, body []byte) error {
		creds, err := cfg.Credentials.Retrieve(ctx)
		if err != nil {
			return fmt.Errorf("AWS credentials: %w", err)
		}
		sum := sha256.Sum256(body)
		return signer.SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "lambda", cfg.Region, time.Now())
	}, nil
}

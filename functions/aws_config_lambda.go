//go:build !noaws && lambdaonly

package main

import (
	"context"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"

	"fngateway/infra/aws"
)

// loadAWSConfig builds the AWS SDK's configuration from what Lambda gives
// the function (aws.LambdaConfig): the region, the role's credentials in
// the environment or the container endpoint, the AWS_ENDPOINT_URL_*
// overrides. The SDK's config package, which links every provider of its
// default chain, is not linked (docs/performance.md, "Cold start").
func loadAWSConfig(_ context.Context, region string) (sdkaws.Config, error) {
	return aws.LambdaConfig(region)
}

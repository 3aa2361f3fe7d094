//go:build !noaws && !lambdaonly

package main

import (
	"context"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
)

// loadAWSConfig loads the AWS SDK's configuration with its default chain:
// the environment, the shared config and credentials files (AWS_PROFILE,
// SSO), web identity, container and instance roles. region, if not empty,
// overrides the configured one. The Lambda package (-tags lambdaonly)
// reads only what Lambda gives (aws_config_lambda.go).
func loadAWSConfig(ctx context.Context, region string) (sdkaws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	return config.LoadDefaultConfig(ctx, opts...)
}

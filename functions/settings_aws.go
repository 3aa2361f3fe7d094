//go:build !noaws

package main

import (
	"context"

	"fngateway/infra/aws"
	"fngateway/internal/settings"
)

// s3SettingsSource is the settings document at spec (s3://bucket/key), read
// with the SDK's default chain (the function role, AWS_REGION,
// AWS_ENDPOINT_URL_S3), re-read only when its ETag changed.
func s3SettingsSource(ctx context.Context, spec string) (settings.Source, error) {
	if _, err := aws.NewSettingsObject(aws.Config{}, spec); err != nil { // checks the location before any credential
		return nil, err
	}
	cfg, err := awsConfig(ctx)
	if err != nil {
		return nil, err
	}
	obj, err := aws.NewSettingsObject(cfg, spec)
	if err != nil {
		return nil, err
	}
	return &settings.Conditional{Name: spec, Get: obj.Get}, nil
}

//go:build noaws

// A build with -tags noaws (make package-azure) links no AWS SDK: these
// stand in for aws.go, and what needs AWS says so.

package main

import (
	"context"
	"errors"

	"fngateway/core"
	"fngateway/internal/settings"
)

// errNoAWS says why an AWS feature is missing from this binary.
var errNoAWS = errors.New("this binary was built without AWS support (-tags noaws, as make package-azure builds it); use a build without that tag")

func openAWS(_ context.Context, s *settings.Settings, _ *deadLetterQuery) (*asyncParts, error) {
	return nil, &core.SettingError{Name: "AsyncStore", Value: s.AsyncStore, Want: "want file:<dir> or azure: " + errNoAWS.Error()}
}

func sigv4Authorizer(context.Context, string, string) (core.Authorizer, error) {
	return nil, errNoAWS
}

func checkSQSQueueURL(string) error { return errNoAWS }

func sigv4Signer(context.Context, string) (core.Authorizer, error) {
	return nil, errNoAWS
}

func s3SettingsSource(_ context.Context, spec string) (settings.Source, error) {
	return nil, &core.SettingError{Name: "SettingsSource", Value: spec, Want: "want file:, a blob or App Configuration: " + errNoAWS.Error()}
}

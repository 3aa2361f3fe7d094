//go:build noazure

// A build with -tags noazure (make package-aws) links no Azure SDK: these
// stand in for azure.go, and what needs Azure says so.

package main

import (
	"context"
	"errors"

	"fngateway/core"
	"fngateway/internal/settings"
)

// errNoAzure says why an Azure feature is missing from this binary.
var errNoAzure = errors.New("this binary was built without Azure support (-tags noazure, as make package-aws builds it); use a build without that tag")

func openAzure(_ context.Context, s *settings.Settings, _ func(string) string, _ *deadLetterQuery) (*asyncParts, error) {
	return nil, &core.SettingError{Name: "AsyncStore", Value: s.AsyncStore, Want: "want file:<dir> or s3://<bucket>[/<prefix>]: " + errNoAzure.Error()}
}

func newEntraAuthorizers() (func(scope string) core.Authorizer, error) {
	return nil, errNoAzure
}

func entraSigner(context.Context, string) (core.Authorizer, error) {
	return nil, errNoAzure
}

func appConfigurationWithIdentity(spec string) (settings.Source, error) {
	return nil, &core.SettingError{Name: "SettingsSource", Value: spec, Want: "want file:, s3:// or an App Configuration connection string: " + errNoAzure.Error()}
}

func blobSettingsSource(spec string) (settings.Source, error) {
	return nil, &core.SettingError{Name: "SettingsSource", Value: settings.Redact(spec), Want: "want file:, s3:// or an App Configuration connection string: " + errNoAzure.Error()}
}

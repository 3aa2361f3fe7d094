//go:build noazure

// A build with -tags noazure (make package-aws) links no Azure SDK: these
// stand in for azure.go, and what needs Azure says so.

package main

import (
	"context"
	"errors"
	"net/http"

	"fngateway/core"
	"fngateway/core/async"
	"fngateway/internal/settings"
)

// errNoAzure says why an Azure feature is missing from this binary.
var errNoAzure = errors.New("this binary was built without Azure support (-tags noazure, as make package-aws builds it); use a build without that tag")

type azureParts struct {
	store    async.Store
	queue    async.Queue
	notifier async.Notifier
}

func openAzure(_ context.Context, s *settings.Settings) (*azureParts, error) {
	return nil, &core.SettingError{Name: "AsyncStore", Value: s.AsyncStore, Want: "want file:<dir> or s3://<bucket>[/<prefix>]: " + errNoAzure.Error()}
}

func openAzureDeadLetters(func(string) string, string) (*async.Redriver, string, error) {
	return nil, "", &core.SettingError{Name: "AsyncStore", Value: "azure", Want: "want file:<dir> or s3://<bucket>[/<prefix>]: " + errNoAzure.Error()}
}

func newEntraAuthorizers() (func(scope string) core.Authorizer, error) {
	return nil, errNoAzure
}

// azureAuthorizer sends the function key; an Entra ID token needs the SDK.
func azureAuthorizer(_ context.Context, scope, key string) (func(context.Context, *http.Request, []byte) error, error) {
	if scope != "" {
		return nil, errNoAzure
	}
	return func(_ context.Context, req *http.Request, _ []byte) error {
		req.Header.Set("x-functions-key", key)
		return nil
	}, nil
}

func appConfigurationWithIdentity(spec string) (settings.Source, error) {
	return nil, &core.SettingError{Name: "SettingsSource", Value: spec, Want: "want file:, s3:// or an App Configuration connection string: " + errNoAzure.Error()}
}

func blobSettingsSource(spec string) (settings.Source, error) {
	return nil, &core.SettingError{Name: "SettingsSource", Value: settings.Redact(spec), Want: "want file:, s3:// or an App Configuration connection string: " + errNoAzure.Error()}
}

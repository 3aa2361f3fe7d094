//go:build !noazure

package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"fngateway/infra/azure"
	"fngateway/internal/settings"
)

// appConfigurationWithIdentity is the App Configuration store at spec, read
// with the function's managed identity (App Configuration Data Reader).
func appConfigurationWithIdentity(spec string) (settings.Source, error) {
	cred, err := entraCredential()
	if err != nil {
		return nil, fmt.Errorf("settings source: App Configuration credential: %w", err)
	}
	endpoint := strings.TrimRight(spec, "/")
	auth := azure.NewTokenAuthorizer(cred, endpoint+"/.default")
	return appConfiguration(endpoint, func(ctx context.Context, r *http.Request) error { return auth.Authorize(ctx, r, nil, false) }), nil
}

// blobSettingsSource is the settings document in the blob at spec: a SAS in
// the URL, the account key of AzureWebJobsStorage for the same account, or
// the managed identity; re-read only when its ETag changed.
func blobSettingsSource(spec string) (settings.Source, error) {
	conn, _ := lookup("AzureWebJobsStorage")
	b, err := azure.NewSettingsBlob(spec, conn, entraCredential)
	if err != nil {
		return nil, err
	}
	var secrets []string
	if u, err := url.Parse(spec); err == nil && u.RawQuery != "" {
		secrets = append(secrets, u.RawQuery, u.Query().Get("sig"), url.QueryEscape(u.Query().Get("sig")))
	}
	return &settings.Conditional{Name: settings.Redact(spec), Get: b.Get, Secrets: secrets}, nil
}

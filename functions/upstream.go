package main

import (
	"context"
	"fmt"
	"os"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"

	"fngateway/core"
	"fngateway/infra/aws"
	"fngateway/infra/azure"
)

// upstreamPolicy gives fwd the upstream policy of docs/settings.md#upstream-policy-per-route: the retry
// budget, outlier ejection, and an Authorizer for each route auth. Cloud
// credentials are set up only when a route asks for them: Entra ID tokens
// from the managed identity (App Service's IDENTITY_ENDPOINT and
// IDENTITY_HEADER) on Azure or the default credential chain elsewhere;
// AWS credentials from the SDK's default chain (the Lambda role). Nothing is
// fetched here: the first request that needs a credential fetches it.
func upstreamPolicy(ctx context.Context, s *core.Settings, fwd *core.Forwarder) error {
	fwd.RetryBudget = core.NewRetryBudget(int64(s.RetryBudgetPercent), int64(s.RetryBudgetMinConcurrency))
	fwd.Ejector = &core.Ejector{}
	auths, err := routeAuthorizers(ctx, s, nil)
	if err != nil {
		return err
	}
	fwd.Authorizers = auths
	return nil
}

// routeAuthorizers returns an Authorizer for each route auth of s, taking
// those have already holds (a reload keeps their cached credentials); nil
// when no route asks for one.
func routeAuthorizers(ctx context.Context, s *core.Settings, have map[core.BackendAuth]core.Authorizer) (map[core.BackendAuth]core.Authorizer, error) {
	var out map[core.BackendAuth]core.Authorizer
	var entra azcore.TokenCredential
	for _, r := range s.Routes {
		a := r.Auth
		if a == nil {
			continue
		}
		if _, done := out[*a]; done {
			continue
		}
		if out == nil {
			out = map[core.BackendAuth]core.Authorizer{}
		}
		if az, ok := have[*a]; ok {
			out[*a] = az
			continue
		}
		switch a.Type {
		case core.AuthEntra:
			if entra == nil {
				cred, err := entraCredential()
				if err != nil {
					return nil, fmt.Errorf("route %q auth entra: credential: %w", r.Prefix, err)
				}
				entra = cred
			}
			out[*a] = azure.NewTokenAuthorizer(entra, a.Scope)
		case core.AuthSigV4:
			cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(a.Region))
			if err != nil {
				return nil, fmt.Errorf("route %q auth sigv4: AWS configuration: %w", r.Prefix, err)
			}
			out[*a] = aws.NewSigner(cfg.Credentials, a.Service, a.Region)
		}
	}
	return out, nil
}

// entraCredential is the function's Entra ID identity: the managed
// identity where the host serves one (App Service and Functions set
// IDENTITY_ENDPOINT and IDENTITY_HEADER), with the user-assigned client id
// AZURE_CLIENT_ID when set; the default credential chain elsewhere.
func entraCredential() (azcore.TokenCredential, error) {
	if os.Getenv("IDENTITY_ENDPOINT") != "" && os.Getenv("IDENTITY_HEADER") != "" {
		opts := &azidentity.ManagedIdentityCredentialOptions{}
		if id := os.Getenv("AZURE_CLIENT_ID"); id != "" {
			opts.ID = azidentity.ClientID(id)
		}
		return azidentity.NewManagedIdentityCredential(opts)
	}
	return azidentity.NewDefaultAzureCredential(nil)
}

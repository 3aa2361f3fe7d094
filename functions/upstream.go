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

// upstreamPolicy gives fwd the upstream policy of CONTRACT §4: the retry
// budget, outlier ejection, host selection, and an Authorizer for each route auth. Cloud
// credentials are set up only when a route asks for them: Entra ID tokens
// from the managed identity (App Service's IDENTITY_ENDPOINT and
// IDENTITY_HEADER) on Azure or the default credential chain elsewhere;
// AWS credentials from the SDK's default chain (the Lambda role). Nothing is
// fetched here: the first request that needs a credential fetches it.
func upstreamPolicy(ctx context.Context, s *core.Settings, fwd *core.Forwarder) error {
	fwd.RetryBudget = core.NewRetryBudget(int64(s.RetryBudgetPercent), int64(s.RetryBudgetMinConcurrency))
	fwd.Ejector = &core.Ejector{}
	fwd.Balancer = &core.Balancer{}
	var entra azcore.TokenCredential
	for _, r := range s.Routes {
		a := r.Auth
		if a == nil {
			continue
		}
		if _, done := fwd.Authorizers[*a]; done {
			continue
		}
		if fwd.Authorizers == nil {
			fwd.Authorizers = map[core.BackendAuth]core.Authorizer{}
		}
		switch a.Type {
		case core.AuthEntra:
			if entra == nil {
				cred, err := entraCredential()
				if err != nil {
					return fmt.Errorf("route %q auth entra: credential: %w", r.Prefix, err)
				}
				entra = cred
			}
			fwd.Authorizers[*a] = azure.NewTokenAuthorizer(entra, a.Scope)
		case core.AuthSigV4:
			cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(a.Region))
			if err != nil {
				return fmt.Errorf("route %q auth sigv4: AWS configuration: %w", r.Prefix, err)
			}
			fwd.Authorizers[*a] = aws.NewSigner(cfg.Credentials, a.Service, a.Region)
		}
	}
	return nil
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

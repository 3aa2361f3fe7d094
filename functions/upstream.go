package main

import (
	"context"
	"fmt"

	"fngateway/core"
)

// upstreamPolicy gives fwd the upstream policy of CONTRACT §4: the retry
// budget, outlier ejection, and an Authorizer for each route auth. Cloud
// credentials are set up only when a route asks for them: Entra ID tokens
// from the managed identity (App Service's IDENTITY_ENDPOINT and
// IDENTITY_HEADER) on Azure or the default credential chain elsewhere;
// AWS credentials from the SDK's default chain (the Lambda role). Nothing is
// fetched here: the first request that needs a credential fetches it.
func upstreamPolicy(ctx context.Context, s *core.Settings, fwd *core.Forwarder) error {
	fwd.RetryBudget = core.NewRetryBudget(int64(s.RetryBudgetPercent), int64(s.RetryBudgetMinConcurrency))
	fwd.Ejector = &core.Ejector{}
	var entra func(scope string) core.Authorizer // one credential for every entra route
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
				cred, err := newEntraAuthorizers()
				if err != nil {
					return fmt.Errorf("route %q auth entra: credential: %w", r.Prefix, err)
				}
				entra = cred
			}
			fwd.Authorizers[*a] = entra(a.Scope)
		case core.AuthSigV4:
			signer, err := sigv4Authorizer(ctx, a.Service, a.Region)
			if err != nil {
				return fmt.Errorf("route %q auth sigv4: %w", r.Prefix, err)
			}
			fwd.Authorizers[*a] = signer
		}
	}
	return nil
}

package main

import (
	"context"
	"fmt"

	"fngateway/core"
	"fngateway/internal/settings"
)

// upstreamPolicy gives fwd the upstream policy of docs/settings.md#upstream-policy-per-route: the retry
// budget, outlier ejection, host selection, and an Authorizer for each route auth. Cloud
// credentials are set up only when a route asks for them: Entra ID tokens
// from the managed identity (App Service's IDENTITY_ENDPOINT and
// IDENTITY_HEADER) on Azure or the default credential chain elsewhere;
// AWS credentials from the SDK's default chain (the Lambda role). Nothing is
// fetched here: the first request that needs a credential fetches it.
func upstreamPolicy(ctx context.Context, s *settings.Settings, fwd *core.Forwarder) error {
	fwd.RetryBudget = core.NewRetryBudget(int64(s.RetryBudgetPercent), int64(s.RetryBudgetMinConcurrency))
	fwd.Ejector = &core.Ejector{}
	fwd.Balancer = &core.Balancer{}
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
func routeAuthorizers(ctx context.Context, s *settings.Settings, have map[core.BackendAuth]core.Authorizer) (map[core.BackendAuth]core.Authorizer, error) {
	var out map[core.BackendAuth]core.Authorizer
	var entra func(scope string) core.Authorizer // one credential for every entra route
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
				cred, err := newEntraAuthorizers()
				if err != nil {
					return nil, fmt.Errorf("route %q auth entra: credential: %w", r.Prefix, err)
				}
				entra = cred
			}
			out[*a] = entra(a.Scope)
		case core.AuthSigV4:
			signer, err := sigv4Authorizer(ctx, a.Service, a.Region)
			if err != nil {
				return nil, fmt.Errorf("route %q auth sigv4: %w", r.Prefix, err)
			}
			out[*a] = signer
		}
	}
	return out, nil
}

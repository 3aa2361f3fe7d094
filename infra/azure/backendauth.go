package azure

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"fngateway/core"
)

// TokenRefreshMargin is how long before its expiry a cached token is
// replaced: a request never carries a token about to lapse.
const TokenRefreshMargin = 5 * time.Minute

// TokenAuthorizer puts an Entra ID bearer token for one scope into the
// Authorization header of a backend request (a route's auth of type
// entra). Tokens come from a credential — on Azure the function's managed
// identity, which App Service serves at IDENTITY_ENDPOINT — and are cached:
// one is fetched when none is held or the one held is within
// TokenRefreshMargin of its expiry (or past the refresh time the identity
// endpoint gave), never per request, and concurrent requests share one
// fetch. A fetch runs under the request's context, so its time counts
// against the request's budget. Safe for concurrent use.
type TokenAuthorizer struct {
	cred  azcore.TokenCredential
	scope string

	mu       sync.Mutex
	tok      azcore.AccessToken
	fetched  time.Time
	fetching chan struct{} // closed when the fetch under way ends
}

var _ core.Authorizer = (*TokenAuthorizer)(nil)

// NewTokenAuthorizer returns an authorizer of tokens from cred for scope,
// such as "https://cognitiveservices.azure.com/.default".
func NewTokenAuthorizer(cred azcore.TokenCredential, scope string) *TokenAuthorizer {
	return &TokenAuthorizer{cred: cred, scope: scope}
}

// Authorize sets r's Authorization to "Bearer <token>".
func (a *TokenAuthorizer) Authorize(ctx context.Context, r *http.Request, _ []byte, _ bool) error {
	tok, err := a.token(ctx)
	if err != nil {
		return err
	}
	r.Header.Set("Authorization", "Bearer "+tok)
	return nil
}

// fresh reports whether t, fetched at fetched, may still be used at now:
// a token is replaced TokenRefreshMargin before its expiry, or half its
// lifetime before when it lives less than twice that.
func fresh(t azcore.AccessToken, fetched, now time.Time) bool {
	if t.Token == "" {
		return false
	}
	due := t.ExpiresOn.Add(-min(TokenRefreshMargin, t.ExpiresOn.Sub(fetched)/2))
	if !t.RefreshOn.IsZero() && t.RefreshOn.Before(due) {
		due = t.RefreshOn
	}
	return now.Before(due)
}

// token returns a cached token, or fetches one, sharing a fetch under way.
func (a *TokenAuthorizer) token(ctx context.Context) (string, error) {
	for {
		a.mu.Lock()
		if fresh(a.tok, a.fetched, time.Now()) {
			t := a.tok.Token
			a.mu.Unlock()
			return t, nil
		}
		if a.fetching == nil {
			done := make(chan struct{})
			a.fetching = done
			a.mu.Unlock()
			start := time.Now()
			tok, err := a.cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{a.scope}})
			a.mu.Lock()
			a.fetching = nil
			if err == nil {
				a.tok, a.fetched = tok, start
			}
			close(done)
			a.mu.Unlock()
			if err != nil {
				return "", fmt.Errorf("entra token for scope %s: %w", a.scope, err)
			}
			if !time.Now().Before(tok.ExpiresOn) {
				return "", fmt.Errorf("entra token for scope %s: expired on arrival (%s)", a.scope, tok.ExpiresOn.UTC().Format(time.RFC3339))
			}
			return tok.Token, nil
		}
		wait := a.fetching
		a.mu.Unlock()
		select {
		case <-wait:
			// Look again: the fetch filled the cache, or failed and this
			// request tries its own.
		case <-ctx.Done():
			return "", fmt.Errorf("entra token for scope %s: %w", a.scope, context.Cause(ctx))
		}
	}
}

package core

import (
	"context"
	"errors"
	"fmt"
	"net/http"
)

// Authorizer puts the function's own credential on an attempt's request
// to a route with BackendAuth (docs/settings.md#backends-called-with-the-functions-identity): an Entra ID bearer token, a
// SigV4 signature. Implementations live in infra/ (the cloud SDKs stay out
// of core) and are wired by functions/. They are safe for concurrent use.
type Authorizer interface {
	// Authorize sets r's credential headers. body is the buffered body
	// r carries (nil when empty); streamed reports that r's body is a
	// stream instead, which cannot be hashed. A credential that has to be
	// fetched is fetched under ctx, so the fetch counts against the
	// request's budget; implementations cache credentials rather than
	// fetch one per request. An error means nothing may be sent.
	// Implementations never put a credential into an error.
	Authorize(ctx context.Context, r *http.Request, body []byte, streamed bool) error
}

// errBackendAuth is the cause of a request ended with
// ReasonBackendAuthFailed: its route's credential could not be had.
var errBackendAuth = errors.New("backend credential unavailable")

// authorize applies the route's Authorizer to out, the attempt's request.
func (f *Forwarder) authorize(ctx context.Context, req *Request, out *http.Request) error {
	a := req.Route.Auth
	if a == nil {
		return nil
	}
	z := f.Authorizers[*a]
	if z == nil {
		return fmt.Errorf("%w: no authorizer for auth type %q", errBackendAuth, a.Type)
	}
	if err := z.Authorize(ctx, out, req.Body, req.BodyStream != nil); err != nil {
		if c := context.Cause(ctx); c != nil && ctx.Err() != nil {
			return fmt.Errorf("%w: %s auth: %v (%v)", errBackendAuth, a.Type, err, c)
		}
		return fmt.Errorf("%w: %s auth: %v", errBackendAuth, a.Type, err)
	}
	return nil
}

// authFailed is the error of a request whose credential could not be had.
func (f *Forwarder) authFailed(err error, attempts []Attempt) *Error {
	f.Stats.countEnd(ReasonBackendAuthFailed)
	return &Error{Reason: ReasonBackendAuthFailed, Message: err.Error(), Attempts: attempts, Err: err}
}

// authHeaders removes from h, an attempt's headers, the client's
// credential and the headers a signature sets, keeping the client's
// Authorization under a.ClientAuthorizationHeader when that is set.
func authHeaders(h http.Header, a *BackendAuth) {
	if v, ok := h["Authorization"]; ok && a.ClientAuthorizationHeader != "" {
		h[http.CanonicalHeaderKey(a.ClientAuthorizationHeader)] = v
	}
	delete(h, "Authorization")
	if a.Type == AuthSigV4 {
		for _, k := range sigV4Replaced {
			delete(h, k) // Admit refuses every other spelling
		}
	}
}

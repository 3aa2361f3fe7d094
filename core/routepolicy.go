package core

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// parsePolicy reads a route's upstream policy fields (docs/settings.md#upstream-policy-per-route):
// hedgeOnPerTryTimeout, ejectAfterFailures, ejectForMs, auth, and the
// capability that goes with auth: methods, allowHeaders, allowQuery.
func (r *Route) parsePolicy(rj *routeJSON) error {
	r.HedgeOnPerTryTimeout = rj.HedgeOnPerTryTimeout
	if p := rj.EjectAfterFailures; p != nil {
		switch {
		case *p < 0 || *p > 1000:
			return errors.New("ejectAfterFailures: want a whole number from 0 (never eject) to 1000")
		case *p == 0:
			r.EjectAfterFailures = -1
		default:
			r.EjectAfterFailures = int(*p)
		}
	}
	if p := rj.EjectForMs; p != nil {
		if *p <= 0 || *p > MaxSeconds*100 { // ten times it must still fit
			return errors.New("ejectForMs: want a positive whole number of milliseconds")
		}
		r.EjectFor = time.Duration(*p) * time.Millisecond
	}
	if rj.Auth != nil {
		if err := rj.Auth.validate(); err != nil {
			return fmt.Errorf("auth: %v", err)
		}
		a := *rj.Auth
		r.Auth = &a
	}
	return r.parseCapability(rj)
}

// The auth types of a route (docs/settings.md#backends-called-with-the-functions-identity).
const (
	// AuthEntra is a bearer token from the function's Entra ID identity.
	AuthEntra = "entra"
	// AuthSigV4 is an AWS Signature Version 4 with the function's AWS
	// credentials.
	AuthSigV4 = "sigv4"
)

// BackendAuth is a route's backend credential: the "auth" object of its
// Routes entry. It is a comparable value, the key of
// Forwarder.Authorizers.
type BackendAuth struct {
	// Type is AuthEntra or AuthSigV4.
	Type string `json:"type"`
	// Scope is the Entra ID scope of the token, "<resource>/.default".
	Scope string `json:"scope,omitempty"`
	// Service and Region are what a SigV4 signature is made for, such as
	// "s3" and "eu-west-1".
	Service string `json:"service,omitempty"`
	Region  string `json:"region,omitempty"`
	// ClientAuthorizationHeader, if set, is the header under which the
	// client's own Authorization reaches the backend; otherwise it is not
	// forwarded.
	ClientAuthorizationHeader string `json:"clientAuthorizationHeader,omitempty"`
}

func (a *BackendAuth) validate() error {
	switch a.Type {
	case AuthEntra:
		if !strings.HasSuffix(a.Scope, "/.default") || len(a.Scope) <= len("/.default") || strings.ContainsAny(a.Scope, " \t\r\n") {
			return fmt.Errorf("scope %q: want <resource>/.default, such as https://cognitiveservices.azure.com/.default", a.Scope)
		}
		if a.Service != "" || a.Region != "" {
			return errors.New("service and region belong to type sigv4, not entra")
		}
	case AuthSigV4:
		if !awsName(a.Service) {
			return fmt.Errorf("service %q: want an AWS signing name, such as s3, lambda or execute-api", a.Service)
		}
		if !awsName(a.Region) {
			return fmt.Errorf("region %q: want an AWS region, such as eu-west-1", a.Region)
		}
		if a.Scope != "" {
			return errors.New("scope belongs to type entra, not sigv4")
		}
	default:
		return fmt.Errorf("type %q: want entra or sigv4", a.Type)
	}
	if h := a.ClientAuthorizationHeader; h != "" {
		ck := http.CanonicalHeaderKey(h)
		if !IsToken(h) || ck == "Authorization" || isHopHeader(ck) || strings.HasPrefix(ck, "S7p") || strings.HasPrefix(ck, "X-Amz-") {
			return fmt.Errorf("clientAuthorizationHeader %q: want a header name other than Authorization, hop-by-hop, S7P* and X-Amz-* headers, such as X-Client-Authorization", h)
		}
	}
	return nil
}

func awsName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

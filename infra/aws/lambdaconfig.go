package aws

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/endpointcreds"
	"github.com/aws/smithy-go/logging"
)

// LambdaConfig builds the SDK's configuration from what Lambda gives a
// function, without the SDK's config package: config.LoadDefaultConfig
// links every provider of the default chain (STS, SSO, SSO OIDC, signin),
// whose packages' initialisation each cold start pays (about 2 ms;
// docs/performance.md, "Cold start"), where a Lambda function never uses
// them. The Lambda package (-tags lambdaonly) loads its configuration here:
//
//   - the region: region if given, else AWS_REGION (Lambda sets it), else
//     AWS_DEFAULT_REGION;
//   - the credentials: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
//     AWS_SESSION_TOKEN (the function role's, which Lambda sets), else the
//     container credentials endpoint AWS_CONTAINER_CREDENTIALS_FULL_URI
//     with AWS_CONTAINER_AUTHORIZATION_TOKEN(_FILE) (SnapStart), both with
//     the SDK's own providers (credentials, credentials/endpointcreds);
//   - the endpoints: AWS_ENDPOINT_URL_<SERVICE> and AWS_ENDPOINT_URL, unless
//     AWS_IGNORE_CONFIGURED_ENDPOINT_URLS is true, as the SDK reads them.
//
// Profiles, shared config and credentials files, SSO, web identity and
// instance roles are the default chain's alone. Half-given credentials or
// a container endpoint it would not trust are errors; no credentials at
// all fail the first request that needs them, naming the variables.
func LambdaConfig(region string) (sdkaws.Config, error) {
	cfg := sdkaws.Config{
		Region: cmp.Or(region, os.Getenv("AWS_REGION"), os.Getenv("AWS_DEFAULT_REGION")),
		Logger: logging.NewStandardLogger(os.Stderr),
	}
	if !strings.EqualFold(os.Getenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"), "true") {
		if u := os.Getenv("AWS_ENDPOINT_URL"); u != "" {
			cfg.BaseEndpoint = sdkaws.String(u)
		}
		cfg.ConfigSources = []any{envEndpoints{}}
	}
	creds, err := lambdaCredentials()
	if err != nil {
		return sdkaws.Config{}, err
	}
	cfg.Credentials = creds
	return cfg, nil
}

// errNoLambdaCredentials is what a request signed without credentials
// fails with.
var errNoLambdaCredentials = errors.New("no AWS credentials: want AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (Lambda sets them from the function's role) or AWS_CONTAINER_CREDENTIALS_FULL_URI; this binary (-tags lambdaonly, the Lambda package) reads no profile or shared config file")

// lambdaCredentials returns the environment's credentials, or the
// container endpoint's.
func lambdaCredentials() (sdkaws.CredentialsProvider, error) {
	id := cmp.Or(os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_ACCESS_KEY"))
	secret := cmp.Or(os.Getenv("AWS_SECRET_ACCESS_KEY"), os.Getenv("AWS_SECRET_KEY"))
	if id != "" && secret != "" {
		p := credentials.NewStaticCredentialsProvider(id, secret, os.Getenv("AWS_SESSION_TOKEN"))
		p.Value.Source = "EnvConfigCredentials"
		p.Value.AccountID = os.Getenv("AWS_ACCOUNT_ID")
		return sdkaws.NewCredentialsCache(p), nil
	}
	endpoint := os.Getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI")
	if endpoint == "" {
		if rel := os.Getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"); rel != "" {
			endpoint = "http://169.254.170.2" + rel
		}
	}
	if endpoint == "" {
		if id != "" || secret != "" {
			return nil, errors.New("AWS credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together")
		}
		// As with the default chain, whose last provider (the
		// instance's role) fails only when asked: the first request
		// that needs credentials says so.
		return sdkaws.CredentialsProviderFunc(func(context.Context) (sdkaws.Credentials, error) {
			return sdkaws.Credentials{}, errNoLambdaCredentials
		}), nil
	}
	if err := checkContainerEndpoint(endpoint); err != nil {
		return nil, err
	}
	token, tokenFile := os.Getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN"), os.Getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")
	p := endpointcreds.New(endpoint, func(o *endpointcreds.Options) {
		o.AuthorizationToken = token
		if tokenFile != "" {
			// Read on each refresh, as the SDK's chain does: the file
			// is rotated.
			o.AuthorizationTokenProvider = endpointcreds.TokenProviderFunc(func() (string, error) {
				b, err := os.ReadFile(tokenFile)
				if err != nil {
					return "", fmt.Errorf("read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: %w", err)
				}
				return string(b), nil
			})
		}
	})
	return sdkaws.NewCredentialsCache(p, func(o *sdkaws.CredentialsCacheOptions) {
		o.ExpiryWindow = 5 * time.Minute
	}), nil
}

// checkContainerEndpoint allows, as the SDK's chain does, an https URL or
// a plain http one to a loopback address or the container endpoints of
// ECS and EKS, where the credentials cannot be read on the way.
func checkContainerEndpoint(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Hostname() == "" || u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("AWS_CONTAINER_CREDENTIALS_FULL_URI %q: want an http or https URL", s)
	}
	if u.Scheme == "https" {
		return nil
	}
	h := u.Hostname()
	if h == "localhost" {
		return nil
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		switch {
		case ip.IsLoopback(), ip == netip.AddrFrom4([4]byte{169, 254, 170, 2}),
			ip == netip.AddrFrom4([4]byte{169, 254, 170, 23}), ip == netip.MustParseAddr("fd00:ec2::23"):
			return nil
		}
	}
	return fmt.Errorf("AWS_CONTAINER_CREDENTIALS_FULL_URI %q: plain http only to a loopback address or the ECS/EKS container endpoint", s)
}

// envEndpoints gives the service clients AWS_ENDPOINT_URL_<SERVICE>: the
// SDK asks its configuration sources for a service's base endpoint by this
// method, which the config package's EnvConfig implements the same way.
type envEndpoints struct{}

func (envEndpoints) GetServiceBaseEndpoint(_ context.Context, sdkID string) (string, bool, error) {
	v := os.Getenv("AWS_ENDPOINT_URL_" + strings.ReplaceAll(strings.ToUpper(sdkID), " ", "_"))
	return v, v != "", nil
}

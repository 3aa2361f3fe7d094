package aws

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"fngateway/core"
)

// UnsignedPayload is the payload hash of a request whose body is not part
// of its signature.
const UnsignedPayload = "UNSIGNED-PAYLOAD"

// unsignedPayloadServices are the signing names whose services accept
// UNSIGNED-PAYLOAD: S3 (over TLS, as AWS serves it; an S3-compatible server
// such as versitygw accepts it over plain HTTP too). Other services need the
// body's hash, so a streamed body cannot be signed for them.
var unsignedPayloadServices = map[string]bool{"s3": true}

// Signer signs backend requests with AWS Signature Version 4 (a route's
// auth of type sigv4), with credentials from a provider — the SDK's default
// chain, which on Lambda is the function's role. The provider is wrapped in
// the SDK's credentials cache, so credentials are fetched when they are due,
// never per request. A buffered body's SHA-256 is signed; a streamed body
// is signed as UNSIGNED-PAYLOAD where the service accepts that (S3) and
// refused elsewhere. Safe for concurrent use.
type Signer struct {
	creds   sdkaws.CredentialsProvider
	service string
	region  string
	signer  *v4.Signer
}

var _ core.Authorizer = (*Signer)(nil)

// NewSigner returns a signer for service (its signing name, such as "s3")
// in region.
func NewSigner(creds sdkaws.CredentialsProvider, service, region string) *Signer {
	if _, ok := creds.(*sdkaws.CredentialsCache); !ok && creds != nil {
		creds = sdkaws.NewCredentialsCache(creds)
	}
	return &Signer{creds: creds, service: service, region: region, signer: v4.NewSigner()}
}

// Authorize signs r: X-Amz-Date, X-Amz-Content-Sha256, X-Amz-Security-Token
// with temporary credentials, and Authorization.
func (s *Signer) Authorize(ctx context.Context, r *http.Request, body []byte, streamed bool) error {
	if s.creds == nil {
		return errors.New("sigv4: no credentials")
	}
	hash := UnsignedPayload
	if streamed {
		if !unsignedPayloadServices[s.service] {
			return fmt.Errorf("sigv4 %s: a streamed body cannot be signed for this service (only s3 accepts UNSIGNED-PAYLOAD); raise MaxRetryBodyBytes so the body is buffered", s.service)
		}
	} else {
		sum := sha256.Sum256(body)
		hash = hex.EncodeToString(sum[:])
	}
	c, err := s.creds.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("sigv4 %s: credentials: %w", s.service, err)
	}
	r.Header.Set("X-Amz-Content-Sha256", hash)
	err = s.signer.SignHTTP(ctx, c, r, hash, s.service, s.region, time.Now(), func(o *v4.SignerOptions) {
		o.DisableURIPathEscaping = s.service == "s3" // S3 signs the path as sent
	})
	if err != nil {
		return fmt.Errorf("sigv4 %s: sign: %w", s.service, err)
	}
	return nil
}

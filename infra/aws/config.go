package aws

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Config says how to reach AWS. The zero value of every field but AWS is
// useful.
type Config struct {
	// AWS is the SDK's configuration: credentials, region, HTTP client and
	// the endpoints it resolved. The edge loads it with the SDK's default
	// chain (config.LoadDefaultConfig), which reads AWS_REGION, the
	// credentials of the environment or the function's role, and
	// AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL_SQS / AWS_ENDPOINT_URL_SNS.
	AWS sdkaws.Config

	// S3Endpoint, SQSEndpoint and SNSEndpoint override the services'
	// endpoints, for example "http://127.0.0.1:7070" for an S3-compatible
	// server. Empty leaves the endpoint to AWS (the SDK's own resolution).
	S3Endpoint, SQSEndpoint, SNSEndpoint string

	// MaxAttempts is the most attempts the SDK makes of one request
	// (retries included). If 0, 3 attempts with at most 500 ms between
	// them, and no client-side retry quota: a service that refuses
	// connections then fails in about a second, and the caller's context
	// deadline bounds a hung connection.
	MaxAttempts int
}

// maxRetryBackoff caps the wait between two attempts of one request.
const maxRetryBackoff = 500 * time.Millisecond

func (c Config) retryer() sdkaws.Retryer {
	attempts := c.MaxAttempts
	if attempts <= 0 {
		attempts = 3
	}
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = attempts
		o.MaxBackoff = maxRetryBackoff
		o.RateLimiter = ratelimit.None
	})
}

// s3Client makes the S3 client. A custom endpoint, from S3Endpoint or
// resolved by the SDK (AWS_ENDPOINT_URL_S3), is addressed path-style.
func (c Config) s3Client() *s3.Client {
	return s3.NewFromConfig(c.AWS, func(o *s3.Options) {
		if c.S3Endpoint != "" {
			o.BaseEndpoint = sdkaws.String(c.S3Endpoint)
		}
		// BaseEndpoint is set here only by an override: S3Endpoint,
		// AWS_ENDPOINT_URL_S3 or the shared config's endpoint_url.
		o.UsePathStyle = o.BaseEndpoint != nil
		o.Retryer = c.retryer()
		// Reading a multipart object, whose checksum is of its parts,
		// is normal here: no warning line for each.
		o.DisableLogOutputChecksumValidationSkipped = true
	})
}

// sqsClient makes the SQS client.
func (c Config) sqsClient() *sqs.Client {
	return sqs.NewFromConfig(c.AWS, func(o *sqs.Options) {
		if c.SQSEndpoint != "" {
			o.BaseEndpoint = sdkaws.String(c.SQSEndpoint)
		}
		o.Retryer = c.retryer()
	})
}

// snsClient makes the SNS client.
func (c Config) snsClient() *sns.Client {
	return sns.NewFromConfig(c.AWS, func(o *sns.Options) {
		if c.SNSEndpoint != "" {
			o.BaseEndpoint = sdkaws.String(c.SNSEndpoint)
		}
		o.Retryer = c.retryer()
	})
}

// ParseLocation parses an AsyncStore value "s3://<bucket>[/<prefix>]". The
// bucket must be a valid S3 bucket name (3–63 lower-case letters, digits,
// dots and hyphens, starting and ending with a letter or digit); the
// prefix, if any, is returned with a trailing "/" and must not contain
// empty, "." or ".." segments.
func ParseLocation(s string) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(s, "s3://")
	if !ok {
		return "", "", errors.New("want s3://<bucket>[/<prefix>]")
	}
	bucket, prefix, _ = strings.Cut(rest, "/")
	if err := checkBucket(bucket); err != nil {
		return "", "", fmt.Errorf("want s3://<bucket>[/<prefix>]: %w", err)
	}
	prefix = strings.TrimSuffix(prefix, "/")
	if prefix == "" {
		return bucket, "", nil
	}
	if err := checkSegments(prefix); err != nil {
		return "", "", fmt.Errorf("want s3://<bucket>[/<prefix>]: prefix %w", err)
	}
	return bucket, prefix + "/", nil
}

// checkBucket applies S3's rules for general purpose bucket names.
func checkBucket(name string) error {
	bad := func(why string) error {
		return fmt.Errorf("invalid bucket name %q: %s", name, why)
	}
	if len(name) < 3 || len(name) > 63 {
		return bad("want 3 to 63 characters")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' || c == '.':
			if i == 0 || i == len(name)-1 {
				return bad("must start and end with a letter or digit")
			}
			if name[i-1] == '.' || c == '.' && name[i-1] == '-' || c == '-' && name[i-1] == '.' {
				return bad("a dot next to a dot or a hyphen")
			}
		default:
			return bad("want lower-case letters, digits, dots and hyphens")
		}
	}
	return nil
}

// checkSegments refuses a path with empty, "." or ".." segments, which
// HTTP clients and servers may collapse, and text that is not UTF-8.
func checkSegments(p string) error {
	if !utf8.ValidString(p) {
		return fmt.Errorf("%q: not UTF-8", p)
	}
	for seg := range strings.SplitSeq(p, "/") {
		switch seg {
		case "", ".", "..":
			return fmt.Errorf("%q: empty, \".\" or \"..\" segment", p)
		}
	}
	return nil
}

// SQS queue names: 1–80 letters, digits, hyphens and underscores.
const maxQueueName = 80

// checkQueueName applies SQS's rule for standard queue names.
func checkQueueName(name string) error {
	if strings.HasSuffix(name, ".fifo") {
		return fmt.Errorf("queue %q is a FIFO queue; want a standard queue (FIFO queues take no per-message delay)", name)
	}
	if name == "" || len(name) > maxQueueName {
		return fmt.Errorf("invalid queue name %q: want 1 to %d characters", name, maxQueueName)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("invalid queue name %q: want letters, digits, hyphens and underscores", name)
		}
	}
	return nil
}

// ParseQueueURL checks an AsyncQueue value, an SQS queue URL
// "https://sqs.<region>.amazonaws.com/<account>/<name>" (or an
// SQS-compatible server's, with http), and returns the queue's name.
// FIFO queues are refused: continuations need per-message delays.
func ParseQueueURL(s string) (name string, err error) {
	const want = "want an SQS queue URL https://sqs.<region>.amazonaws.com/<account id>/<queue name>"
	u, err := url.Parse(s)
	if err != nil {
		return "", errors.New(want)
	}
	if u.Scheme != "https" && u.Scheme != "http" || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" || u.RawPath != "" {
		return "", errors.New(want)
	}
	account, name, ok := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	if !ok || account == "" || strings.Contains(name, "/") {
		return "", errors.New(want)
	}
	if err := checkQueueName(name); err != nil {
		return "", fmt.Errorf("%s: %w", want, err)
	}
	return name, nil
}

// Package aws implements core/async's ports on AWS: a Store on S3, a Queue
// on SQS and a Notifier on SNS FIFO topics.
//
// Everything is made from a Config holding the SDK's configuration
// (credentials, region, HTTP client), which the edge loads with the SDK's
// default chain, and optional endpoint overrides so that tests and
// S3/SQS/SNS-compatible servers can be targeted. The SDK itself honours
// AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL_SQS and AWS_ENDPOINT_URL_SNS from
// that chain; whenever the S3 endpoint is overridden, either way, buckets
// are addressed path-style ("http://host:port/bucket/key"), which
// S3-compatible servers expect. The package never reads the environment
// itself.
//
// Records are written with S3's conditional writes (If-None-Match: * to
// create, If-Match: <ETag> to update), the same optimistic protocol as Azure
// ETags. The bucket, queues and topics are created on first use when
// missing (the Notifier not with NoCreate). The
// Queue is a async.VisibilityExtender (ChangeMessageVisibility) and the
// Notifier a async.TopicChecker (topics are SNS FIFO topic names). AWS
// errors are mapped to async.ErrNotFound and async.ErrConflict where the ports
// say so; other errors are returned wrapped, with a short prefix naming the
// operation.
//
// Requests are retried by the SDK's standard retryer, set short (see
// Config.MaxAttempts), so an operation against an unreachable service fails
// in about a second rather than many; the caller's context deadline bounds
// every operation, a hung connection included.
package aws

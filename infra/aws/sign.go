package aws

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// maxURLLifetime is the longest a presigned URL lasts: Signature Version 4
// allows 7 days.
const maxURLLifetime = 7 * 24 * time.Hour

// SignURL returns an absolute, read-only URL for the one object at key: a
// presigned GET, valid until expiry (rounded down to whole seconds) or for
// maxURLLifetime, whichever comes first. A URL signed with temporary
// credentials (a Lambda function's role) dies with them, usually within
// hours, whatever its expiry says, and any URL dies when its access key is
// deleted: so core asks it only for URLs followed at once (a status URI's
// 303, a gateway result URL's 307), and the 202 hands out gateway result
// URLs instead (the Store is no async.LastingSigner). SignURL does no
// I/O but refreshing the credentials when they are due.
func (s *Store) SignURL(ctx context.Context, key string, expiry time.Time) (string, error) {
	k, err := s.objectKey(key)
	if err != nil {
		return "", fmt.Errorf("sign url: %w", err)
	}
	lifetime := min(time.Until(expiry), maxURLLifetime).Truncate(time.Second)
	if lifetime < time.Second {
		return "", fmt.Errorf("sign url %s: expiry %s is not in the future", key, expiry.UTC().Format(time.RFC3339))
	}
	req, err := s.presign.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &k},
		s3.WithPresignExpires(lifetime))
	if err != nil {
		return "", fmt.Errorf("sign url %s: %w", key, err)
	}
	return req.URL, nil
}

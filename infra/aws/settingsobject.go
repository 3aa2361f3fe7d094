package aws

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// SettingsObject is a settings document in S3 (SettingsSource=s3://bucket/key),
// read with a conditional GET: unchanged, S3 answers 304 Not Modified and
// no body is sent.
type SettingsObject struct {
	client      *s3.Client
	bucket, key string
}

// maxSettingsObject bounds the document read: 1 MiB.
const maxSettingsObject = 1 << 20

// NewSettingsObject is the object s3://bucket/key names. It does no I/O.
func NewSettingsObject(cfg Config, location string) (*SettingsObject, error) {
	bucket, key, err := ParseLocation(location)
	if err != nil {
		return nil, err
	}
	key = strings.TrimSuffix(key, "/") // ParseLocation's prefix form
	if key == "" || strings.HasSuffix(location, "/") {
		return nil, fmt.Errorf("want s3://<bucket>/<key> of the settings document")
	}
	return &SettingsObject{client: cfg.s3Client(), bucket: bucket, key: key}, nil
}

// Get returns the object and its ETag, or notModified when its ETag is
// still etag (GET with If-None-Match).
func (o *SettingsObject) Get(ctx context.Context, etag string) (body []byte, newETag string, notModified bool, err error) {
	in := &s3.GetObjectInput{Bucket: sdkaws.String(o.bucket), Key: sdkaws.String(o.key)}
	if etag != "" {
		in.IfNoneMatch = sdkaws.String(etag)
	}
	out, err := o.client.GetObject(ctx, in)
	if err != nil {
		var re *awshttp.ResponseError
		if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotModified {
			return nil, etag, true, nil
		}
		return nil, "", false, err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, maxSettingsObject+1))
	if err != nil {
		return nil, "", false, err
	}
	if len(b) > maxSettingsObject {
		return nil, "", false, fmt.Errorf("settings document larger than %d bytes", maxSettingsObject)
	}
	return b, sdkaws.ToString(out.ETag), false, nil
}

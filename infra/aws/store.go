package aws

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"fngateway/core/async"
)

var _ async.Store = (*Store)(nil)

// WriteBlob streams a blob longer than one part as a multipart upload of
// parts of defaultPartSize (S3 takes parts of 5 MiB to 5 GiB, at most
// 10,000 of them, so blobs of up to 80 GB), one part in memory at a time.
const defaultPartSize = 8 << 20

// minPartSize is S3's smallest part but the last.
const minPartSize = 5 << 20

// maxKeyBytes is S3's longest object key.
const maxKeyBytes = 1024

// abortTimeout bounds the cleanup of a failed multipart upload.
const abortTimeout = 10 * time.Second

// Store implements async.Store on an S3 bucket. A key "<container>/<name>"
// is the object "<prefix><container>/<name>" of the bucket, so a container
// is a key prefix and needs no creating; the bucket is created on the
// first write that finds it missing. Versions are the objects' ETags,
// written with S3's conditional writes. A Store is safe for concurrent
// use.
type Store struct {
	client         *s3.Client
	presign        *s3.PresignClient
	bucket, prefix string
	region         string
	// bucketSeen is set once the bucket is known to exist.
	bucketSeen atomic.Bool

	// PartSize is the part size of WriteBlob's multipart uploads. If 0,
	// defaultPartSize; at least 5 MiB (S3's smallest part). Set it before
	// the Store is used.
	PartSize int
}

// NewStore returns the Store for location, an AsyncStore value
// "s3://<bucket>[/<prefix>]" (see ParseLocation). It does no I/O: missing
// credentials, a wrong endpoint or a missing bucket show in the first
// operation.
func NewStore(cfg Config, location string) (*Store, error) {
	bucket, prefix, err := ParseLocation(location)
	if err != nil {
		return nil, fmt.Errorf("s3 store %q: %w", location, err)
	}
	client := cfg.s3Client()
	return &Store{
		client:  client,
		presign: s3.NewPresignClient(client),
		bucket:  bucket,
		prefix:  prefix,
		region:  cfg.AWS.Region,
	}, nil
}

// objectKey checks a store key "<container>/<name>" and returns its S3
// object key.
func (s *Store) objectKey(key string) (string, error) {
	container, name, ok := strings.Cut(key, "/")
	if !ok || container == "" || name == "" {
		return "", fmt.Errorf("invalid key %q: want <container>/<name>", key)
	}
	if err := checkSegments(key); err != nil {
		return "", fmt.Errorf("invalid key %w", err)
	}
	k := s.prefix + key
	if len(k) > maxKeyBytes {
		return "", fmt.Errorf("invalid key %q: object key longer than %d bytes", key, maxKeyBytes)
	}
	return k, nil
}

// Get returns the object at key and its ETag, or async.ErrNotFound when the
// object or the bucket does not exist.
func (s *Store) Get(ctx context.Context, key string) ([]byte, string, error) {
	return async.ReadObject(s.open(ctx, key))
}

// Put writes data at key if the object's ETag is ifVersion (If-Match), or,
// with ifVersion "", only if no object is there (If-None-Match: *). It
// returns the new ETag, or async.ErrConflict when the condition fails (an
// object deleted since ifVersion counts as changed, and so does a
// concurrent conditional write S3 answers 409 ConditionalRequestConflict).
// A missing bucket is created and the write tried once more.
//
// An S3 ETag is the MD5 of the object's bytes, not a write counter: a write
// of the same bytes leaves the version as it was, so another writer holding
// that version still succeeds, which is right for a read-modify-write (the
// object holds exactly what it read), but a version names content, not a
// moment.
func (s *Store) Put(ctx context.Context, key string, data []byte, ifVersion string) (string, error) {
	k, err := s.objectKey(key)
	if err != nil {
		return "", fmt.Errorf("put: %w", err)
	}
	in := &s3.PutObjectInput{
		Bucket:        &s.bucket,
		Key:           &k,
		ContentLength: sdkaws.Int64(int64(len(data))),
		ContentType:   sdkaws.String("application/json"),
	}
	if ifVersion == "" {
		in.IfNoneMatch = sdkaws.String("*")
	} else {
		in.IfMatch = sdkaws.String(ifVersion)
	}
	put := func() (*s3.PutObjectOutput, error) {
		in.Body = bytes.NewReader(data)
		return s.client.PutObject(ctx, in)
	}
	out, err := put()
	if hasCode(err, "NoSuchBucket") {
		if ifVersion != "" {
			// No bucket, so no object at that version.
			return "", fmt.Errorf("put %s: %w", key, async.ErrConflict)
		}
		if err := s.createBucket(ctx); err != nil {
			return "", fmt.Errorf("put %s: %w", key, err)
		}
		out, err = put()
	}
	if err != nil {
		return "", fmt.Errorf("put %s: %w", key, writeErr(err, ifVersion != ""))
	}
	return deref(out.ETag), nil
}

// WriteBlob streams r into the object at key. A blob that fits in one part
// (see PartSize) is sent with one PutObject of known length; a longer one
// as a multipart upload, one part in memory at a time, which S3 publishes
// only when it is completed, so the blob appears whole or not at all, and
// which is aborted when anything fails. With create set the write is
// conditional (If-None-Match: *, on the PutObject or on the completion)
// and fails with async.ErrConflict if the object exists. A missing bucket
// is created: S3 says so on the first request, while the first part is
// still in memory to be sent again.
func (s *Store) WriteBlob(ctx context.Context, key string, r io.Reader, contentType string, create bool) error {
	k, err := s.objectKey(key)
	if err != nil {
		return fmt.Errorf("write blob: %w", err)
	}
	if contentType == "" {
		contentType = "application/octet-stream"
	}
	var ifNoneMatch *string
	if create {
		ifNoneMatch = sdkaws.String("*")
	}
	part := make([]byte, s.partSize())
	n, err := io.ReadFull(r, part)
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		if n > largeBody {
			// A server may answer "no such bucket" before it has read a
			// large body and close the connection, which the client then
			// sees as a reset rather than the answer: make sure of the
			// bucket first.
			if err := s.ensureBucket(ctx); err != nil {
				return fmt.Errorf("write blob %s: %w", key, err)
			}
		}
		err = s.retryBucket(ctx, func() error {
			_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
				Bucket: &s.bucket, Key: &k,
				Body:          bytes.NewReader(part[:n]),
				ContentLength: sdkaws.Int64(int64(n)),
				ContentType:   &contentType,
				IfNoneMatch:   ifNoneMatch,
			})
			return err
		})
		if err != nil {
			return fmt.Errorf("write blob %s: %w", key, writeErr(err, false))
		}
		return nil
	case err != nil:
		return fmt.Errorf("write blob %s: read: %w", key, err)
	}
	if err := s.multipart(ctx, k, r, part, contentType, ifNoneMatch); err != nil {
		return fmt.Errorf("write blob %s: %w", key, err)
	}
	return nil
}

// multipart uploads first (a full part already read) and the rest of r as
// a multipart upload of object k, aborting it when anything fails.
func (s *Store) multipart(ctx context.Context, k string, r io.Reader, first []byte, contentType string, ifNoneMatch *string) (err error) {
	var created *s3.CreateMultipartUploadOutput
	err = s.retryBucket(ctx, func() error {
		var err error
		created, err = s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
			Bucket: &s.bucket, Key: &k,
			ContentType:       &contentType,
			ChecksumAlgorithm: types.ChecksumAlgorithmCrc32,
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("create multipart upload: %w", err)
	}
	uploadID := created.UploadId
	defer func() {
		if err == nil {
			return
		}
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
		defer cancel()
		if _, aerr := s.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{
			Bucket: &s.bucket, Key: &k, UploadId: uploadID,
		}); aerr != nil {
			err = fmt.Errorf("%w (and abort multipart upload: %v)", err, aerr)
		}
	}()
	var parts []types.CompletedPart
	part, n := first, len(first)
	for number := int32(1); n > 0; number++ {
		out, err := s.client.UploadPart(ctx, &s3.UploadPartInput{
			Bucket: &s.bucket, Key: &k, UploadId: uploadID,
			PartNumber:        &number,
			Body:              bytes.NewReader(part[:n]),
			ContentLength:     sdkaws.Int64(int64(n)),
			ChecksumAlgorithm: types.ChecksumAlgorithmCrc32,
		})
		if err != nil {
			return fmt.Errorf("upload part %d: %w", number, err)
		}
		parts = append(parts, types.CompletedPart{
			PartNumber:    sdkaws.Int32(number),
			ETag:          out.ETag,
			ChecksumCRC32: out.ChecksumCRC32,
		})
		if n < len(part) {
			break // that was the last, short part
		}
		n, err = io.ReadFull(r, part)
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return fmt.Errorf("read: %w", err)
		}
	}
	_, err = s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: &s.bucket, Key: &k, UploadId: uploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
		IfNoneMatch:     ifNoneMatch,
	})
	if err != nil {
		return fmt.Errorf("complete multipart upload: %w", writeErr(err, false))
	}
	return nil
}

func (s *Store) partSize() int {
	if s.PartSize <= 0 {
		return defaultPartSize
	}
	return max(s.PartSize, minPartSize)
}

// OpenBlob opens the object at key for reading, streaming its body; it
// returns async.ErrNotFound when the object or the bucket does not exist.
// The caller closes the reader.
func (s *Store) OpenBlob(ctx context.Context, key string) (io.ReadCloser, error) {
	return async.OpenObject(s.open(ctx, key))
}

// open opens the object at key, streaming its body, with its ETag. An
// error names the key, and wraps async.ErrNotFound when the object or the
// bucket does not exist.
func (s *Store) open(ctx context.Context, key string) (io.ReadCloser, string, error) {
	k, err := s.objectKey(key)
	if err != nil {
		return nil, "", err
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &k})
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", key, readErr(err))
	}
	return out.Body, deref(out.ETag), nil
}

// largeBody is the size above which WriteBlob makes sure of the bucket
// before it sends a body in one request.
const largeBody = 1 << 20

// ensureBucket makes sure the Store's bucket exists, creating it when
// missing; once it is known to exist it does nothing.
func (s *Store) ensureBucket(ctx context.Context) error {
	if s.bucketSeen.Load() {
		return nil
	}
	_, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &s.bucket})
	switch {
	case err == nil:
	case hasCode(err, "NoSuchBucket", "NotFound") || hasStatus(err, http.StatusNotFound):
		if err := s.createBucket(ctx); err != nil {
			return err
		}
	default:
		return fmt.Errorf("head bucket %s: %w", s.bucket, err)
	}
	s.bucketSeen.Store(true)
	return nil
}

// retryBucket runs op, and when S3 answers that the bucket does not exist,
// creates it and runs op once more.
func (s *Store) retryBucket(ctx context.Context, op func() error) error {
	err := op()
	if hasCode(err, "NoSuchBucket") {
		if err := s.createBucket(ctx); err != nil {
			return err
		}
		err = op()
	}
	return err
}

// createBucket creates the Store's bucket in the client's region,
// tolerating one this account already owns (created concurrently).
func (s *Store) createBucket(ctx context.Context) error {
	in := &s3.CreateBucketInput{Bucket: &s.bucket}
	if s.region != "" && s.region != "us-east-1" {
		in.CreateBucketConfiguration = &types.CreateBucketConfiguration{
			LocationConstraint: types.BucketLocationConstraint(s.region),
		}
	}
	_, err := s.client.CreateBucket(ctx, in)
	if err != nil && !hasCode(err, "BucketAlreadyOwnedByYou") {
		return fmt.Errorf("create bucket %s: %w", s.bucket, err)
	}
	return nil
}

// readErr maps a missing object or bucket to async.ErrNotFound.
func readErr(err error) error {
	if hasCode(err, "NoSuchKey", "NoSuchBucket", "NotFound") || hasStatus(err, http.StatusNotFound) {
		return async.ErrNotFound
	}
	return err
}

// writeErr maps a failed write condition to async.ErrConflict: 412
// PreconditionFailed, 409 ConditionalRequestConflict (a concurrent
// conditional write to the same key), and, for an update (If-Match), an
// object that is gone (404 NoSuchKey).
func writeErr(err error, update bool) error {
	if hasStatus(err, http.StatusPreconditionFailed) || hasCode(err, "PreconditionFailed", "ConditionalRequestConflict") ||
		update && (hasCode(err, "NoSuchKey") || hasStatus(err, http.StatusNotFound)) {
		return async.ErrConflict
	}
	return err
}

// hasCode reports whether err is an AWS API error with one of codes.
func hasCode(err error, codes ...string) bool {
	var ae smithy.APIError
	if err == nil || !errors.As(err, &ae) {
		return false
	}
	for _, c := range codes {
		if ae.ErrorCode() == c {
			return true
		}
	}
	return false
}

// hasStatus reports whether err is a response with that HTTP status.
func hasStatus(err error, status int) bool {
	var re *smithyhttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == status
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

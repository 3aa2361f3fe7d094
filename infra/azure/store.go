package azure

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/service"

	"fngateway/core/async"
)

var _ async.Store = (*Store)(nil)

// WriteBlob's streaming: blocks of uploadBlockSize, at most uploadConcurrency
// in flight, so a blob being written holds at most 4 MiB in memory.
const (
	uploadBlockSize   = 1 << 20
	uploadConcurrency = 4
)

// Store implements async.Store on Blob storage. A key "<container>/<blob>"
// names a blob in a container; containers are created on first write when
// missing. Versions are the blobs' ETags. A Store is made by an Account
// and is safe for concurrent use.
type Store struct {
	svc        *service.Client
	sharedKey  *service.SharedKeyCredential // nil under a token credential
	delegation *delegationKeys              // nil with a shared key

	// containers holds the names of containers this Store created or saw,
	// so WriteBlob, which cannot replay its stream, creates them first.
	containers sync.Map
}

func newStore(svc *service.Client, sharedKey *service.SharedKeyCredential) *Store {
	s := &Store{svc: svc, sharedKey: sharedKey}
	if sharedKey == nil {
		s.delegation = &delegationKeys{svc: svc}
	}
	return s
}

func (s *Store) blockBlob(key string) (*blockblob.Client, string, error) {
	container, name, err := splitKey(key)
	if err != nil {
		return nil, "", err
	}
	return s.svc.NewContainerClient(container).NewBlockBlobClient(name), container, nil
}

// Get returns the blob at key and its ETag, or async.ErrNotFound when the
// blob or its container does not exist.
func (s *Store) Get(ctx context.Context, key string) ([]byte, string, error) {
	return async.ReadObject(s.open(ctx, key))
}

// Put writes data at key if the blob's ETag is ifVersion, or, with
// ifVersion "", only if no blob is there (If-None-Match: *). It returns
// the new ETag, or async.ErrConflict when the condition fails (a blob
// deleted since ifVersion counts as changed). A missing container is
// created and the write tried once more.
func (s *Store) Put(ctx context.Context, key string, data []byte, ifVersion string) (string, error) {
	bb, container, err := s.blockBlob(key)
	if err != nil {
		return "", fmt.Errorf("put: %w", err)
	}
	cond := &blob.ModifiedAccessConditions{}
	if ifVersion == "" {
		cond.IfNoneMatch = to.Ptr(azcore.ETagAny)
	} else {
		cond.IfMatch = to.Ptr(azcore.ETag(ifVersion))
	}
	opts := &blockblob.UploadOptions{AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: cond}}
	upload := func() (blockblob.UploadResponse, error) {
		return bb.Upload(ctx, streaming.NopCloser(bytes.NewReader(data)), opts)
	}
	resp, err := upload()
	if bloberror.HasCode(err, bloberror.ContainerNotFound) {
		if ifVersion != "" {
			// No container, so no blob at that version.
			return "", fmt.Errorf("put %s: %w", key, async.ErrConflict)
		}
		if err := s.createContainer(ctx, container); err != nil {
			return "", fmt.Errorf("put %s: %w", key, err)
		}
		resp, err = upload()
	}
	if err != nil {
		return "", fmt.Errorf("put %s: %w", key, writeErr(err))
	}
	s.containers.Store(container, struct{}{})
	return etag(resp.ETag), nil
}

// WriteBlob streams r into the blob at key with a block upload: blocks are
// staged, then committed at once, so the blob appears whole or not at all,
// and at most a few MiB of r are in memory. With create set the commit is
// conditional (If-None-Match: *) and fails with async.ErrConflict if the blob
// exists. The container is created first when this Store has not seen it;
// if it disappears anyway, the write fails, since r cannot be replayed.
func (s *Store) WriteBlob(ctx context.Context, key string, r io.Reader, contentType string, create bool) error {
	bb, container, err := s.blockBlob(key)
	if err != nil {
		return fmt.Errorf("write blob: %w", err)
	}
	if _, seen := s.containers.Load(container); !seen {
		if err := s.createContainer(ctx, container); err != nil {
			return fmt.Errorf("write blob %s: %w", key, err)
		}
	}
	opts := &blockblob.UploadStreamOptions{BlockSize: uploadBlockSize, Concurrency: uploadConcurrency}
	if contentType != "" {
		opts.HTTPHeaders = &blob.HTTPHeaders{BlobContentType: to.Ptr(contentType)}
	}
	if create {
		opts.AccessConditions = &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{
			IfNoneMatch: to.Ptr(azcore.ETagAny),
		}}
	}
	if _, err := bb.UploadStream(ctx, r, opts); err != nil {
		if bloberror.HasCode(err, bloberror.ContainerNotFound) {
			s.containers.Delete(container)
		}
		return fmt.Errorf("write blob %s: %w", key, writeErr(err))
	}
	return nil
}

// OpenBlob opens the blob at key for reading, streaming its body; it returns
// async.ErrNotFound when the blob or its container does not exist. The
// caller closes the reader.
func (s *Store) OpenBlob(ctx context.Context, key string) (io.ReadCloser, error) {
	return async.OpenObject(s.open(ctx, key))
}

// open opens the blob at key, streaming its body, with its ETag. An error
// names the key, and wraps async.ErrNotFound when the blob or its
// container does not exist.
func (s *Store) open(ctx context.Context, key string) (io.ReadCloser, string, error) {
	bb, _, err := s.blockBlob(key)
	if err != nil {
		return nil, "", err
	}
	resp, err := bb.DownloadStream(ctx, nil)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", key, readErr(err))
	}
	return resp.Body, etag(resp.ETag), nil
}

// createContainer creates a container, tolerating one that exists.
func (s *Store) createContainer(ctx context.Context, container string) error {
	_, err := s.svc.NewContainerClient(container).Create(ctx, nil)
	if err != nil && !bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
		return fmt.Errorf("create container %s: %w", container, err)
	}
	s.containers.Store(container, struct{}{})
	return nil
}

// readErr maps a missing blob or container to async.ErrNotFound.
func readErr(err error) error {
	if bloberror.HasCode(err, bloberror.BlobNotFound, bloberror.ContainerNotFound) || hasStatus(err, http.StatusNotFound) {
		return async.ErrNotFound
	}
	return err
}

// writeErr maps a failed write condition to async.ErrConflict: 412
// (ConditionNotMet), 409 BlobAlreadyExists, or a blob gone since the
// version given (404 BlobNotFound).
func writeErr(err error) error {
	if bloberror.HasCode(err, bloberror.ConditionNotMet, bloberror.BlobAlreadyExists, bloberror.BlobNotFound) ||
		hasStatus(err, http.StatusPreconditionFailed) {
		return async.ErrConflict
	}
	return err
}

// hasStatus reports whether err is a response with that HTTP status.
func hasStatus(err error, status int) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == status
}

func etag(e *azcore.ETag) string {
	if e == nil {
		return ""
	}
	return string(*e)
}

package azure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
)

// SettingsBlob is a settings document in Blob storage
// (SettingsSource=https://<account>.blob.core.windows.net/<container>/<blob>),
// read with a conditional GET: unchanged, the service answers 304 Not
// Modified and no body is sent.
type SettingsBlob struct {
	client *blob.Client
}

// maxSettingsBlob bounds the document read: 1 MiB.
const maxSettingsBlob = 1 << 20

// NewSettingsBlob is the blob at url. Its credential is, in this order: a
// SAS in url's query (no other credential), the account key of
// connectionString (the account's AzureWebJobsStorage) when that names the
// same account, or cred (the managed identity). It does no I/O.
func NewSettingsBlob(url, connectionString string, cred func() (azcore.TokenCredential, error)) (*SettingsBlob, error) {
	parts, err := blob.ParseURL(url)
	if err != nil || parts.ContainerName == "" || parts.BlobName == "" {
		return nil, fmt.Errorf("want https://<account>.blob.core.windows.net/<container>/<blob>")
	}
	opts := &blob.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: defaultRetry}}
	if parts.SAS.Signature() != "" {
		c, err := blob.NewClientWithNoCredential(url, opts)
		return &SettingsBlob{client: c}, err
	}
	if connectionString != "" {
		if cs, err := ParseConnectionString(connectionString); err == nil && cs.AccountKey != "" && sameAccount(parts, cs) {
			key, err := blob.NewSharedKeyCredential(cs.AccountName, cs.AccountKey)
			if err != nil {
				return nil, err
			}
			c, err := blob.NewClientWithSharedKeyCredential(url, key, opts)
			return &SettingsBlob{client: c}, err
		}
	}
	if cred == nil {
		return nil, errors.New("no credential for the blob: give it a SAS, or a managed identity with the Storage Blob Data Reader role")
	}
	tc, err := cred()
	if err != nil {
		return nil, fmt.Errorf("credential for the blob: %w", err)
	}
	c, err := blob.NewClient(url, tc, opts)
	return &SettingsBlob{client: c}, err
}

// sameAccount reports whether the blob URL is in the connection string's
// account (its host, or its path's first segment for an emulator's
// path-style URL).
func sameAccount(p blob.URLParts, cs ConnectionString) bool {
	svc, err := blob.ParseURL(cs.BlobServiceURL())
	if err != nil {
		return false
	}
	return svc.Host == p.Host && svc.IPEndpointStyleInfo.AccountName == p.IPEndpointStyleInfo.AccountName
}

// Get returns the blob and its ETag, or notModified when its ETag is still
// etag (GET with If-None-Match).
func (b *SettingsBlob) Get(ctx context.Context, etag string) (body []byte, newETag string, notModified bool, err error) {
	var o blob.DownloadStreamOptions
	if etag != "" {
		o.AccessConditions = &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: to.Ptr(azcore.ETag(etag))}}
	}
	// The service answers an unchanged blob 304, which the SDK returns as
	// a success with an empty body: the raw status tells them apart.
	var raw *http.Response
	resp, err := b.client.DownloadStream(policy.WithCaptureResponse(ctx, &raw), &o)
	if err == nil && raw != nil && raw.StatusCode == http.StatusNotModified {
		if resp.Body != nil {
			resp.Body.Close()
		}
		return nil, etag, true, nil
	}
	if err != nil {
		var re *azcore.ResponseError
		if errors.As(err, &re) && re.StatusCode == http.StatusNotModified {
			return nil, etag, true, nil
		}
		return nil, "", false, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxSettingsBlob+1))
	if err != nil {
		return nil, "", false, err
	}
	if len(data) > maxSettingsBlob {
		return nil, "", false, fmt.Errorf("settings document larger than %d bytes", maxSettingsBlob)
	}
	var tag string
	if resp.ETag != nil {
		tag = string(*resp.ETag)
	}
	return data, tag, false, nil
}

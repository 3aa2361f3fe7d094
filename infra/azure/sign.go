package azure

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/service"
)

// User delegation keys: Azure issues them for at most 7 days. A key is
// asked for with that lifetime (less a minute for clock skew) and is used
// for an hour, so a user-delegation SAS lasts at least 7 days less an hour
// and a minute, or until the expiry asked for when that comes sooner.
const (
	delegationKeyLifetime = 7*24*time.Hour - time.Minute
	delegationKeyRefresh  = time.Hour
	// delegationKeyBackdate starts a key a little in the past, so a
	// service clock behind ours accepts it at once.
	delegationKeyBackdate = time.Minute
)

// SignURL returns an absolute, read-only SAS URL for the one blob at key,
// valid until expiry. With a connection string it is a service SAS signed
// with the account key, valid until expiry however far. Under a token
// credential it is a user-delegation SAS, valid until expiry or until its
// delegation key expires (at least 7 days less about an hour from now),
// whichever comes first; the caller re-signs for longer (core asks only for
// URLs followed at once, and the 202 hands out gateway result URLs: the
// Store is no async.LastingSigner). SignURL does no I/O
// with a shared key, and under a token credential fetches a delegation key
// about once an hour.
func (s *Store) SignURL(ctx context.Context, key string, expiry time.Time) (string, error) {
	bb, container, err := s.blockBlob(key)
	if err != nil {
		return "", fmt.Errorf("sign url: %w", err)
	}
	now := time.Now()
	if !expiry.After(now) {
		return "", fmt.Errorf("sign url %s: expiry %s is not in the future", key, expiry.UTC().Format(time.RFC3339))
	}
	_, name, _ := splitKey(key)
	values := sas.BlobSignatureValues{
		Protocol:      sas.ProtocolHTTPSandHTTP,
		ExpiryTime:    expiry.UTC(),
		Permissions:   to.Ptr(sas.BlobPermissions{Read: true}).String(),
		ContainerName: container,
		BlobName:      name,
	}
	if strings.HasPrefix(bb.URL(), "https:") {
		values.Protocol = sas.ProtocolHTTPS
	}
	var qp sas.QueryParameters
	if s.sharedKey != nil {
		qp, err = values.SignWithSharedKey(s.sharedKey)
	} else {
		var cred *service.UserDelegationCredential
		var keyExpiry time.Time
		cred, keyExpiry, err = s.delegation.get(ctx, now)
		if err != nil {
			return "", fmt.Errorf("sign url %s: %w", key, err)
		}
		if values.ExpiryTime.After(keyExpiry) {
			values.ExpiryTime = keyExpiry.UTC()
		}
		qp, err = values.SignWithUserDelegation(cred)
	}
	if err != nil {
		return "", fmt.Errorf("sign url %s: %w", key, err)
	}
	return bb.URL() + "?" + qp.Encode(), nil
}

// delegationKeys caches a user delegation key for the Store's service.
type delegationKeys struct {
	svc *service.Client

	mu      sync.Mutex // held while fetching, so callers share one fetch
	cred    *service.UserDelegationCredential
	fetched time.Time
	expires time.Time
}

// get returns a delegation key valid now and its expiry, fetching a new
// one when the cached key is older than delegationKeyRefresh. If that
// fetch fails, a cached key that is still valid is returned.
func (d *delegationKeys) get(ctx context.Context, now time.Time) (*service.UserDelegationCredential, time.Time, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cred != nil && now.Sub(d.fetched) < delegationKeyRefresh && now.Before(d.expires) {
		return d.cred, d.expires, nil
	}
	start := now.Add(-delegationKeyBackdate).UTC()
	expires := now.Add(delegationKeyLifetime).UTC().Truncate(time.Second)
	cred, err := d.svc.GetUserDelegationCredential(ctx, service.KeyInfo{
		Start:  to.Ptr(start.Format(sas.TimeFormat)),
		Expiry: to.Ptr(expires.Format(sas.TimeFormat)),
	}, nil)
	if err == nil && cred == nil {
		err = errors.New("empty answer")
	}
	if err != nil {
		if d.cred != nil && now.Before(d.expires) {
			// The refresh failed, but the cached key is still valid:
			// it signs shorter-lived URLs rather than none.
			return d.cred, d.expires, nil
		}
		return nil, time.Time{}, fmt.Errorf("get user delegation key: %w", err)
	}
	d.cred, d.fetched, d.expires = cred, now, expires
	return cred, expires, nil
}

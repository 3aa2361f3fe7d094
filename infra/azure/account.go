package azure

import (
	"errors"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/service"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"
)

// Config names a storage account and how to authorize against it, in the
// two forms the Azure Functions host accepts for AzureWebJobsStorage. Set
// either ConnectionString, or BlobServiceURI and QueueServiceURI.
type Config struct {
	// ConnectionString is a storage connection string (the value of
	// AzureWebJobsStorage), parsed by ParseConnectionString. Requests and
	// SAS URLs are signed with its account key.
	ConnectionString string

	// BlobServiceURI and QueueServiceURI are the identity-based form
	// (AzureWebJobsStorage__blobServiceUri and __queueServiceUri), for
	// example "https://<account>.blob.core.windows.net". Requests carry
	// tokens from Credential, and SAS URLs are user-delegation SAS.
	BlobServiceURI, QueueServiceURI string

	// Credential authorizes identity-based access. If nil, a managed
	// identity credential for ClientID is used when ClientID is set, and
	// azidentity.NewDefaultAzureCredential otherwise. Ignored with a
	// connection string.
	Credential azcore.TokenCredential

	// ClientID selects a user-assigned managed identity
	// (AzureWebJobsStorage__clientId) when Credential is nil.
	ClientID string

	// Retry is the SDK retry policy for every request. If nil, the
	// package's short policy is used: 2 retries, 100 ms initial delay,
	// 500 ms at most between tries, no per-try timeout. A store or queue
	// that refuses connections then fails within about a second, and the
	// caller's context deadline bounds a hung connection.
	Retry *policy.RetryOptions

	// Transport sends the HTTP requests. If nil, azcore's default
	// transport is used.
	Transport policy.Transporter
}

// defaultRetry is Config.Retry's default: fail fast, so that an async
// hand-off against a storage account that is down answers 503 in time
// instead of retrying for minutes (the SDK default waits 800 ms, doubling,
// up to 60 s).
var defaultRetry = policy.RetryOptions{
	MaxRetries:    2,
	RetryDelay:    100 * time.Millisecond,
	MaxRetryDelay: 500 * time.Millisecond,
}

// Account is a storage account the gateway uses: it makes the Store, the
// Queue and the Notifier, which share its clients and credential.
// An Account is safe for concurrent use.
type Account struct {
	store    *Store
	queueSvc *azqueue.ServiceClient
}

// NewAccount checks cfg and makes the account's clients. It does no I/O:
// a wrong key or an unreachable endpoint shows in the first operation.
func NewAccount(cfg Config) (*Account, error) {
	identity := cfg.BlobServiceURI != "" || cfg.QueueServiceURI != ""
	switch {
	case cfg.ConnectionString != "" && identity:
		return nil, errors.New("azure account: set either a connection string or service URIs, not both")
	case cfg.ConnectionString != "":
		return newSharedKeyAccount(cfg)
	case identity:
		return newIdentityAccount(cfg)
	default:
		return nil, errors.New("azure account: no connection string and no service URIs")
	}
}

func (cfg Config) clientOptions() azcore.ClientOptions {
	retry := defaultRetry
	if cfg.Retry != nil {
		retry = *cfg.Retry
	}
	return azcore.ClientOptions{Retry: retry, Transport: cfg.Transport}
}

func newSharedKeyAccount(cfg Config) (*Account, error) {
	cs, err := ParseConnectionString(cfg.ConnectionString)
	if err != nil {
		return nil, fmt.Errorf("azure account: %w", err)
	}
	opts := cfg.clientOptions()
	blobCred, err := service.NewSharedKeyCredential(cs.AccountName, cs.AccountKey)
	if err != nil {
		return nil, errors.New("azure account: AccountKey is not a valid key")
	}
	blobSvc, err := service.NewClientWithSharedKeyCredential(cs.BlobServiceURL(), blobCred, &service.ClientOptions{ClientOptions: opts})
	if err != nil {
		return nil, fmt.Errorf("azure account: blob client: %w", err)
	}
	queueCred, err := azqueue.NewSharedKeyCredential(cs.AccountName, cs.AccountKey)
	if err != nil {
		return nil, errors.New("azure account: AccountKey is not a valid key")
	}
	queueSvc, err := azqueue.NewServiceClientWithSharedKeyCredential(cs.QueueServiceURL(), queueCred, &azqueue.ClientOptions{ClientOptions: opts})
	if err != nil {
		return nil, fmt.Errorf("azure account: queue client: %w", err)
	}
	return &Account{store: newStore(blobSvc, blobCred), queueSvc: queueSvc}, nil
}

func newIdentityAccount(cfg Config) (*Account, error) {
	for _, u := range []struct{ name, value string }{
		{"blob service URI", cfg.BlobServiceURI},
		{"queue service URI", cfg.QueueServiceURI},
	} {
		if u.value == "" {
			return nil, fmt.Errorf("azure account: %s missing (identity-based access needs both the blob and the queue service URI)", u.name)
		}
		if err := checkServiceURL(u.value); err != nil {
			return nil, fmt.Errorf("azure account: %s %q: %w", u.name, u.value, err)
		}
	}
	cred := cfg.Credential
	if cred == nil {
		var err error
		if cfg.ClientID != "" {
			cred, err = azidentity.NewManagedIdentityCredential(&azidentity.ManagedIdentityCredentialOptions{
				ID: azidentity.ClientID(cfg.ClientID),
			})
		} else {
			cred, err = azidentity.NewDefaultAzureCredential(nil)
		}
		if err != nil {
			return nil, fmt.Errorf("azure account: credential: %w", err)
		}
	}
	opts := cfg.clientOptions()
	blobSvc, err := service.NewClient(cfg.BlobServiceURI, cred, &service.ClientOptions{ClientOptions: opts})
	if err != nil {
		return nil, fmt.Errorf("azure account: blob client: %w", err)
	}
	queueSvc, err := azqueue.NewServiceClient(cfg.QueueServiceURI, cred, &azqueue.ClientOptions{ClientOptions: opts})
	if err != nil {
		return nil, fmt.Errorf("azure account: queue client: %w", err)
	}
	return &Account{store: newStore(blobSvc, nil), queueSvc: queueSvc}, nil
}

// Store returns the account's Blob-storage Store.
func (a *Account) Store() *Store { return a.store }

// Queue returns the Queue on the account's queue of that name (the
// AsyncQueue setting). The queue is created on first use when missing.
func (a *Account) Queue(name string) (*Queue, error) {
	if err := checkName("queue", name); err != nil {
		return nil, fmt.Errorf("azure queue: %w", err)
	}
	return &Queue{q: newQueueClient(a.queueSvc, name)}, nil
}

// Notifier returns the Notifier that sends to the account's queues.
func (a *Account) Notifier() *Notifier { return &Notifier{svc: a.queueSvc} }

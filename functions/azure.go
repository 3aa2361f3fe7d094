//go:build !noazure

// The Azure wiring: everything of the gateway that links the Azure SDK. A
// build with -tags noazure (make package-aws) leaves it out; azure_off.go
// stands in.

package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"fngateway/core"
	"fngateway/infra/azure"
	"fngateway/internal/settings"
)

// openAzure connects AsyncStore=azure to the storage account the Functions
// host itself uses, as azureStorageConfig reads it from getenv. With dl, the
// continuation queue's poison queue is connected too.
func openAzure(_ context.Context, s *settings.Settings, getenv func(string) string, dl *deadLetterQuery) (*asyncParts, error) {
	cfg, err := azureStorageConfig(s.AzureWebJobsStorage, getenv)
	if err != nil {
		return nil, err
	}
	acct, err := azure.NewAccount(cfg)
	if err != nil {
		return nil, &core.SettingError{Name: "AzureWebJobsStorage", Value: "(redacted)", Want: err.Error()}
	}
	name := s.AsyncQueue
	if name == "" {
		name = defaultAzureQueue
	}
	q, err := acct.Queue(name)
	if err != nil {
		return nil, &core.SettingError{Name: "AsyncQueue", Value: name, Want: err.Error()}
	}
	// On the Functions host Terraform creates every notification queue
	// (docs/terraform.md#inputs-at-a-glance): a missing one is an error, not created.
	notifier := acct.Notifier()
	notifier.NoCreate = os.Getenv("FUNCTIONS_CUSTOMHANDLER_PORT") != ""
	p := &asyncParts{store: acct.Store(), queue: q, notifier: notifier}
	if dl != nil {
		pq, err := acct.PoisonQueue(name)
		if err != nil {
			return nil, &core.SettingError{Name: "AsyncQueue", Value: name, Want: err.Error()}
		}
		p.deadLetters, p.where = pq, "queue "+pq.Name()
	}
	return p, nil
}

// azureStorageConfig reads the storage settings as the Functions host does
// (docs/settings.md#azure-storage-settings): the AzureWebJobsStorage connection string conn, or the
// identity-based AzureWebJobsStorage__blobServiceUri / __queueServiceUri
// (or __accountName, from which a URI not given is derived), with __credential
// (managedidentity) and __clientId for a user-assigned identity. getenv
// reads the environment.
//
// A connection string that carries no credential (no AccountKey, no
// SharedAccessSignature: the azurerm provider writes one for identity-based
// Flex Consumption apps) beside identity-based settings is not a
// credential: the identity-based settings win. One that carries a
// credential beside them is refused, naming both.
func azureStorageConfig(conn string, getenv func(string) string) (azure.Config, error) {
	const (
		blobName    = "AzureWebJobsStorage__blobServiceUri"
		queueName   = "AzureWebJobsStorage__queueServiceUri"
		accountName = "AzureWebJobsStorage__accountName"
		credName    = "AzureWebJobsStorage__credential"
		clientName  = "AzureWebJobsStorage__clientId"
	)
	blobURI := strings.TrimSpace(getenv(blobName))
	queueURI := strings.TrimSpace(getenv(queueName))
	account := strings.TrimSpace(getenv(accountName))
	// The host's own derivation for an account in the public cloud, for
	// each service whose URI is not given: terraform/azure writes the
	// account name beside both URIs, as the host's maintainers advise
	// (azure-functions-host #11787), and a URI given wins over it.
	if account != "" && blobURI == "" {
		blobURI = "https://" + account + ".blob.core.windows.net"
	}
	if account != "" && queueURI == "" {
		queueURI = "https://" + account + ".queue.core.windows.net"
	}
	identity := blobURI != "" || queueURI != ""
	conn = strings.TrimSpace(conn)
	if conn != "" && identity {
		cred, err := azure.CarriesCredential(conn)
		switch {
		case err != nil:
			return azure.Config{}, &core.SettingError{Name: "AzureWebJobsStorage", Value: "(redacted)",
				Want: err.Error() + "; beside the identity-based " + blobName + "/__queueServiceUri, remove it or give a connection string without a credential"}
		case cred:
			return azure.Config{}, &core.SettingError{Name: "AzureWebJobsStorage", Value: "(connection string with a credential)",
				Want: "want either this credential or the identity-based " + blobName + "/__queueServiceUri, not both: remove one of them"}
		}
		conn = "" // names the account, authorizes nothing: identity wins
	}
	cfg := azure.Config{ConnectionString: conn, ClientID: strings.TrimSpace(getenv(clientName))}
	if conn != "" {
		return cfg, nil
	}
	if blobURI == "" || queueURI == "" {
		return azure.Config{}, &core.SettingError{Name: "AzureWebJobsStorage", Value: "",
			Want: "want a connection string, or both " + blobName + " and __queueServiceUri (or __accountName), when AsyncStore=azure"}
	}
	cfg.BlobServiceURI, cfg.QueueServiceURI = blobURI, queueURI
	switch c := strings.TrimSpace(getenv(credName)); {
	case c == "":
		// The SDK's default chain (environment, workload and managed
		// identity, developer sign-ins).
	case strings.EqualFold(c, "managedidentity"):
		opts := &azidentity.ManagedIdentityCredentialOptions{}
		if cfg.ClientID != "" {
			opts.ID = azidentity.ClientID(cfg.ClientID)
		}
		mi, err := azidentity.NewManagedIdentityCredential(opts)
		if err != nil {
			return azure.Config{}, &core.SettingError{Name: credName, Value: c, Want: "managed identity: " + err.Error()}
		}
		cfg.Credential = mi
	default:
		return azure.Config{}, &core.SettingError{Name: credName, Value: c, Want: "want managedidentity, or nothing for the SDK's default credential chain"}
	}
	return cfg, nil
}

// newEntraAuthorizers returns the authorizers of entra routes, one per
// scope, sharing the function's Entra ID identity (entraCredential).
func newEntraAuthorizers() (func(scope string) core.Authorizer, error) {
	cred, err := entraCredential()
	if err != nil {
		return nil, err
	}
	return func(scope string) core.Authorizer { return azure.NewTokenAuthorizer(cred, scope) }, nil
}

// entraCredential is the function's Entra ID identity: the managed
// identity where the host serves one (App Service and Functions set
// IDENTITY_ENDPOINT and IDENTITY_HEADER), with the user-assigned client id
// AZURE_CLIENT_ID when set; the default credential chain elsewhere.
func entraCredential() (azcore.TokenCredential, error) {
	if os.Getenv("IDENTITY_ENDPOINT") != "" && os.Getenv("IDENTITY_HEADER") != "" {
		opts := &azidentity.ManagedIdentityCredentialOptions{}
		if id := os.Getenv("AZURE_CLIENT_ID"); id != "" {
			opts.ID = azidentity.ClientID(id)
		}
		return azidentity.NewManagedIdentityCredential(opts)
	}
	return azidentity.NewDefaultAzureCredential(nil)
}

// entraSigner is the authorizer of `gateway check --entra-scope`:
// infra/azure's token authorizer for scope (App Service Authentication with
// Entra ID) over the Azure SDK's default credential chain. A token is
// fetched here, so that a missing credential stops the check before any
// probe; the authorizer keeps it, and fetches another as it nears expiry.
func entraSigner(ctx context.Context, scope string) (core.Authorizer, error) {
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, fmt.Errorf("load Azure credentials: %w", err)
	}
	a := azure.NewTokenAuthorizer(cred, scope)
	if err := a.Authorize(ctx, &http.Request{Header: http.Header{}}, nil, false); err != nil {
		return nil, fmt.Errorf("no token: %w", err)
	}
	return a, nil
}

package main

import (
	"context"
	"os"

	"fngateway/core"
	"fngateway/infra/azure"
)

// defaultAzureQueue is AsyncQueue's default for AsyncStore=azure, and the
// queue functions/continuation/function.json is triggered by.
const defaultAzureQueue = "gateway-continuations"

type azureParts struct {
	store    core.Store
	queue    core.Queue
	notifier core.Notifier
}

// openAzure connects AsyncStore=azure to the storage account the Functions
// host itself uses: AzureWebJobsStorage as a connection string, or the
// identity-based AzureWebJobsStorage__blobServiceUri / __queueServiceUri
// (with __clientId for a user-assigned identity).
func openAzure(_ context.Context, s *core.Settings) (*azureParts, error) {
	blobURI := os.Getenv("AzureWebJobsStorage__blobServiceUri")
	queueURI := os.Getenv("AzureWebJobsStorage__queueServiceUri")
	cfg := azure.Config{
		ConnectionString: s.AzureWebJobsStorage,
		BlobServiceURI:   blobURI,
		QueueServiceURI:  queueURI,
		ClientID:         os.Getenv("AzureWebJobsStorage__clientId"),
	}
	switch {
	case cfg.ConnectionString != "" && (blobURI != "" || queueURI != ""):
		return nil, &core.SettingError{Name: "AzureWebJobsStorage", Value: "(connection string)",
			Want: "want either a connection string or AzureWebJobsStorage__blobServiceUri/__queueServiceUri, not both"}
	case cfg.ConnectionString == "" && (blobURI == "" || queueURI == ""):
		return nil, &core.SettingError{Name: "AzureWebJobsStorage", Value: "",
			Want: "want a connection string, or both AzureWebJobsStorage__blobServiceUri and __queueServiceUri, when AsyncStore=azure"}
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
	return &azureParts{store: acct.Store(), queue: q, notifier: acct.Notifier()}, nil
}

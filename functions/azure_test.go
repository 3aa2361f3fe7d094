//go:build !noazure

package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"fngateway/core"
)

// TestAzureStorageConfig holds the storage rule of docs/settings.md#azure-storage-settings for every
// combination of a connection string (none, key-less as the azurerm
// provider writes it, with a key, with a SAS, the emulator's) and the
// identity-based settings (none, both URIs, one URI, an account name).
func TestAzureStorageConfig(t *testing.T) {
	const (
		key      = "dGVzdCBrZXkgKyBzbGFzaC8gZm9yIHRoZSBnYXRld2F5IHRlc3Rz"
		blob     = "https://acct.blob.core.windows.net/"
		queue    = "https://acct.queue.core.windows.net/"
		keyless  = "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=;EndpointSuffix=core.windows.net"
		withKey  = "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" + key + ";EndpointSuffix=core.windows.net"
		withSAS  = "BlobEndpoint=https://acct.blob.core.windows.net;SharedAccessSignature=sv=2022-11-02&sig=abc"
		devStore = "UseDevelopmentStorage=true"
	)
	identity := map[string]string{
		"AzureWebJobsStorage__blobServiceUri":  blob,
		"AzureWebJobsStorage__queueServiceUri": queue,
		"AzureWebJobsStorage__credential":      "managedidentity",
	}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	tests := []struct {
		name      string
		conn      string
		env       map[string]string
		wantConn  string // the connection string used; "" for identity
		wantBlob  string
		wantQueue string
		wantErr   string // a part of the one-line error
	}{
		{name: "connection string alone", conn: withKey, wantConn: withKey},
		{name: "emulator alone", conn: devStore, wantConn: devStore},
		{name: "identity alone", env: identity, wantBlob: blob, wantQueue: queue},
		{name: "key-less string beside identity: identity wins", conn: keyless, env: identity, wantBlob: blob, wantQueue: queue},
		{name: "key-less string, other spelling", conn: " accountname=acct; ACCOUNTKEY = ;", env: identity, wantBlob: blob, wantQueue: queue},
		{name: "key-less string beside the account name", conn: keyless, env: map[string]string{"AzureWebJobsStorage__accountName": "acct"},
			wantBlob: "https://acct.blob.core.windows.net", wantQueue: "https://acct.queue.core.windows.net"},
		{name: "key beside identity", conn: withKey, env: identity,
			wantErr: `setting AzureWebJobsStorage="(connection string with a credential)": want either this credential or the identity-based AzureWebJobsStorage__blobServiceUri/__queueServiceUri, not both`},
		{name: "SAS beside identity", conn: withSAS, env: identity, wantErr: "not both"},
		{name: "emulator beside identity", conn: devStore, env: identity, wantErr: "not both"},
		{name: "key beside one URI", conn: withKey, env: map[string]string{"AzureWebJobsStorage__queueServiceUri": queue}, wantErr: "not both"},
		{name: "mangled string beside identity", conn: "AccountName=acct;" + key, env: identity, wantErr: "part 2 is not Name=Value"},
		{name: "key-less string alone", conn: keyless, wantConn: keyless}, // refused by NewAccount: AccountKey is empty
		{name: "account name beside both URIs: the URIs win", conn: keyless, env: with(identity, "AzureWebJobsStorage__accountName", "other"), wantBlob: blob, wantQueue: queue},
		{name: "account name beside the blob URI gives the queue URI", conn: keyless,
			env:      map[string]string{"AzureWebJobsStorage__accountName": "acct", "AzureWebJobsStorage__blobServiceUri": blob, "AzureWebJobsStorage__credential": "managedidentity"},
			wantBlob: blob, wantQueue: "https://acct.queue.core.windows.net"},
		{name: "account name beside the queue URI gives the blob URI",
			env:      map[string]string{"AzureWebJobsStorage__accountName": "acct", "AzureWebJobsStorage__queueServiceUri": queue},
			wantBlob: "https://acct.blob.core.windows.net", wantQueue: queue},
		{name: "key-less string beside one URI", conn: keyless, env: map[string]string{"AzureWebJobsStorage__blobServiceUri": blob},
			wantErr: "or both AzureWebJobsStorage__blobServiceUri and __queueServiceUri"},
		{name: "nothing", wantErr: `setting AzureWebJobsStorage="": want a connection string`},
		{name: "unknown credential", env: with(identity, "AzureWebJobsStorage__credential", "password"),
			wantErr: `setting AzureWebJobsStorage__credential="password": want managedidentity`},
		{name: "no credential setting", env: with(identity, "AzureWebJobsStorage__credential", ""), wantBlob: blob, wantQueue: queue},
		{name: "user-assigned identity", conn: keyless, env: with(identity, "AzureWebJobsStorage__clientId", "11111111-2222-3333-4444-555555555555"), wantBlob: blob, wantQueue: queue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(name string) string { return tt.env[name] }
			cfg, err := azureStorageConfig(tt.conn, getenv)
			if tt.wantErr != "" {
				var se *core.SettingError
				if !errors.As(err, &se) {
					t.Fatalf("error = %v; want a setting error containing %q", err, tt.wantErr)
				}
				if msg := err.Error(); !strings.Contains(msg, tt.wantErr) || strings.Contains(msg, "\n") || strings.Contains(msg, key) {
					t.Errorf("error = %q; want one line containing %q, without the key", msg, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("error = %v; want none", err)
			}
			if cfg.ConnectionString != tt.wantConn || cfg.BlobServiceURI != tt.wantBlob || cfg.QueueServiceURI != tt.wantQueue {
				t.Errorf("config = {conn %q, blob %q, queue %q}; want {%q, %q, %q}",
					cfg.ConnectionString, cfg.BlobServiceURI, cfg.QueueServiceURI, tt.wantConn, tt.wantBlob, tt.wantQueue)
			}
			_, isMI := cfg.Credential.(*azidentity.ManagedIdentityCredential)
			if wantMI := tt.wantConn == "" && tt.env["AzureWebJobsStorage__credential"] == "managedidentity"; isMI != wantMI {
				t.Errorf("managed identity credential = %v; want %v", isMI, wantMI)
			}
			if got, want := cfg.ClientID, tt.env["AzureWebJobsStorage__clientId"]; got != want {
				t.Errorf("ClientID = %q; want %q", got, want)
			}
		})
	}
}

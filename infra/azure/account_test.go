package azure_test

import (
	"bytes"
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"fngateway/infra/azure"
	"fngateway/internal/emulators"
	"fngateway/internal/testutil"
)

// noToken is a credential that is never asked: NewAccount does no I/O.
type noToken struct{}

func (noToken) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{}, nil
}

func TestNewAccountErrors(t *testing.T) {
	const conn = "AccountName=acct;AccountKey=a2V5"
	tests := []struct {
		name string
		cfg  azure.Config
		want string // in the error; "" for success
	}{
		{"connection string", azure.Config{ConnectionString: conn}, ""},
		{"service URIs", azure.Config{BlobServiceURI: "https://acct.blob.core.windows.net", QueueServiceURI: "https://acct.queue.core.windows.net", Credential: noToken{}}, ""},
		{"nothing", azure.Config{}, "no connection string and no service URIs"},
		{"both forms", azure.Config{ConnectionString: conn, BlobServiceURI: "https://acct.blob.core.windows.net"}, "not both"},
		{"bad connection string", azure.Config{ConnectionString: "AccountName=acct"}, "AccountKey missing"},
		{"blob URI only", azure.Config{BlobServiceURI: "https://acct.blob.core.windows.net", Credential: noToken{}}, "queue service URI missing"},
		{"queue URI only", azure.Config{QueueServiceURI: "https://acct.queue.core.windows.net", Credential: noToken{}}, "blob service URI missing"},
		{"relative URI", azure.Config{BlobServiceURI: "acct.blob.core.windows.net", QueueServiceURI: "https://acct.queue.core.windows.net", Credential: noToken{}}, `blob service URI "acct.blob.core.windows.net"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acct, err := azure.NewAccount(tt.cfg)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("NewAccount: %v", err)
			case tt.want == "" && (acct.Store() == nil || acct.Notifier() == nil):
				t.Fatal("NewAccount: Store or Notifier nil")
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("NewAccount error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestIdentityAccount uses identity-based access (bearer tokens over
// HTTPS) and user-delegation SAS, against Azurite with OAuth.
func TestIdentityAccount(t *testing.T) {
	t.Parallel()
	az := emulators.StartAzuriteOAuth(t)
	client := az.HTTPClient()
	acct, err := azure.NewAccount(azure.Config{
		BlobServiceURI:  az.BlobEndpoint(),
		QueueServiceURI: az.QueueEndpoint(),
		Credential:      az.TokenCredential("0b7b2a2e-1c9c-4d59-9c4b-6a0f2d1e3f40"),
		Transport:       client,
	})
	if err != nil {
		t.Fatalf("NewAccount: %v", err)
	}
	ctx := testutil.Context(t)
	store := acct.Store()
	c := testutil.UniqueName("identity")
	keyA, keyB := c+"/a", c+"/b"
	body := []byte("token auth")
	if _, err := store.Put(ctx, keyA, body, ""); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if err := store.WriteBlob(ctx, keyB, strings.NewReader("B"), "text/plain", true); err != nil {
		t.Fatalf("WriteBlob: %v", err)
	}
	if got, _, err := store.Get(ctx, keyA); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("Get = %q, %v; want %q", got, err, body)
	}

	// Asked for 30 days, a user-delegation SAS lasts as long as its key:
	// at most 7 days.
	signed, err := store.SignURL(ctx, keyA, time.Now().AddDate(0, 0, 30))
	if err != nil {
		t.Fatalf("SignURL: %v", err)
	}
	u, err := url.Parse(signed)
	if err != nil || u.Scheme != "https" {
		t.Fatalf("SignURL = %q: want an absolute https URL", signed)
	}
	q := u.Query()
	if q.Get("skoid") == "" || q.Get("sp") != "r" || q.Get("sr") != "b" {
		t.Fatalf("SignURL = %q: want a read-only user-delegation SAS for one blob", signed)
	}
	se, err := time.Parse(time.RFC3339, q.Get("se"))
	if err != nil {
		t.Fatalf("SAS expiry %q: %v", q.Get("se"), err)
	}
	if limit := time.Now().Add(7 * 24 * time.Hour); se.After(limit) || se.Before(limit.Add(-2*time.Hour)) {
		t.Fatalf("SAS expiry %v, want just under 7 days from now", se)
	}
	signedB, err := store.SignURL(ctx, keyB, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatalf("SignURL: %v", err)
	}
	uB, _ := url.Parse(signedB)
	if se, _ := time.Parse(time.RFC3339, uB.Query().Get("se")); time.Until(se) > time.Hour {
		t.Fatalf("SAS asked for an hour expires at %v", se)
	}

	t.Run("SignURL", func(t *testing.T) { testSignURL(t, store, client) })

	// A token Azurite does not accept is refused: access is really checked.
	badAcct, err := azure.NewAccount(azure.Config{
		BlobServiceURI:  az.BlobEndpoint(),
		QueueServiceURI: az.QueueEndpoint(),
		Credential:      noToken{},
		Transport:       client,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := badAcct.Store().Get(ctx, keyA); err == nil {
		t.Fatal("Get with an unacceptable token: no error")
	}

	queue, err := acct.Queue(testutil.UniqueName("identity"))
	if err != nil {
		t.Fatal(err)
	}
	if err := queue.Enqueue(ctx, []byte("token auth"), 0); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	if m := receiveOne(t, queue, 30*time.Second, 5*time.Second); string(m.Body) != "token auth" {
		t.Fatalf("received %q, want %q", m.Body, "token auth")
	}
	if err := acct.Notifier().Notify(ctx, testutil.UniqueName("topic"), []byte("n")); err != nil {
		t.Fatalf("Notify: %v", err)
	}
}

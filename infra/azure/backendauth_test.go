package azure_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"fngateway/infra/azure"
)

// TestTokenAuthorizerCache runs the authorizer on a managed identity
// credential against an App Service identity endpoint on loopback: many
// concurrent requests share one fetch, a cached token serves later ones,
// and a token is replaced once it is due (half its life here, as it lives
// less than twice TokenRefreshMargin).
func TestTokenAuthorizerCache(t *testing.T) {
	const life = 4 * time.Second
	var fetches atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Identity-Header") != "hdr" {
			http.Error(w, "no", http.StatusBadRequest)
			return
		}
		n := fetches.Add(1)
		time.Sleep(50 * time.Millisecond) // so concurrent callers overlap
		fmt.Fprintf(w, `{"access_token":"token-%d","expires_on":"%d","resource":%q,"token_type":"Bearer"}`,
			n, time.Now().Add(life).Unix(), r.URL.Query().Get("resource"))
	}))
	defer srv.Close()
	t.Setenv("IDENTITY_ENDPOINT", srv.URL+"/msi/token")
	t.Setenv("IDENTITY_HEADER", "hdr")
	cred, err := azidentity.NewManagedIdentityCredential(nil)
	if err != nil {
		t.Fatal(err)
	}
	a := azure.NewTokenAuthorizer(cred, "https://example.com/.default")
	auth := func() string {
		r, _ := http.NewRequest("GET", "http://127.0.0.1:9/", nil)
		if err := a.Authorize(context.Background(), r, nil, false); err != nil {
			t.Errorf("Authorize: %v", err)
		}
		return r.Header.Get("Authorization")
	}
	var wg sync.WaitGroup
	got := make([]string, 20)
	for i := range got {
		wg.Go(func() { got[i] = auth() })
	}
	wg.Wait()
	for _, g := range got {
		if g != "Bearer token-1" {
			t.Fatalf("Authorization = %q; want every request to share the first token", g)
		}
	}
	if n := fetches.Load(); n != 1 {
		t.Errorf("fetches = %d; want 1 for 20 concurrent requests", n)
	}
	start := time.Now()
	// Poll until the token is due (half its life of whole seconds, so
	// between 1.5 and 2 s from now), with a deadline.
	for time.Since(start) < life {
		if g := auth(); !strings.HasSuffix(g, "token-1") {
			if g != "Bearer token-2" {
				t.Fatalf("Authorization = %q; want the second token", g)
			}
			if d := time.Since(start); d < life/2-time.Second {
				t.Errorf("replaced after %v; want not before it is due", d)
			}
			return
		}
		time.Sleep(50 * time.Millisecond) // polling the cache, with the deadline above
	}
	t.Errorf("the token was not replaced within its life (%v); fetches %d", life, fetches.Load())
}

package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
)

// TestAsyncAzurePoller follows a 202 with the Azure SDK for Go's own
// long-running-operation poller (azcore runtime.NewPoller, which picks its
// Location poller for a 202 with a Location header): it keeps polling while
// the status URI answers 202, follows the 303 when done, and returns the
// backend's body byte for byte, although the backend takes 4 s.
func TestAsyncAzurePoller(t *testing.T) {
	t.Parallel()
	const result = `{"report":"q3","rows":[1,2,3],"note":"exact bytes \u00e9"}`
	var calls atomic.Int64
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		select {
		case <-time.After(4 * time.Second):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(result))
	}))
	t.Cleanup(be.Close)
	gw := StartGateway(t, asyncEnv(be.URL, t.TempDir()))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", gw.URL+"/reports/q3", strings.NewReader("payload"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("S7PAsyncMode", "true")
	req.Header.Set("X-UserProfile", "u1")
	client := &http.Client{Timeout: 30 * time.Second} // follows the 303, as azcore's default client does
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusAccepted {
		resp.Body.Close()
		t.Fatalf("status = %d; want 202", resp.StatusCode)
	}
	pl := runtime.NewPipeline("gatewaytest", "v0.0.0", runtime.PipelineOptions{}, &policy.ClientOptions{
		Transport: client,
		Retry:     policy.RetryOptions{MaxRetries: -1}, // a retried poll would hide a wrong answer
	})
	poller, err := runtime.NewPoller[json.RawMessage](resp, pl, nil)
	if err != nil {
		t.Fatalf("NewPoller: %v", err)
	}
	if poller.Done() {
		t.Fatal("the poller takes the 202 as done")
	}
	start := time.Now()
	got, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: time.Second})
	if err != nil {
		t.Fatalf("PollUntilDone: %v", err)
	}
	if !bytes.Equal(got, []byte(result)) {
		t.Errorf("poller result = %s; want the backend's body %s", got, result)
	}
	if took := time.Since(start); took < 3*time.Second {
		t.Errorf("the poller finished after %v; want it to wait for the 4 s backend", took)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("backend calls = %d; want 1", n)
	}
}

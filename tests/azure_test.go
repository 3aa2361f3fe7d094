package tests

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"

	"fngateway/infra/azure"
	"fngateway/internal/emulators"
)

func azureEnv(hosts, conn string) map[string]string {
	return map[string]string{
		"Hosts":               hosts,
		"AsyncModeEnabled":    "true",
		"AsyncTriggerTimeout": "300",
		"UserProfiles":        asyncProfile,
		"AsyncStore":          "azure",
		"AsyncQueue":          "e2e-continuations",
		"AzureWebJobsStorage": conn,
		// Results are answered 303 to their SAS URL.
		"AsyncInlineResultBytes": "1",
	}
}

// TestAsyncAzurite runs the async flow through real Blob and Queue services
// (Azurite): 202, status, 303 to a SAS URL, the blobs, a continuation
// message delivered twice, and a hand-off while the storage is down.
func TestAsyncAzurite(t *testing.T) {
	t.Parallel()
	az := emulators.StartAzurite(t)
	// The backend holds the work until the test has the 202 and has
	// queued the duplicate; /reports/down is never released.
	var held releases
	be := newHeldBackend(t, 1500*time.Millisecond, held.hold)
	gw := StartGateway(t, azureEnv(be.URL, az.ConnectionString()))

	_, acc, took := submitAsync(t, gw.URL, "/reports/azure", nil)
	// How soon after the trigger: BenchmarkAsyncHandoff/store=azurite.
	if took < 300*time.Millisecond || took > 300*time.Millisecond+loadMargin {
		t.Errorf("202 after %v; want after the 300 ms trigger", took)
	}
	// A SAS dies with its key, and a user-delegation SAS within 7 days:
	// the 202 hands out gateway result URLs.
	if !strings.HasPrefix(acc.DataBlobURI, gw.URL+"/_gateway/async/"+acc.ID+"/data?sig=") {
		t.Errorf("data URI %q: want a gateway result URL on %s", acc.DataBlobURI, gw.URL)
	}

	// The queue delivers the continuation twice while the in-flight
	// attempt still runs: the duplicate must not produce a second call or
	// a second result.
	acct, err := azure.NewAccount(azure.Config{ConnectionString: az.ConnectionString()})
	if err != nil {
		t.Fatal(err)
	}
	q, err := acct.Queue("e2e-continuations")
	if err != nil {
		t.Fatal(err)
	}
	dup := []byte(`{"v":1,"id":"` + acc.ID + `"}`)
	ctx := context.Background()
	if err := q.Enqueue(ctx, dup, 0); err != nil {
		t.Fatal(err)
	}
	held.release("/reports/azure")

	loc, _ := waitDone(t, acc.StatusURI, 1500*time.Millisecond+loadMargin) // the backend's delay
	resp, data, _ := Do(t, "GET", loc, nil, "")
	if resp.StatusCode != 200 || string(data) != "report for /reports/azure: payload-123" {
		t.Errorf("data blob via SAS = %d %q", resp.StatusCode, data)
	}
	resp, hb, hloc := readResultURI(t, acc.HeaderBlobURI)
	if !strings.HasPrefix(hloc, az.BlobEndpoint()) || !strings.Contains(hloc, "sig=") {
		t.Errorf("header URI redirected to %q: want a SAS URL on the blob service %s", hloc, az.BlobEndpoint())
	}
	var h headerBlob
	if resp.StatusCode != 200 || json.Unmarshal(hb, &h) != nil || h.Status != 201 || h.ID != acc.ID {
		t.Fatalf("header blob = %d %s", resp.StatusCode, hb)
	}

	// A duplicate after completion is acknowledged and changes nothing.
	// (Messages delayed to the in-flight lease's end may still wait in the
	// queue: the count returns to what it was, not to zero.)
	before := queueCount(t, az.ConnectionString(), "e2e-continuations")
	if err := q.Enqueue(ctx, dup, 0); err != nil {
		t.Fatal(err)
	}
	waitQueueCount(t, az.ConnectionString(), "e2e-continuations", before)
	_, hb2, _ := readResultURI(t, acc.HeaderBlobURI)
	if string(hb2) != string(hb) {
		t.Errorf("the header blob changed after a duplicate delivery:\n%s\n%s", hb, hb2)
	}
	if got := be.total.Load(); got != 1 {
		t.Errorf("backend calls = %d; want 1", got)
	}

	// A tampered SAS is refused by the blob service itself.
	u, _ := url.Parse(loc)
	qs := u.Query()
	sig := qs.Get("sig")
	qs.Set("sig", "A"+sig[1:])
	if sig[0] == 'A' {
		qs.Set("sig", "B"+sig[1:])
	}
	u.RawQuery = qs.Encode()
	if resp, _, _ := Do(t, "GET", u.String(), nil, ""); resp.StatusCode != 403 {
		t.Errorf("tampered SAS: %d; want 403", resp.StatusCode)
	}

	t.Run("storage down: 503 AsyncUnavailable, no 202", func(t *testing.T) {
		before, cancelledBefore := be.total.Load(), be.cancelled.Load()
		az.Stop()
		defer az.Start(t)
		resp, body, took := Do(t, "POST", gw.URL+"/reports/down",
			map[string]string{"S7PAsyncMode": "true", "X-UserProfile": "u1"}, "payload")
		if resp.StatusCode != 503 {
			t.Fatalf("status = %d; want 503 (body %s)", resp.StatusCode, body)
		}
		d := decodeError(t, resp, body)
		if d.Error.Code != "AsyncUnavailable" {
			t.Errorf("code = %q; want AsyncUnavailable", d.Error.Code)
		}
		if resp.Header.Get("Location") != "" || resp.Header.Get("X-Data-Blob-Uri") != "" {
			t.Errorf("a 503 carries async URIs: %v", resp.Header)
		}
		if took > loadMargin {
			t.Errorf("503 after %v; want a quick answer", took)
		}
		if be.total.Load() != before+1 {
			t.Errorf("backend calls = %d; want %d", be.total.Load(), before+1)
		}
		// The in-flight attempt was cancelled, not left running: the
		// backend, which holds /reports/down for ever, saw its request's
		// context end (the connection closed).
		waitFor(t, loadMargin, "the backend seeing its request cancelled", func() bool { return be.cancelled.Load() == cancelledBefore+1 })
	})
}

// createQueues creates the named queues on the account of conn, as
// terraform/azure creates the profiles' notification queues: on the
// Functions host the handler only sends to them (docs/terraform.md#inputs-at-a-glance).
func createQueues(tb testing.TB, conn string, names ...string) {
	tb.Helper()
	for _, name := range names {
		qc, err := azqueue.NewQueueClientFromConnectionString(conn, name, nil)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := qc.Create(context.Background(), nil); err != nil {
			tb.Fatalf("create queue %s: %v", name, err)
		}
	}
}

func queueCount(tb testing.TB, conn, name string) int64 {
	tb.Helper()
	qc, err := azqueue.NewQueueClientFromConnectionString(conn, name, nil)
	if err != nil {
		tb.Fatal(err)
	}
	props, err := qc.GetProperties(context.Background(), nil)
	if err != nil || props.ApproximateMessagesCount == nil {
		tb.Fatalf("queue properties: %v", err)
	}
	return *props.ApproximateMessagesCount
}

// waitQueueCount waits until the queue holds want messages, visible or
// hidden: the gateway's worker has received and completed the others.
func waitQueueCount(tb testing.TB, conn, name string, want int64) {
	tb.Helper()
	deadline := time.Now().Add(loadMargin) // the worker receives at once
	for time.Now().Before(deadline) {
		if queueCount(tb, conn, name) == want {
			return
		}
		time.Sleep(50 * time.Millisecond) // polling with a deadline
	}
	tb.Fatalf("the queue did not return to %d messages within %v", want, loadMargin)
}

package tests

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"fngateway/adapters/httpapi"
	"fngateway/internal/emulators"
)

// saysNothingInside fails when body names any of inside: a store's
// directory or URL, an account, a key, a queue.
func saysNothingInside(tb testing.TB, what string, status int, body []byte, inside []string) {
	tb.Helper()
	for _, s := range inside {
		if s != "" && strings.Contains(string(body), s) {
			tb.Errorf("%s: %d %s names %q; want nothing of the inside", what, status, body, s)
		}
	}
}

// TestClientErrorsSayNothingInside drives every error a client can cause
// with the store down — status URIs, operation URIs, cancel, result URLs,
// the async hand-off (503 AsyncUnavailable) and the Azure POST
// /continuation path — and checks that no answer names the store's
// directory, URL, account, key or queue; and that 50 bad 60 KB bodies on
// /continuation leave a bounded log (issue 21).
func TestClientErrorsSayNothingInside(t *testing.T) {
	t.Parallel()
	t.Run("file store", func(t *testing.T) {
		dir := t.TempDir()
		be := newSlowBackend(t, time.Hour)
		gw := StartGateway(t, asyncEnv(be.URL, dir))
		_, acc, _ := submitAsync(t, gw.URL, "/r", nil)
		inside := []string{dir, "records/"}

		// A result URL with a bad signature, with the store still up.
		resp, body, _ := Do(t, "GET", gw.URL+"/_gateway/blobs/u1-results/x?se=1&sig=bad", nil, "")
		if resp.StatusCode < 400 {
			t.Errorf("bad result URL: %d; want an error", resp.StatusCode)
		}
		saysNothingInside(t, "bad result URL", resp.StatusCode, body, inside)

		// The store goes down: its directory is now a file.
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dir, []byte("not a directory"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ method, url string }{
			{"GET", acc.StatusURI},
			{"GET", acc.OperationURI},
			{"DELETE", acc.StatusURI},
			{"GET", acc.DataBlobURI},
			{"GET", gw.URL + "/_gateway/async/not-an-id"},
		} {
			resp, body, _ := Do(t, c.method, c.url, nil, "")
			if resp.StatusCode < 400 {
				t.Errorf("%s %s with the store down: %d; want an error", c.method, c.url, resp.StatusCode)
			}
			saysNothingInside(t, c.method+" "+c.url, resp.StatusCode, body, inside)
		}
		resp, body, _ = Do(t, "POST", gw.URL+"/r", map[string]string{"S7PAsyncMode": "true", "X-UserProfile": "u1"}, "payload")
		if ed := decodeError(t, resp, body); resp.StatusCode != 503 || ed.Error.Code != "AsyncUnavailable" {
			t.Errorf("hand-off with the store down: %d %s; want 503 AsyncUnavailable", resp.StatusCode, body)
		}
		saysNothingInside(t, "hand-off", resp.StatusCode, body, inside)
	})

	t.Run("azure continuation", func(t *testing.T) {
		az := emulators.StartAzurite(t)
		be := newSlowBackend(t, time.Hour)
		g := StartAzureHandler(t, map[string]string{
			"Hosts":               be.URL,
			"AsyncModeEnabled":    "true",
			"AsyncTriggerTimeout": "300",
			"UserProfiles":        asyncProfile,
			"AsyncStore":          "azure",
			"AzureWebJobsStorage": az.ConnectionString(),
		})
		resp, body, _ := Forward(t, g, "POST", "/r", map[string]string{"S7PAsyncMode": "true", "X-UserProfile": "u1"}, "payload")
		if resp.StatusCode != 202 {
			t.Fatalf("submit: %d %s; want 202", resp.StatusCode, body)
		}
		var acc acceptedDoc
		if err := json.Unmarshal(body, &acc); err != nil {
			t.Fatal(err)
		}
		inside := []string{
			strings.TrimPrefix(strings.SplitN(az.BlobEndpoint(), "/devstore", 2)[0], "http://"),
			strings.TrimPrefix(strings.SplitN(az.QueueEndpoint(), "/devstore", 2)[0], "http://"),
			emulators.AzuriteAccountName, emulators.AzuriteAccountKey, "gateway-continuations", "records/",
		}
		az.Stop() // the store is down

		// A client's POST /continuation naming the request.
		msg := `{"v":1,"id":"` + acc.ID + `"}`
		payload, _ := json.Marshal(map[string]any{"Data": map[string]any{"message": msg}, "Metadata": map[string]any{"DequeueCount": 1, "Id": "m1"}})
		resp, body, _ = Do(t, "POST", g.URL+"/continuation", map[string]string{"Content-Type": "application/json"}, string(payload))
		if resp.StatusCode != 503 {
			t.Errorf("POST /continuation with the store down: %d %s; want 503", resp.StatusCode, body)
		}
		saysNothingInside(t, "POST /continuation", resp.StatusCode, body, inside)
		resp, body, _ = Forward(t, g, "GET", strings.TrimPrefix(acc.StatusURI, g.URL), nil, "")
		saysNothingInside(t, "status URI", resp.StatusCode, body, inside)
		resp, body, _ = Forward(t, g, "POST", "/r", map[string]string{"S7PAsyncMode": "true", "X-UserProfile": "u1"}, "payload")
		if resp.StatusCode != 503 {
			t.Errorf("hand-off with the store down: %d %s; want 503 AsyncUnavailable", resp.StatusCode, body)
		}
		saysNothingInside(t, "hand-off", resp.StatusCode, body, inside)

		// 50 bad 60 KB bodies: each answered 400, the log bounded in size
		// and rate: at most the burst plus the rate for as long as they
		// took (a loaded machine takes longer, and the bucket refills).
		before := len(g.logs.Lines())
		bad := strings.Repeat("x", 60<<10)
		const sent = 50
		start := time.Now()
		for i := range sent {
			resp, body, _ := Do(t, "POST", g.URL+"/continuation", map[string]string{"Content-Type": "application/json"}, bad)
			if resp.StatusCode != 400 {
				t.Fatalf("bad body %d: %d %s; want 400", i, resp.StatusCode, body)
			}
			if len(body) > 2<<10 {
				t.Errorf("bad body %d: answer of %d bytes; want a short one", i, len(body))
			}
		}
		took := time.Since(start)
		lines := g.logs.Lines()[before:]
		total, logged := 0, 0
		for _, l := range lines {
			total += len(l)
			if strings.Contains(l, `"msg":"undecodable continuation invocation"`) {
				logged++
			}
			if len(l) > 4<<10 {
				t.Errorf("a log line of %d bytes: %.200s…; want each bounded", len(l), l)
			}
		}
		allowed := min(sent, httpapi.DefaultClientLogBurst+int(took.Seconds()*httpapi.DefaultClientLogRate))
		t.Logf("%d bad 60 KB bodies in %v: %d lines for them (the rate allows %d), %d log lines, %d bytes in all", sent, took, logged, allowed, len(lines), total)
		if logged == 0 || logged > allowed || total > 64<<10 {
			t.Errorf("%d bad bodies in %v: %d lines for them, %d bytes logged; want 1 to %d lines (burst %d, then %d a second) and at most 64 KiB",
				sent, took, logged, total, allowed, httpapi.DefaultClientLogBurst, httpapi.DefaultClientLogRate)
		}
		if n, _ := getStats(t, g)["client_logs_dropped"].(float64); int(n) < sent-allowed {
			t.Errorf("stats client_logs_dropped = %v; want the %d lines over the rate counted", n, sent-allowed)
		}
	})
}

package tests

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"fngateway/core/async"
	"fngateway/infra/azure"
	"fngateway/internal/emulators"
	"fngateway/internal/testutil"
)

// The tests below drive the binary exactly as the Azure Functions host
// drives a custom handler: it starts the process with
// FUNCTIONS_CUSTOMHANDLER_PORT and FUNCTIONS_APP_ROOT_PATH (here the
// repository's functions/ directory, the app as deployed), pings GET /,
// forwards each client request of the HTTP-triggered "gateway" function
// on its own path with the invocation headers added
// (enableForwardingHttpRequest), and POSTs /continuation with the queue
// trigger's payload for each message of gateway-continuations, deleting the
// message on a 2xx.

// freePort returns a loopback port nothing listens on.
func freePort(tb testing.TB) string {
	tb.Helper()
	_, port, _ := net.SplitHostPort(testutil.RefusedAddr(tb))
	return port
}

func appRoot(tb testing.TB) string {
	tb.Helper()
	root, err := filepath.Abs(filepath.Join("..", "functions"))
	if err != nil {
		tb.Fatal(err)
	}
	return root
}

// StartAzureHandler starts the binary as the Functions host starts its
// custom handler and waits until it listens on the given port.
func StartAzureHandler(tb testing.TB, env map[string]string) *Gateway {
	tb.Helper()
	env["FUNCTIONS_APP_ROOT_PATH"] = appRoot(tb)
	env["FUNCTIONS_WORKER_RUNTIME"] = "custom"
	// The port is free when freePort returns it, but another process (a
	// second make test on the machine) may take it before the handler
	// binds it: then the handler exits naming the port, and the host would
	// start it again; so does this, on another port, a few times.
	for try := 1; ; try++ {
		port := freePort(tb)
		env["FUNCTIONS_CUSTOMHANDLER_PORT"] = port
		g, err := tryStartBinary(tb, binary, env)
		if err != nil {
			if try < 5 && errors.Is(err, errExited) && strings.Contains(err.Error(), "address already in use") {
				tb.Logf("port %s was taken before the handler bound it; another port", port)
				continue
			}
			tb.Fatal(err)
		}
		if g.URL != "http://127.0.0.1:"+port {
			tb.Fatalf("the handler listens on %s; want 127.0.0.1:%s", g.URL, port)
		}
		return g
	}
}

func newInvocationID() string {
	var b [16]byte
	rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Forward sends a client request the way the host forwards it to the
// gateway function: same method, path and headers, plus the invocation
// headers.
func Forward(tb testing.TB, g *Gateway, method, path string, hdr map[string]string, body string) (*http.Response, []byte, time.Duration) {
	tb.Helper()
	h := map[string]string{
		"X-Azure-Functions-InvocationId": newInvocationID(),
		"X-Azure-Functions-HostVersion":  "4.1040.300.0",
		"User-Agent":                     "e2e-client Azure-Functions-Host/4.1040.300.0",
	}
	for k, v := range hdr {
		h[k] = v
	}
	return Do(tb, method, g.URL+path, h, body)
}

// invokeResponse is a custom handler's response payload.
type invokeResponse struct {
	Outputs     map[string]any `json:"Outputs"`
	Logs        []string       `json:"Logs"`
	ReturnValue any            `json:"ReturnValue"`
}

// DeliverContinuation invokes the continuation function as the queue
// trigger does, with the message text as a JSON string or, as the host may
// pass JSON text, as the object itself. It returns the status and checks
// the response payload.
func DeliverContinuation(tb testing.TB, g *Gateway, text string, asObject bool, dequeueCount int) int {
	tb.Helper()
	data := json.RawMessage(strconv.Quote(text))
	if asObject {
		data = json.RawMessage(text)
	}
	return deliver(tb, g, data, dequeueCount, time.Now())
}

// deliverContinuationAt is DeliverContinuation of a message text the queue
// received at inserted (the metadata's InsertionTime).
func deliverContinuationAt(tb testing.TB, g *Gateway, text string, dequeueCount int, inserted time.Time) int {
	tb.Helper()
	return deliver(tb, g, json.RawMessage(strconv.Quote(text)), dequeueCount, inserted)
}

func deliver(tb testing.TB, g *Gateway, data json.RawMessage, dequeueCount int, inserted time.Time) int {
	tb.Helper()
	now := time.Now().UTC()
	payload, err := json.Marshal(map[string]any{
		"Data": map[string]any{"message": data},
		"Metadata": map[string]any{
			"DequeueCount":    dequeueCount,
			"ExpirationTime":  now.Add(7 * 24 * time.Hour).Format(time.RFC3339),
			"Id":              newInvocationID(),
			"InsertionTime":   inserted.UTC().Format(time.RFC3339),
			"NextVisibleTime": now.Add(10 * time.Minute).Format(time.RFC3339),
			"PopReceipt":      "AgAAAAMAAAAAAAAAAgtnj8x+1QE=",
			"sys":             map[string]any{"MethodName": "continuation", "UtcNow": now.Format(time.RFC3339Nano), "RandGuid": newInvocationID()},
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	resp, body, _ := Forward(tb, g, "POST", "/continuation", map[string]string{"Content-Type": "application/json"}, string(payload))
	var ir invokeResponse
	if err := json.Unmarshal(body, &ir); err != nil || ir.Outputs == nil || len(ir.Logs) == 0 || ir.ReturnValue != nil {
		tb.Errorf("continuation answer %d %s: want the {Outputs:{},Logs:[…],ReturnValue:null} payload", resp.StatusCode, body)
	}
	return resp.StatusCode
}

// TestAzureFunctionsForwarding: the host's ping is answered by the handler
// itself; a forwarded request reaches the backend on its own path without
// the host's invocation headers; /continuation is the host's and never
// reaches a backend; with async off a continuation fails (non-2xx), so the
// queue keeps the message.
func TestAzureFunctionsForwarding(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	seen := make(chan *http.Request, 10)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		seen <- r
		fmt.Fprintf(w, "hello %s?%s", r.URL.Path, r.URL.RawQuery)
	}))
	defer be.Close()
	g := StartAzureHandler(t, map[string]string{"Hosts": be.URL, "AzureFunctionsJobHost__functionTimeout": "00:05:00"})

	resp, body, _ := Do(t, "GET", g.URL+"/", nil, "")
	if resp.StatusCode != 200 || calls.Load() != 0 {
		t.Errorf("ping = %d %s, backend calls %d; want 200 from the handler itself", resp.StatusCode, body, calls.Load())
	}
	resp, body, _ = Forward(t, g, "GET", "/api/hello?x=1", map[string]string{"X-Azure-Functions-InvocationId": "inv-e2e-1"}, "")
	if resp.StatusCode != 200 || string(body) != "hello /api/hello?x=1" {
		t.Errorf("forwarded = %d %q; want 200 from the backend", resp.StatusCode, body)
	}
	r := <-seen
	// A client's GET / comes with the invocation headers: it is forwarded.
	if resp, body, _ := Forward(t, g, "GET", "/", nil, ""); resp.StatusCode != 200 || string(body) != "hello /?" {
		t.Errorf("forwarded GET / = %d %q; want the backend's answer", resp.StatusCode, body)
	}
	<-seen
	for k := range r.Header {
		if strings.HasPrefix(strings.ToLower(k), "x-azure-functions-") {
			t.Errorf("the backend got the host's header %s", k)
		}
	}
	for _, m := range []string{"GET", "PUT"} {
		resp, body, _ = Forward(t, g, m, "/continuation", nil, "")
		if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" {
			t.Errorf("%s /continuation = %d %s; want 405, Allow: POST", m, resp.StatusCode, body)
		}
	}
	if got := DeliverContinuation(t, g, `{"v":1,"id":"0123456789abcdef0123456789abcdef"}`, false, 1); got/100 == 2 {
		t.Errorf("continuation with async off = %d; want a failure the queue retries", got)
	}
	// Bodies that are not the host's envelope fail with 400, logged.
	for name, body := range map[string]string{
		"not JSON":      "continue",
		"no Data":       `{"Metadata":{"DequeueCount":1}}`,
		"over 64 KiB":   `{"Data":{"message":"` + strings.Repeat("a", 70<<10) + `"}}`,
		"a number":      `{"Data":{"message":7}}`,
		"wrong binding": `{"Data":{"myQueueItem":"x"}}`,
	} {
		resp, out, _ := Forward(t, g, "POST", "/continuation", map[string]string{"Content-Type": "application/json"}, body)
		if resp.StatusCode != 400 || !strings.Contains(string(out), `"Logs":["bad continuation invocation`) {
			t.Errorf("%s: continuation = %d %.200s; want 400 with the reason in Logs", name, resp.StatusCode, out)
		}
	}
	g.WaitLog(t, loadMargin, func(m map[string]any) bool { return m["msg"] == "undecodable continuation invocation" })
	if calls.Load() != 2 {
		t.Errorf("backend calls = %d; want 2", calls.Load())
	}
	// The request's log line carries the host's invocation id.
	g.WaitLog(t, loadMargin, func(m map[string]any) bool {
		return m["msg"] == "request" && m["path"] == "/api/hello" && m["invocationId"] == "inv-e2e-1"
	})
	g.WaitLog(t, loadMargin, func(m map[string]any) bool {
		return m["msg"] == "azure functions host" && m["functionTimeout"] == "00:05:00" && m["httpLimitMs"] == float64(230000) && m["invocationLimitMs"] == float64(300000)
	})
}

// hangFirstBackend hangs its first calls until the gateway cancels them, and
// answers the others at once with a body naming the path and body.
type hangFirstBackend struct {
	*httptest.Server
	calls     atomic.Int64
	cancelled chan time.Duration
}

func newHangFirstBackend(tb testing.TB, hang int64) *hangFirstBackend {
	b := &hangFirstBackend{cancelled: make(chan time.Duration, hang)}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if b.calls.Add(1) <= hang {
			start := time.Now()
			select {
			case <-r.Context().Done():
				b.cancelled <- time.Since(start)
			case <-time.After(30 * time.Second):
			}
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(201)
		fmt.Fprintf(w, "done %s: %s", r.URL.Path, body)
	}))
	tb.Cleanup(b.Server.Close)
	return b
}

func (b *hangFirstBackend) waitCancelled(tb testing.TB, within time.Duration) time.Duration {
	tb.Helper()
	select {
	case d := <-b.cancelled:
		return d
	case <-time.After(within):
		tb.Fatal("the backend never saw its request cancelled")
	}
	return 0
}

// TestAzureFunctionsLimit504: with a functionTimeout of limitAnswer +
// loadMargin, a margin of loadMargin and a 60 s TTL, a hanging backend gives
// 504 FunctionLimit at the limit less the margin, before the host's limit,
// not a dropped connection, and the backend sees its request cancelled
// before that limit.
func TestAzureFunctionsLimit504(t *testing.T) {
	t.Parallel()
	be := newHangFirstBackend(t, 1)
	limit := limitAnswer + loadMargin
	_, margin := limitSettings()
	g := StartAzureHandler(t, map[string]string{"Hosts": be.URL, "FunctionLimitMarginMs": margin,
		"AzureFunctionsJobHost__functionTimeout": fmt.Sprintf("%02d:%02d:%02d", int(limit.Hours()), int(limit.Minutes())%60, int(limit.Seconds())%60)})
	resp, body, took := Forward(t, g, "GET", "/slow", map[string]string{"S7PTTL": "60"}, "")
	if resp.StatusCode != 504 {
		t.Fatalf("status = %d; want 504 (body %s)", resp.StatusCode, body)
	}
	if d := decodeError(t, resp, body); d.Error.Code != "FunctionLimit" {
		t.Errorf("code = %q; want FunctionLimit", d.Error.Code)
	}
	if took >= limit || took < limitAnswer-100*time.Millisecond {
		t.Errorf("504 after %v; want at about %v, before the %v limit", took, limitAnswer, limit)
	}
	if c := be.waitCancelled(t, limit); c >= limit {
		t.Errorf("the backend's request was cancelled after %v; want before the %v limit", c, limit)
	}
}

// TestAzureFunctionsAsync runs an async request end to end on the Azure
// host, against Azurite: 202 before the 25 s limit while the backend hangs
// (cancelled at the hand-off's checkpoint); the continuation message read
// from the queue and delivered as the queue trigger would, its invocation
// bounded by the same limit (the backend still hangs: checkpointed again,
// answered 200 before 25 s, a fresh message enqueued); that message
// delivered, the status URI's 303 to a SAS URL with the exact body; then
// the same message delivered again (DequeueCount 2, as an object), a
// malformed one and one for an unknown request: each answered as the queue
// needs, none adding a backend call or changing the result.
func TestAzureFunctionsAsync(t *testing.T) {
	t.Parallel()
	az := emulators.StartAzurite(t)
	createQueues(t, az.ConnectionString(), "u1-status") // asyncProfile's topic, as Terraform creates it
	be := newHangFirstBackend(t, 2)
	g := StartAzureHandler(t, map[string]string{
		"Hosts":               be.URL,
		"AsyncModeEnabled":    "true",
		"UserProfiles":        asyncProfile,
		"AsyncStore":          "azure",
		"AsyncTimeout":        "60000",
		"AzureWebJobsStorage": az.ConnectionString(),
		// The limit forces the hand-off 3 s in (25 s less a 22 s margin):
		// the margin is the room the hand-off's durable writes have, on a
		// loaded machine, before the host would kill the invocation.
		"AzureFunctionsJobHost__functionTimeout": "00:00:25",
		"FunctionLimitMarginMs":                  "22000",
		"AsyncInlineResultBytes":                 "1", // answered 303 to its SAS URL
	})

	resp, body, took := Forward(t, g, "POST", "/reports/az",
		map[string]string{"S7PAsyncMode": "true", "X-UserProfile": "u1", "S7PTTL": "60"}, "payload-az")
	if resp.StatusCode != 202 {
		t.Fatalf("status = %d; want 202 (body %s)", resp.StatusCode, body)
	}
	if took >= 25*time.Second || took < 3*time.Second {
		t.Errorf("202 after %v; want at the 25 s limit less the 22 s margin", took)
	}
	var acc acceptedDoc
	if err := json.Unmarshal(body, &acc); err != nil {
		t.Fatal(err)
	}
	be.waitCancelled(t, loadMargin)

	// A hand-off forced by the execution limit cancels the attempt in
	// flight: its continuation message is on the queue at once.
	acct, err := azure.NewAccount(azure.Config{ConnectionString: az.ConnectionString()})
	if err != nil {
		t.Fatal(err)
	}
	q, err := acct.Queue("gateway-continuations")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	receive := func() async.Message {
		t.Helper()
		deadline := time.Now().Add(loadMargin) // the message is queued at once
		for {
			msgs, err := q.Receive(ctx, 1, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) == 1 {
				if want := `{"v":1,"id":"` + acc.ID + `"}`; string(msgs[0].Body) != want {
					t.Errorf("message = %q; want %q", msgs[0].Body, want)
				}
				return msgs[0]
			}
			if time.Now().After(deadline) {
				t.Fatal("no continuation message on gateway-continuations within 10 s")
			}
			time.Sleep(100 * time.Millisecond) // polling the queue, as the trigger does
		}
	}
	// First delivery (the hand-off's message): the backend hangs again;
	// the invocation is cut before the 25 s limit, checkpointed, and settled.
	first := receive()
	start := time.Now()
	if got := DeliverContinuation(t, g, string(first.Body), false, first.DequeueCount); got != 200 {
		t.Fatalf("continuation = %d; want 200 (checkpointed)", got)
	}
	if took := time.Since(start); took >= 25*time.Second {
		t.Errorf("the continuation invocation took %v; want it answered before the 25 s limit", took)
	}
	be.waitCancelled(t, loadMargin)
	if err := q.Complete(ctx, first); err != nil { // the host deletes a settled message
		t.Fatal(err)
	}
	resp, body, _ = Do(t, "GET", acc.StatusURI, nil, "")
	var st struct {
		Status      string `json:"status"`
		Checkpoints int    `json:"checkpoints"`
	}
	if resp.StatusCode/100 != 2 || json.Unmarshal(body, &st) != nil || st.Checkpoints != 1 || st.Status == "succeeded" {
		t.Errorf("status = %d %s; want pending with 1 checkpoint", resp.StatusCode, body)
	}
	// The checkpoint's message: this time the backend answers.
	msg := receive()
	if got := DeliverContinuation(t, g, string(msg.Body), false, msg.DequeueCount); got != 200 {
		t.Fatalf("continuation = %d; want 200", got)
	}
	if err := q.Complete(ctx, msg); err != nil {
		t.Fatal(err)
	}

	loc, _ := waitDone(t, acc.StatusURI, loadMargin) // the continuation was delivered: only the writes remain
	resp, data, _ := Do(t, "GET", loc, nil, "")
	if resp.StatusCode != 200 || string(data) != "done /reports/az: payload-az" {
		t.Errorf("data via %s = %d %q; want the backend's exact body", loc, resp.StatusCode, data)
	}
	if !strings.HasPrefix(loc, az.BlobEndpoint()) || !strings.Contains(loc, "sig=") {
		t.Errorf("303 Location %q: want a SAS URL on %s", loc, az.BlobEndpoint())
	}
	_, hb, _ := readResultURI(t, acc.HeaderBlobURI)
	calls := be.calls.Load()
	if calls != 3 {
		t.Errorf("backend calls = %d; want 3 (the attempts cut at the hand-off and in the first continuation, the last)", calls)
	}

	cases := []struct {
		name     string
		text     string
		asObject bool
		dequeue  int
		ok       bool
	}{
		{"redelivered, as an object", string(msg.Body), true, 2, true},
		{"redelivered, as a string", string(msg.Body), false, 3, true},
		{"unknown request", `{"v":1,"id":"ffffffffffffffffffffffffffffffff"}`, false, 1, true},
		{"malformed id", `{"v":1,"id":"not-hex"}`, false, 1, false},
		{"not JSON", `continue please`, false, 4, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := DeliverContinuation(t, g, c.text, c.asObject, c.dequeue)
			if c.ok && got != 200 {
				t.Errorf("status = %d; want 200 (settled)", got)
			}
			if !c.ok && (got/100 == 2 || got >= 500) {
				t.Errorf("status = %d; want a 4xx failure the host retries, then poisons", got)
			}
		})
	}
	g.WaitLog(t, loadMargin, func(m map[string]any) bool {
		return m["msg"] == "undecodable continuation message" && m["dequeueCount"] == float64(4)
	})
	if got := be.calls.Load(); got != calls {
		t.Errorf("backend calls = %d after the redeliveries; want %d", got, calls)
	}
	if _, hb2, _ := readResultURI(t, acc.HeaderBlobURI); string(hb2) != string(hb) {
		t.Errorf("the header blob changed:\n%s\n%s", hb, hb2)
	}
	// The continuation that wrote the result logged its end, once, and
	// the redeliveries none.
	n := 0
	for _, m := range g.Logs() {
		if m["msg"] == "async request ended" && m["async"] == acc.ID {
			n++
			// The attempt cut by the hand-off is not counted; the one cut
			// by the first invocation's limit is.
			if m["state"] != "succeeded" || m["status"] != float64(201) || m["attempts"] != float64(calls-1) {
				t.Errorf("end line = %v; want succeeded, 201, %d attempts", m, calls-1)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d end lines for %s; want 1", n, acc.ID)
	}
	// Nothing new was enqueued by the redeliveries, and nothing waits.
	if n := queueCount(t, az.ConnectionString(), "gateway-continuations"); n != 0 {
		t.Errorf("queue holds %d messages; want 0", n)
	}
}

// TestAzureFunctionsBadSettings: a bad limit or an async setup the queue
// trigger cannot serve stops the start-up with one line naming the setting.
func TestAzureFunctionsBadSettings(t *testing.T) {
	t.Parallel()
	base := []string{"Hosts=http://127.0.0.1:1", "FUNCTIONS_APP_ROOT_PATH=" + appRoot(t)}
	tests := []struct {
		name string
		env  []string
		want string
	}{
		{"bad port", []string{"FUNCTIONS_CUSTOMHANDLER_PORT=http"}, `setting FUNCTIONS_CUSTOMHANDLER_PORT="http"`},
		{"bad functionTimeout", []string{"FUNCTIONS_CUSTOMHANDLER_PORT=7071", "AzureFunctionsJobHost__functionTimeout=5m"}, `setting AzureFunctionsJobHost__functionTimeout="5m": want a timespan`},
		{"unbounded on Consumption", []string{"FUNCTIONS_CUSTOMHANDLER_PORT=7071", "WEBSITE_SKU=Dynamic", "AzureFunctionsJobHost__functionTimeout=-1"}, `setting AzureFunctionsJobHost__functionTimeout="-1"`},
		{"FunctionTimeoutSecs past the host's", []string{"FUNCTIONS_CUSTOMHANDLER_PORT=7071", "AzureFunctionsJobHost__functionTimeout=00:00:30", "FunctionTimeoutSecs=60"}, `setting FunctionTimeoutSecs="60"`},
		{"async on the file store", []string{"FUNCTIONS_CUSTOMHANDLER_PORT=7071", "AzureFunctionsJobHost__functionTimeout=00:01:00", "AsyncModeEnabled=true"}, `setting AsyncStore="file:.gateway-data": want azure`},
		{"queue the trigger does not watch", []string{"FUNCTIONS_CUSTOMHANDLER_PORT=7071", "AzureFunctionsJobHost__functionTimeout=00:01:00", "AsyncModeEnabled=true", "AsyncStore=azure", "AsyncQueue=other", "AzureWebJobsStorage=UseDevelopmentStorage=true"}, `setting AsyncQueue="other": want the queue continuation/function.json is triggered by, "gateway-continuations"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(binary)
			cmd.Env = append(append(baseEnv(), base...), tt.env...)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Fatalf("exit = %v; want exit status 2 (output %q)", err, out)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tt.want) {
				t.Errorf("output = %q; want one line containing %q", out, tt.want)
			}
		})
	}
}

// BenchmarkAzureHandlerStart measures what a cold start costs the handler:
// from starting the process (built as make package-azure builds it) to the
// first forwarded request served on the custom-handler port. Run it with
// go test -run '^$' -bench AzureHandlerStart ./tests/
func BenchmarkAzureHandlerStart(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "handler")
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "../functions")
	build.Env = append(baseEnv(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building the handler: %v\n%s", err, out)
	}
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer be.Close()
	client := &http.Client{Timeout: 5 * time.Second}
	var ready time.Duration
	for b.Loop() {
		port := freePort(b)
		cmd := exec.Command(bin)
		cmd.Env = append(baseEnv(), "FUNCTIONS_CUSTOMHANDLER_PORT="+port, "Hosts="+be.URL,
			"AzureFunctionsJobHost__functionTimeout=00:05:00", "FUNCTIONS_APP_ROOT_PATH="+appRoot(b))
		start := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		deadline := start.Add(10 * time.Second)
		for {
			resp, err := client.Get("http://127.0.0.1:" + port + "/")
			if err == nil {
				resp.Body.Close()
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				b.Fatal("the handler did not answer the host's ping within 10 s")
			}
			time.Sleep(200 * time.Microsecond) // polling the port, as the host does
		}
		ready += time.Since(start)
		req, _ := http.NewRequest("GET", "http://127.0.0.1:"+port+"/first", nil)
		req.Header.Set("X-Azure-Functions-InvocationId", newInvocationID())
		resp, err := client.Do(req)
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("first request: %v", err)
		}
		resp.Body.Close()
		b.StopTimer()
		cmd.Process.Kill()
		cmd.Wait()
		b.StartTimer()
	}
	b.ReportMetric(float64(ready.Microseconds())/float64(b.N)/1000, "ms-to-ping/op")
}

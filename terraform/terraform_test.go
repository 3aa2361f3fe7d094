package terraform

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

// TestModules runs every check on both modules: what they write is read by
// the gateway, their defaults are its defaults, every setting has a variable,
// results outlive their requests and (AWS) the queue outlasts the function.
func TestModules(t *testing.T) {
	known := gatewaySettings()
	for _, sp := range []spec{azureSpec, awsSpec} {
		t.Run(sp.dir, func(t *testing.T) {
			m, err := loadModule(sp.dir)
			if err != nil {
				t.Fatal(err)
			}
			report(t, "settings the gateway reads", checkSettingsKnown(m, sp, known))
			report(t, "defaults are the gateway's", checkDefaults(m, known))
			report(t, "every setting has a variable", checkComplete(m, sp, known))
			report(t, "results outlive AsyncTTLSecs", checkLifecycle(m, sp))
			report(t, "defaults pass validation", checkOutcomes(m, sp, []outcome{{accept: true}}))
			if sp.dir == "aws" {
				report(t, "queue visibility", checkVisibility(m, sp))
			}
		})
	}
}

// TestWrittenSettings checks what each module writes with its defaults:
// only the host's settings and what differs from the gateway's defaults.
func TestWrittenSettings(t *testing.T) {
	tests := []struct {
		sp    spec
		given vars
		want  map[string]string // afterApply for a value known only after apply
	}{
		{azureSpec, nil, map[string]string{
			"Hosts": "https://backend.example", "AsyncStore": "azure", "AsyncQueue": "gateway-continuations",
			"AzureWebJobsStorage__accountName": afterApply, "AzureWebJobsStorage__blobServiceUri": afterApply, "AzureWebJobsStorage__queueServiceUri": afterApply,
			"AzureWebJobsStorage__credential": "managedidentity", "AzureFunctionsJobHost__functionTimeout": "00:30:00",
			"InstanceMemoryMB": "2048",
		}},
		// The instance's size reaches the gateway (its soft memory limit).
		{azureSpec, vars{"instance_memory_in_mb": cty.NumberIntVal(512)}, map[string]string{
			"Hosts": "https://backend.example", "AsyncStore": "azure", "AsyncQueue": "gateway-continuations",
			"AzureWebJobsStorage__accountName": afterApply, "AzureWebJobsStorage__blobServiceUri": afterApply, "AzureWebJobsStorage__queueServiceUri": afterApply,
			"AzureWebJobsStorage__credential": "managedidentity", "AzureFunctionsJobHost__functionTimeout": "00:30:00",
			"InstanceMemoryMB": "512",
		}},
		{azureSpec, vars{"function_timeout": cty.NumberIntVal(3599), "timeout": cty.NumberIntVal(60000), "async_mode_enabled": cty.True}, map[string]string{
			"Hosts": "https://backend.example", "AsyncStore": "azure", "AsyncQueue": "gateway-continuations",
			"AzureWebJobsStorage__accountName": afterApply, "AzureWebJobsStorage__blobServiceUri": afterApply, "AzureWebJobsStorage__queueServiceUri": afterApply,
			"AzureWebJobsStorage__credential": "managedidentity", "AzureFunctionsJobHost__functionTimeout": "00:59:59",
			"Timeout": "60000", "AsyncModeEnabled": "true", "InstanceMemoryMB": "2048",
		}},
		{awsSpec, nil, map[string]string{"Hosts": "https://backend.example", "AsyncStore": afterApply, "AsyncQueue": afterApply, "EmfNamespace": "FnGateway"}},
		{awsSpec, vars{"invoke_mode": cty.StringVal("RESPONSE_STREAM"), "default_ttl_secs": cty.NumberFloatVal(2.5)}, map[string]string{
			"Hosts": "https://backend.example", "AsyncStore": afterApply, "AsyncQueue": afterApply, "InvokeMode": "RESPONSE_STREAM", "DefaultTTLSecs": "2.5",
			"EmfNamespace": "FnGateway",
		}},
		{awsSpec, vars{"emf_namespace": cty.NullVal(cty.String), "otel_exporter_otlp_endpoint": cty.StringVal("https://collector.example:4318")}, map[string]string{
			"Hosts": "https://backend.example", "AsyncStore": afterApply, "AsyncQueue": afterApply,
			"OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector.example:4318", "OTEL_SERVICE_NAME": "fngw",
		}},
		{azureSpec, vars{"otel_exporter_otlp_endpoint": cty.StringVal("https://collector.example:4318")}, map[string]string{
			"Hosts": "https://backend.example", "AsyncStore": "azure", "AsyncQueue": "gateway-continuations",
			"AzureWebJobsStorage__accountName": afterApply, "AzureWebJobsStorage__blobServiceUri": afterApply, "AzureWebJobsStorage__queueServiceUri": afterApply,
			"AzureWebJobsStorage__credential": "managedidentity", "AzureFunctionsJobHost__functionTimeout": "00:30:00",
			"OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector.example:4318", "OTEL_SERVICE_NAME": "fngw",
			"AzureFunctionsJobHost__telemetryMode": "OpenTelemetry", "InstanceMemoryMB": "2048",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.sp.dir+" "+describe(tt.given), func(t *testing.T) {
			m, err := loadModule(tt.sp.dir)
			if err != nil {
				t.Fatal(err)
			}
			got, err := writtenSettings(m, tt.sp, tt.given)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := keys(got), keys(stringsToValues(tt.want)); !reflect.DeepEqual(g, w) {
				t.Fatalf("settings written: got %q, want %q", g, w)
			}
			for k, want := range tt.want {
				if want == afterApply {
					if got[k].IsKnown() {
						t.Errorf("%s: got %#v, want a value known only after apply", k, got[k])
					}
					continue
				}
				if s, _ := text(got[k]); s != want {
					t.Errorf("%s: got %q, want %q", k, s, want)
				}
			}
		})
	}
}

// afterApply stands for a value known only after apply.
const afterApply = "(known after apply)"

// TestNesting checks that the modules refuse budgets that cannot nest
// under the execution limit, at the exact edge.
func TestNesting(t *testing.T) {
	n := cty.NumberIntVal
	route := func(timeoutMs int64) cty.Value {
		return cty.ListVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{"prefix": cty.StringVal("/api"), "timeoutMs": n(timeoutMs)})})
	}
	azure := []outcome{
		// HTTP invocations: min(function_timeout, 200 s) less the margin
		// (the load balancer's 230 s, counted from 30 s before the
		// handler sees the request).
		{vars{"timeout": n(199000)}, true},
		{vars{"timeout": n(199001)}, false},
		{vars{"function_timeout": n(60), "timeout": n(59000)}, true},
		{vars{"function_timeout": n(60), "timeout": n(59001)}, false},
		{vars{"function_timeout": n(60), "timeout": n(58000), "function_limit_margin_ms": n(2000)}, true},
		{vars{"function_timeout": n(60), "timeout": n(58001), "function_limit_margin_ms": n(2000)}, false},
		{vars{"routes": route(199000)}, true},
		{vars{"routes": route(199001)}, false},
		{vars{"async_mode_enabled": cty.True, "async_trigger_timeout": n(199000)}, true},
		{vars{"async_mode_enabled": cty.True, "async_trigger_timeout": n(199001)}, false},
		{vars{"function_timeout": n(1), "function_limit_margin_ms": n(1000)}, false},
		// Flex Consumption: at most the 60 minutes it guarantees.
		{vars{"function_timeout": n(3600)}, true},
		{vars{"function_timeout": n(3601)}, false},
		{vars{"function_timeout": n(0)}, false},
		{vars{"function_timeout_secs": n(1800)}, true},
		{vars{"function_timeout_secs": n(1801)}, false},
		// AsyncTTLSecs must leave room for the trigger timeout.
		{vars{"async_mode_enabled": cty.True, "async_ttl_secs": n(10)}, true},
		{vars{"async_mode_enabled": cty.True, "async_ttl_secs": cty.NumberFloatVal(9.999)}, false},
		{vars{"max_attempts": n(0)}, false},
		{vars{"timeout": cty.NumberFloatVal(1.5)}, false},
		{vars{"hosts": cty.ListVal([]cty.Value{cty.StringVal("ftp://b")})}, false},
		{vars{"user_profiles": cty.StringVal(`[{"userId":"a"}]`)}, true},
		{vars{"user_profiles": cty.StringVal(`{"userId":"a"}`)}, false},
		{vars{"user_profiles": cty.StringVal(` [{"userId":"a","async-config":{"enabled":true}},{"userId":"b","x":1}]`)}, true},
		{vars{"user_profiles": cty.StringVal(`[{"userId":"a"`)}, false},
		{vars{"user_profiles": cty.StringVal("file:profiles.json")}, true},
		// Flex Consumption's instance sizes, as the description says.
		{vars{"instance_memory_in_mb": n(512)}, true},
		{vars{"instance_memory_in_mb": n(4096)}, true},
		{vars{"instance_memory_in_mb": n(1024)}, false},
		// The body budgets fit under the gateway's soft limit, 80 % of the instance.
		{vars{"instance_memory_in_mb": n(512), "max_buffered_bytes": n(429496729)}, true},
		{vars{"instance_memory_in_mb": n(512), "max_buffered_bytes": n(429496730)}, false},
		{vars{"instance_memory_in_mb": n(512), "max_retry_body_bytes": n(429496729), "max_buffered_bytes": n(429496729)}, true},
		{vars{"instance_memory_in_mb": n(512), "max_retry_body_bytes": n(429496730)}, false},
	}
	aws := []outcome{
		{vars{"lambda_timeout": n(60), "timeout": n(59000)}, true},
		{vars{"lambda_timeout": n(60), "timeout": n(59001)}, false},
		{vars{"lambda_timeout": n(900), "timeout": n(899000)}, true},
		{vars{"lambda_timeout": n(901)}, false},
		{vars{"lambda_timeout": n(60), "routes": route(59001)}, false},
		{vars{"async_mode_enabled": cty.True, "lambda_timeout": n(5), "async_trigger_timeout": n(4000)}, true},
		{vars{"async_mode_enabled": cty.True, "lambda_timeout": n(5), "async_trigger_timeout": n(4001)}, false},
		{vars{"lambda_timeout": n(60), "queue_visibility_timeout_secs": n(360)}, true},
		{vars{"lambda_timeout": n(60), "queue_visibility_timeout_secs": n(359)}, false},
		{vars{"function_timeout_secs": n(61)}, false},
		{vars{"invoke_mode": cty.StringVal("STREAM")}, false},
		{vars{"architecture": cty.StringVal("x86_64")}, true},
		{vars{"architecture": cty.StringVal("arm")}, false},
		// The queue's concurrency fits inside the function's reserved one.
		{vars{"reserved_concurrent_executions": n(10)}, true},
		{vars{"reserved_concurrent_executions": n(9)}, false},
		{vars{"reserved_concurrent_executions": n(2), "continuation_max_concurrency": n(2)}, true},
		{vars{"continuation_max_concurrency": n(1)}, false},
		{vars{"continuation_max_concurrency": n(1000)}, true},
		{vars{"continuation_max_concurrency": n(1001)}, false},
		// Notification topics are created by the module: topics must be SNS
		// FIFO topic names (1-256 characters, .fifo included).
		{vars{"user_profiles": cty.StringVal(`[{"userId":"a","async-config":{"topic":"gw-events.fifo"}}]`)}, true},
		{vars{"user_profiles": cty.StringVal(`[{"userId":"a","async-config":{"topic":"` + strings.Repeat("x", 251) + `.fifo"}}]`)}, true},
		{vars{"user_profiles": cty.StringVal(`[{"userId":"a","async-config":{"topic":"` + strings.Repeat("x", 252) + `.fifo"}}]`)}, false},
		{vars{"user_profiles": cty.StringVal(`[{"userId":"a","async-config":{"topic":"gw-events"}}]`)}, false},
		{vars{"user_profiles": cty.StringVal(`[{"userId":"a","async-config":{"topic":"gw.events.fifo"}}]`)}, false},
		{vars{"notification_topics": cty.ListVal([]cty.Value{cty.StringVal("gw-extra.fifo")})}, true},
		{vars{"notification_topics": cty.ListVal([]cty.Value{cty.StringVal("gw-extra")})}, false},
		{vars{"notification_topics": cty.ListVal([]cty.Value{cty.StringVal("gw extra.fifo")})}, false},
		{vars{"user_profiles": cty.StringVal(`[{"userId":"a","async-config":{"enabled":true}}]`)}, true},
		// The body budgets fit under the gateway's soft limit, 80 % of memory_size;
		// max_buffered_bytes left at its default is lowered by the gateway.
		{vars{"memory_size": n(128)}, true},
		{vars{"memory_size": n(128), "max_buffered_bytes": n(107374182)}, true},
		{vars{"memory_size": n(128), "max_buffered_bytes": n(107374183)}, false},
		{vars{"memory_size": n(128), "max_retry_body_bytes": n(107374183)}, false},
	}
	for _, c := range []struct {
		sp    spec
		cases []outcome
	}{{azureSpec, azure}, {awsSpec, aws}} {
		t.Run(c.sp.dir, func(t *testing.T) {
			m, err := loadModule(c.sp.dir)
			if err != nil {
				t.Fatal(err)
			}
			report(t, "nesting", checkOutcomes(m, c.sp, c.cases))
		})
	}
}

// TestAzureStorage checks the Azure module's queues and containers: the
// continuation queue is the one the gateway and function.json use, its
// -poison queue exists, the profiles' containers and topics are created, and
// the expiry rule covers every result container but not the deployment one.
func TestAzureStorage(t *testing.T) {
	m, err := loadModule("azure")
	if err != nil {
		t.Fatal(err)
	}
	profiles := `[{"userId":"a","async-config":{"enabled":true,"containername":"batch-results","topic":"batch-events"}},{"userId":"b"}]`
	e, err := m.eval(azureSpec.sample.with(vars{"user_profiles": cty.StringVal(profiles), "result_containers": cty.ListVal([]cty.Value{cty.StringVal("extra-results")})}))
	if err != nil {
		t.Fatal(err)
	}
	str := func(v cty.Value, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		s, _ := text(v)
		return s
	}
	list := func(v cty.Value, err error) []string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for it := v.ElementIterator(); it.Next(); {
			_, ev := it.Element()
			s, _ := text(ev)
			out = append(out, s)
		}
		sort.Strings(out)
		return out
	}
	queue := str(e.attr("azurerm_storage_queue.continuations", "name"))
	if queue != "gateway-continuations" {
		t.Errorf("continuation queue %q, want gateway-continuations (function.json's literal and the AsyncQueue default)", queue)
	}
	if got := str(e.attr("azurerm_storage_queue.poison", "name")); got != queue+"-poison" {
		t.Errorf("poison queue %q, want %q", got, queue+"-poison")
	}
	written, err := writtenSettings(m, azureSpec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := text(written["AsyncQueue"]); got != queue {
		t.Errorf("AsyncQueue=%q, want the queue the module creates, %q", got, queue)
	}
	if got, want := list(e.localValue("result_containers")), []string{"batch-results", "extra-results", "gateway", "gateway-results"}; !reflect.DeepEqual(got, want) {
		t.Errorf("result containers %q, want %q", got, want)
	}
	if got, want := list(e.localValue("notification_queues")), []string{"batch-events"}; !reflect.DeepEqual(got, want) {
		t.Errorf("notification queues %q, want %q", got, want)
	}
	prefixes := list(e.attr("azurerm_storage_management_policy.results", "rule", "filters", "prefix_match"))
	if want := []string{"batch-results/", "extra-results/", "gateway-results/", "gateway/"}; !reflect.DeepEqual(prefixes, want) {
		t.Errorf("expiry rule prefixes %q, want %q", prefixes, want)
	}
	deploy := str(e.attr("azurerm_storage_container.deploy", "name"))
	for _, p := range prefixes {
		if strings.HasPrefix(deploy+"/", p) {
			t.Errorf("expiry rule prefix %q would delete the deployment package in %q", p, deploy)
		}
	}
}

// TestCheckersFail feeds a module with one mistake of each kind to the same
// checkers: each must report it.
func TestCheckersFail(t *testing.T) {
	const bad = `
variable "hosts" {
  type = list(string)
}
variable "default_ttl_secs" {
  type    = number
  default = 30
}
variable "max_attempts" {
  type    = number
  default = 3
}
variable "async_ttl_secs" {
  type    = number
  default = 86400
}
variable "lambda_timeout" {
  type    = number
  default = 60
}
variable "timeout" {
  type    = number
  default = 1200000
}
locals {
  gateway_settings = {
    Hosts          = join(",", var.hosts)
    DefaultTTLSecs = tostring(var.default_ttl_secs)
    DefaultTtlSec  = "5"
    MaxAttempts    = tostring(var.max_attempts)
    AsyncTTLSecs   = tostring(var.async_ttl_secs)
  }
  gateway_defaults = { Timeout = "1200" }
}
resource "aws_sqs_queue" "continuations" {
  visibility_timeout_seconds = 5 * var.lambda_timeout
}
resource "aws_s3_bucket_lifecycle_configuration" "results" {
  rule {
    expiration {
      days = floor(var.async_ttl_secs / 86400)
    }
  }
}
resource "aws_lambda_function" "gateway" {
  timeout = var.lambda_timeout
  environment {
    variables = merge(local.gateway_settings, { AWS_REGION_OVERRIDE = "x" })
  }
  lifecycle {
    precondition {
      condition     = var.timeout <= var.lambda_timeout * 1000
      error_message = "timeout too long."
    }
  }
}
`
	m, err := parseModule("bad", map[string][]byte{"main.tf": []byte(bad)})
	if err != nil {
		t.Fatal(err)
	}
	sp := spec{
		settingsAt:    awsSpec.settingsAt,
		sample:        sampleHosts,
		limitAt:       "aws_lambda_function.gateway",
		lifecycleDays: awsSpec.lifecycleDays,
		notHere:       map[string]string{},
	}
	known := gatewaySettings()
	tests := []struct {
		name     string
		problems []string
		want     []string
	}{
		{"unknown settings", checkSettingsKnown(m, sp, known), []string{"writes AWS_REGION_OVERRIDE", "writes DefaultTtlSec"}},
		{"wrong defaults", checkDefaults(m, known), []string{
			`DefaultTTLSecs defaults to "300" in the gateway, but the module's default is "30"`,
			`MaxAttempts has no gateway default, but the module's default writes "3"`,
			`local.gateway_defaults.Timeout is "1200", the gateway's default is "1200000"`,
		}},
		{"missing variables", checkComplete(m, sp, known), []string{"reads Timeout, but the module has no variable", "reads AsyncModeEnabled"}},
		{"short lifecycle", checkLifecycle(m, sp), []string{"AsyncTTLSecs=86401", "AsyncTTLSecs=0.5"}},
		{"short visibility", checkVisibility(m, sp), []string{"lambda_timeout=60 gives a visibility timeout of cty.NumberIntVal(300)"}},
		{"default refused", checkOutcomes(m, sp, []outcome{{accept: true}}), []string{"want accepted", "timeout too long."}},
		{"bad accepted", checkOutcomes(m, sp, []outcome{{vars{"timeout": cty.NumberIntVal(1)}, false}}), []string{"want refused, got accepted"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			all := strings.Join(tt.problems, "\n")
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("problems %q: want one containing %q", tt.problems, w)
				}
			}
		})
	}
}

// TestFormatted checks every .tf file is formatted as terraform fmt would.
func TestFormatted(t *testing.T) {
	var files []string
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".tf") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 8 {
		t.Fatalf("found %d .tf files (%q): want the two modules and two examples", len(files), files)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := hclwrite.Format(src); string(got) != string(src) {
			t.Errorf("%s is not formatted (terraform fmt)", f)
		}
	}
}

// TestExamples checks that each example calls its module by a local path,
// pins its providers, and passes values the module's validations and
// preconditions accept.
func TestExamples(t *testing.T) {
	for _, c := range []struct {
		dir    string
		sp     spec
		sample vars
	}{
		{"examples/azure", azureSpec, sampleHosts.with(vars{"subscription_id": cty.StringVal("00000000-0000-0000-0000-000000000000"), "name": cty.StringVal("fngw-example")})},
		{"examples/aws", awsSpec, sampleHosts},
	} {
		t.Run(c.dir, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join(c.dir, "versions.tf"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(src), `version = "~> `) || !strings.Contains(string(src), "required_version") {
				t.Errorf("%s/versions.tf: want required_version and a ~> provider constraint", c.dir)
			}
			ex, err := loadModule(c.dir)
			if err != nil {
				t.Fatal(err)
			}
			e, err := ex.eval(c.sample)
			if err != nil {
				t.Fatal(err)
			}
			source, args, err := e.callArgs("gateway")
			if err != nil {
				t.Fatal(err)
			}
			if want := "../../" + c.sp.dir; source != want {
				t.Errorf("module source %q, want %q", source, want)
			}
			m, err := loadModule(filepath.Join(c.dir, source))
			if err != nil {
				t.Fatal(err)
			}
			sp := c.sp
			sp.sample = vars{}
			report(t, "example accepted", checkOutcomes(m, sp, []outcome{{args, true}}))
			written, err := writtenSettings(m, sp, args)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := text(written["AsyncModeEnabled"]); got != "true" {
				t.Errorf("the example writes AsyncModeEnabled=%q, want true", got)
			}
		})
	}
}

package terraform

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

// The dashboard (terraform/aws) and the workbook (terraform/azure) are
// written from one description, monitoring/panels.json: a module may read
// only files in its own folder (a registry package holds nothing else), so
// each gets its own generated template, and TestMonitoringGenerated keeps
// them equal to what the description makes. UPDATE_MONITORING=1 rewrites
// them.

// monitoringDescription is where the panels are described.
const monitoringDescription = "monitoring/panels.json"

// gatewayLines is the KQL for the gateway's per-request log lines in the
// Log Analytics workspace (the host sends the handler's standard output to
// Application Insights as traces), "request" and "request stream cut"
// alike, each parsed as j, without the lines of the gateway's own endpoints
// (route /_gateway/: status polls, result reads, stats, health): the
// {gateway} of the description's queries. The Azure module's alerts use the
// same text (local.gateway_lines; TestMonitoringGenerated).
const gatewayLines = `AppTraces | where Message contains_cs '"msg":"request' | extend j = parse_json(substring(Message, indexof(Message, '{'))) | where tostring(j.route) != '/_gateway/'`

// asyncEndLines is the KQL for the gateway's async end lines ("async
// request ended", docs/observability.md#when-an-async-request-ends), each parsed as j: the {async_ends} of the
// description's queries.
const asyncEndLines = `AppTraces | where Message contains_cs '"msg":"async request ended"' | extend j = parse_json(substring(Message, indexof(Message, '{')))`

// continuationLines is the KQL for the lines of the queue-triggered
// continuation invocations on Azure that say how long their message waited
// (queueAgeMs: now − the message's InsertionTime), each parsed as j: the
// {continuations} of the description's queries. The Azure module's
// continuation-age alert uses the same text (local.continuation_lines).
const continuationLines = `AppTraces | where Message contains_cs '"queueAgeMs":' | extend j = parse_json(substring(Message, indexof(Message, '{')))`

type monitoring struct {
	About  string `json:"about"`
	Alarms struct {
		About    string         `json:"about"`
		Defaults map[string]any `json:"defaults"` // attribute → default (nil: null)
	} `json:"alarms"`
	Panels []panel `json:"panels"`
}

type panel struct {
	Title string `json:"title"`
	Plots string `json:"plots"`
	AWS   struct {
		Stat   string   `json:"stat"`
		Series []series `json:"series"`
	} `json:"aws"`
	Azure struct {
		Query string `json:"query"`
		Chart string `json:"chart"`
	} `json:"azure"`
}

// series is one line of a CloudWatch graph: a metric, or (with Expression)
// metric math over other series' ids.
type series struct {
	ID         string            `json:"id"`
	Namespace  string            `json:"namespace"` // "gateway": the module's emf_namespace
	Metric     string            `json:"metric"`
	Dimensions map[string]string `json:"dimensions"`
	Stat       string            `json:"stat"`
	Label      string            `json:"label"`
	Expression string            `json:"expression"`
	Visible    *bool             `json:"visible"`
}

func loadMonitoring(tb testing.TB) monitoring {
	tb.Helper()
	raw, err := os.ReadFile(monitoringDescription)
	if err != nil {
		tb.Fatal(err)
	}
	var m monitoring
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		tb.Fatalf("%s: %v", monitoringDescription, err)
	}
	if len(m.Panels) == 0 {
		tb.Fatalf("%s: no panels", monitoringDescription)
	}
	return m
}

// dashboardBody is the CloudWatch dashboard body (the dashboard body
// structure of the CloudWatch API Reference): one metric widget per panel,
// two a row.
func dashboardBody(m monitoring) ([]byte, error) {
	type widget struct {
		Type       string         `json:"type"`
		X          int            `json:"x"`
		Y          int            `json:"y"`
		Width      int            `json:"width"`
		Height     int            `json:"height"`
		Properties map[string]any `json:"properties"`
	}
	var widgets []widget
	for i, p := range m.Panels {
		var metrics [][]any
		for _, s := range p.AWS.Series {
			opts := map[string]any{}
			if s.ID != "" {
				opts["id"] = s.ID
			}
			if s.Label != "" {
				opts["label"] = s.Label
			}
			if s.Stat != "" {
				opts["stat"] = s.Stat
			}
			if s.Visible != nil {
				opts["visible"] = *s.Visible
			}
			if s.Expression != "" {
				opts["expression"] = s.Expression
				metrics = append(metrics, []any{opts})
				continue
			}
			if s.Namespace == "" || s.Metric == "" {
				return nil, fmt.Errorf("panel %q: a series needs a namespace and a metric, or an expression", p.Title)
			}
			ns := s.Namespace
			if ns == "gateway" {
				ns = "${namespace}"
			}
			row := []any{ns, s.Metric}
			for _, k := range sortedKeys(s.Dimensions) {
				row = append(row, k, s.Dimensions[k])
			}
			if len(opts) > 0 {
				row = append(row, opts)
			}
			metrics = append(metrics, row)
		}
		props := map[string]any{"title": p.Title, "region": "${region}", "view": "timeSeries", "stacked": false,
			"period": 300, "metrics": metrics}
		if p.AWS.Stat != "" {
			props["stat"] = p.AWS.Stat
		}
		widgets = append(widgets, widget{Type: "metric", X: 12 * (i % 2), Y: 6 * (i / 2), Width: 12, Height: 6, Properties: props})
	}
	return marshal(map[string]any{"start": "-PT24H", "widgets": widgets})
}

// workbookData is the Azure Monitor workbook's serialized data
// (Notebook/1.0): a heading, then one log query a panel, two a row, against
// the module's Log Analytics workspace.
func workbookData(m monitoring) ([]byte, error) {
	items := []map[string]any{{
		"type": 1, "name": "about",
		"content": map[string]any{"json": "## Function gateway\nThe panels of docs/operations.md; the AWS module's dashboard has the same ones."},
	}}
	for i, p := range m.Panels {
		if p.Azure.Query == "" {
			return nil, fmt.Errorf("panel %q: no azure query", p.Title)
		}
		q := strings.NewReplacer("{gateway}", gatewayLines, "{async_ends}", asyncEndLines, "{continuations}", continuationLines).Replace(p.Azure.Query)
		items = append(items, map[string]any{
			"type": 3, "name": fmt.Sprintf("panel-%d", i+1), "customWidth": "50",
			"content": map[string]any{
				"version": "KqlItem/1.0", "title": p.Title, "noDataMessage": p.Plots,
				"query": q + " | render " + p.Azure.Chart, "size": 0, "queryType": 0,
				"timeContext":             map[string]any{"durationMs": 86400000},
				"resourceType":            "microsoft.operationalinsights/workspaces",
				"crossComponentResources": []string{"${workspace_id}"},
				"visualization":           p.Azure.Chart,
			},
		})
	}
	return marshal(map[string]any{"version": "Notebook/1.0", "items": items,
		"fallbackResourceIds": []string{"${workspace_id}"}, "isLocked": false})
}

func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// templateVars are the names each generated template may use: exactly the
// ones its module passes to templatefile.
var templateVars = map[string][]string{
	"aws/dashboard.json.tftpl":  {"region", "namespace", "function_name", "continuations_queue", "dead_letter_queue", "memory_mb", "results_bucket", "s3_metrics_filter"},
	"azure/workbook.json.tftpl": {"workspace_id", "poison_queue", "memory_mb"},
}

var templateRef = regexp.MustCompile(`\$\{([^}]*)\}`)

// TestMonitoringGenerated: the dashboard's and the workbook's templates are
// what the description makes; each uses only the variables its module
// passes, and passes them all; the Azure alerts read the same log lines as
// the workbook (the request lines and the continuation lines).
func TestMonitoringGenerated(t *testing.T) {
	m := loadMonitoring(t)
	dash, err := dashboardBody(m)
	if err != nil {
		t.Fatal(err)
	}
	book, err := workbookData(m)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string][]byte{"aws/dashboard.json.tftpl": dash, "azure/workbook.json.tftpl": book} {
		if os.Getenv("UPDATE_MONITORING") == "1" {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is not what %s makes (%v): run UPDATE_MONITORING=1 go test ./terraform -run TestMonitoringGenerated", path, monitoringDescription, err)
		}
		allowed := map[string]bool{}
		for _, v := range templateVars[path] {
			allowed[v] = true
		}
		used := map[string]bool{}
		for _, ref := range templateRef.FindAllStringSubmatch(string(want), -1) {
			if !allowed[ref[1]] {
				t.Errorf("%s uses ${%s}, which its module does not pass", path, ref[1])
			}
			used[ref[1]] = true
		}
		if bytes.Contains(want, []byte("%{")) {
			t.Errorf("%s holds %%{, a template directive", path)
		}
		mod, _, _ := strings.Cut(path, "/")
		src, err := os.ReadFile(filepath.Join(mod, "monitoring.tf"))
		if err != nil {
			t.Fatal(err)
		}
		call := regexp.MustCompile(`templatefile\("\$\{path\.module\}/` + regexp.QuoteMeta(filepath.Base(path)) + `", \{([^}]*)\}\)`).FindSubmatch(src)
		if call == nil {
			t.Errorf("%s/monitoring.tf does not call templatefile on %s", mod, filepath.Base(path))
			continue
		}
		for _, v := range templateVars[path] {
			if !regexp.MustCompile(`(?m)^\s*` + v + `\s*=`).Match(call[1]) {
				t.Errorf("%s/monitoring.tf does not pass %s to %s", mod, v, filepath.Base(path))
			}
		}
	}

	az, err := loadModule("azure")
	if err != nil {
		t.Fatal(err)
	}
	e, err := az.eval(azureSpec.sample)
	if err != nil {
		t.Fatal(err)
	}
	for local, want := range map[string]string{"gateway_lines": gatewayLines, "continuation_lines": continuationLines} {
		v, err := e.localValue(local)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := text(v); !ok || got != want {
			t.Errorf("azure local.%s = %q; want the workbook's %q", local, got, want)
		}
	}
}

// alarmsOnlyIn are the alarms attributes one module has and the other has
// not: Azure's account-wide queue message count stands in where AWS has a
// per-queue metric.
var alarmsOnlyIn = map[string]string{"queue_messages": "azure"}

// TestAlarmDefaults: both modules take the alarms' recipient and thresholds
// as one alarms object whose attributes and defaults are the description's.
func TestAlarmDefaults(t *testing.T) {
	m := loadMonitoring(t)
	if len(m.Alarms.Defaults) == 0 {
		t.Fatalf("%s: no alarms.defaults", monitoringDescription)
	}
	for _, dir := range []string{"aws", "azure"} {
		mod, err := loadModule(dir)
		if err != nil {
			t.Fatal(err)
		}
		v := mod.vars["alarms"]
		if v == nil || v.def == cty.NilVal || !v.def.Type().IsObjectType() {
			t.Errorf("%s: no alarms variable with an object default", dir)
			continue
		}
		for name, want := range m.Alarms.Defaults {
			if only, ok := alarmsOnlyIn[name]; ok && only != dir {
				if v.def.Type().HasAttribute(name) {
					t.Errorf("%s: alarms.%s is %s's only", dir, name, only)
				}
				continue
			}
			if !v.def.Type().HasAttribute(name) {
				t.Errorf("%s: alarms has no %s", dir, name)
				continue
			}
			got := v.def.GetAttr(name)
			switch w := want.(type) {
			case nil:
				if !got.IsNull() {
					t.Errorf("%s: alarms.%s defaults to %#v; want null", dir, name, got)
				}
			case float64:
				if got.IsNull() || got.Type() != cty.Number || !got.Equals(cty.NumberFloatVal(w)).True() {
					t.Errorf("%s: alarms.%s defaults to %#v; want %v", dir, name, got, w)
				}
			default:
				t.Errorf("%s: alarms.defaults.%s = %v: want a number or null", monitoringDescription, name, want)
			}
		}
		for name := range v.def.Type().AttributeTypes() {
			if _, ok := m.Alarms.Defaults[name]; !ok {
				t.Errorf("%s: alarms.%s is not in %s's alarms.defaults", dir, name, monitoringDescription)
			}
		}
	}
}

// sampledTypes are the Application Insights telemetry types of the
// workspace tables the Azure module's queries read: what host.json's
// samplingSettings.excludedTypes names ("host.json reference for Azure
// Functions 2.x and later", logging.applicationInsights.samplingSettings:
// "A semi-colon delimited list of types that you don't want to be sampled.
// Recognized types are: Dependency, Event, Exception, PageView, Request,
// and Trace").
var sampledTypes = map[string]string{"AppTraces": "Trace", "AppRequests": "Request", "AppDependencies": "Dependency",
	"AppExceptions": "Exception", "AppEvents": "Event", "AppPageViews": "PageView"}

// TestAlertsNotSampled: the Functions host samples its Application
// Insights telemetry by default (adaptive sampling, 20 items per second),
// so a count under load, and an alert on one event, could miss what it
// counts. Every telemetry type a workbook panel or an alert of the Azure
// module reads is excluded from sampling in functions/host.json.
func TestAlertsNotSampled(t *testing.T) {
	var host struct {
		Logging struct {
			ApplicationInsights struct {
				SamplingSettings *struct {
					IsEnabled     *bool  `json:"isEnabled"`
					ExcludedTypes string `json:"excludedTypes"`
				} `json:"samplingSettings"`
			} `json:"applicationInsights"`
		} `json:"logging"`
	}
	raw, err := os.ReadFile("../functions/host.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &host); err != nil {
		t.Fatalf("functions/host.json: %v", err)
	}
	excluded := map[string]bool{}
	if s := host.Logging.ApplicationInsights.SamplingSettings; s != nil {
		if s.IsEnabled != nil && !*s.IsEnabled {
			return // no sampling at all
		}
		for _, typ := range strings.Split(s.ExcludedTypes, ";") {
			excluded[strings.TrimSpace(typ)] = true
		}
	}
	used := 0
	for _, file := range []string{"azure/workbook.json.tftpl", "azure/monitoring.tf"} {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for table, typ := range sampledTypes {
			if !regexp.MustCompile(`\b` + table + `\b`).Match(src) {
				continue
			}
			used++
			if !excluded[typ] {
				t.Errorf("%s reads %s, but functions/host.json lets the host sample %s telemetry (logging.applicationInsights.samplingSettings.excludedTypes)", file, table, typ)
			}
		}
	}
	if used == 0 {
		t.Fatal("the Azure module reads no Application Insights table this test knows")
	}
}

// supportedAggregations are the aggregations Azure Monitor accepts for each
// platform metric the Azure module alerts on, by metric namespace and name,
// from "Supported metrics for Microsoft.Storage/storageAccounts/queueServices"
// (learn.microsoft.com/azure/azure-monitor/reference/supported-metrics/microsoft-storage-storageaccounts-queueservices-metrics,
// the Aggregation column): the capacity metrics (QueueCapacity, QueueCount,
// QueueMessageCount) are sampled hourly (PT1H) and have Average only; the
// transaction metrics listed are per minute (PT1M). A metric alert with another aggregation is
// refused by Azure Monitor with a 400, so the apply fails.
var supportedAggregations = map[string]map[string][]string{
	"Microsoft.Storage/storageAccounts/queueServices": {
		"QueueCapacity":     {"Average"},
		"QueueCount":        {"Average"},
		"QueueMessageCount": {"Average"},
		"Ingress":           {"Total", "Average", "Minimum", "Maximum"},
		"Egress":            {"Total", "Average", "Minimum", "Maximum"},
		"Availability":      {"Average", "Minimum", "Maximum"},
	},
}

// TestMetricAlertAggregations: every criteria block of the Azure module's
// metric alerts names a metric of the table above with an aggregation the
// table says Azure Monitor supports for it.
func TestMetricAlertAggregations(t *testing.T) {
	m, err := loadModule("azure")
	if err != nil {
		t.Fatal(err)
	}
	e, err := m.eval(azureSpec.sample)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for name, b := range m.resources {
		if !strings.HasPrefix(name, "azurerm_monitor_metric_alert.") {
			continue
		}
		for _, c := range b.Body.Blocks {
			if c.Type != "criteria" {
				continue
			}
			n++
			got := map[string]string{}
			for _, arg := range []string{"metric_namespace", "metric_name", "aggregation"} {
				a, ok := c.Body.Attributes[arg]
				if !ok {
					t.Fatalf("%s: criteria without %s", name, arg)
				}
				v, err := e.value(a.Expr)
				if err != nil {
					t.Fatalf("%s: %s: %v", name, arg, err)
				}
				s, ok := text(v)
				if !ok {
					t.Fatalf("%s: %s is not a known string", name, arg)
				}
				got[arg] = s
			}
			aggs, ok := supportedAggregations[got["metric_namespace"]][got["metric_name"]]
			if !ok {
				t.Errorf("%s: metric %s %s is not in the table of supported aggregations: add it from Azure's supported-metrics page", name, got["metric_namespace"], got["metric_name"])
				continue
			}
			if !slices.Contains(aggs, got["aggregation"]) {
				t.Errorf("%s: aggregation %s of %s; Azure Monitor supports only %v for it", name, got["aggregation"], got["metric_name"], aggs)
			}
		}
	}
	if n == 0 {
		t.Fatal("the Azure module has no metric alert criteria")
	}
}

// TestAWSRateAlarmsPerRoute: the AWS module's rate alarms are made once over
// the whole gateway and once per route of var.routes, on that route's EMF
// dimension.
func TestAWSRateAlarmsPerRoute(t *testing.T) {
	m, err := loadModule("aws")
	if err != nil {
		t.Fatal(err)
	}
	route := func(p string) cty.Value {
		return cty.ObjectVal(map[string]cty.Value{"prefix": cty.StringVal(p)})
	}
	e, err := m.eval(awsSpec.sample.with(vars{"routes": cty.ListVal([]cty.Value{route("/api"), route("/batch")})}))
	if err != nil {
		t.Fatal(err)
	}
	rates, err := e.localValue("rate_alarms")
	if err != nil {
		t.Fatal(err)
	}
	all, err := e.localValue("rate_alarm_instances")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for it := rates.ElementIterator(); it.Next(); {
		k, _ := it.Element()
		want[k.AsString()] = ""
		want[k.AsString()+" /api"] = "/api"
		want[k.AsString()+" /batch"] = "/batch"
	}
	got := map[string]string{}
	for it := all.ElementIterator(); it.Next(); {
		k, v := it.Element()
		r := v.GetAttr("route")
		got[k.AsString()] = ""
		if !r.IsNull() {
			got[k.AsString()] = r.AsString()
		}
	}
	if len(want) < 8 || !maps.Equal(got, want) {
		t.Errorf("rate alarm instances (key → route) = %v; want %v", got, want)
	}
}

// TestAzureAlertsCountWhatTheySay: the throttles alert counts the 429s the
// platform answered itself, leaving out those of operations whose gateway
// line answered 429 (a backend's, relayed); the dead-letter alert counts
// what waits in the poison queue (puts less deletes in the queue service's
// request log, which the diagnostic setting sends to the workspace), not
// the host's moves.
func TestAzureAlertsCountWhatTheySay(t *testing.T) {
	m, err := loadModule("azure")
	if err != nil {
		t.Fatal(err)
	}
	e, err := m.eval(azureSpec.sample)
	if err != nil {
		t.Fatal(err)
	}
	alerts, err := e.localValue("log_alerts")
	if err != nil {
		t.Fatal(err)
	}
	query := func(name string) string {
		t.Helper()
		if !alerts.Type().HasAttribute(name) {
			t.Fatalf("no log alert %s", name)
		}
		q, ok := text(alerts.GetAttr(name).GetAttr("query"))
		if !ok {
			t.Fatalf("log alert %s: query is not known", name)
		}
		return q
	}
	throttles := query("throttles")
	for _, want := range []string{"AppRequests", "ResultCode == '429'", gatewayLines + " | where toint(j.status) == 429", "OperationId !in ("} {
		if !strings.Contains(throttles, want) {
			t.Errorf("throttles alert %q lacks %q: it would count a backend's 429s", throttles, want)
		}
	}
	dead := query("dead-letters")
	poison, err := e.localValue("poison_queue")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := text(poison)
	for _, want := range []string{"StorageQueueLogs", "/" + p + "/messages", "OperationName == 'PutMessage'", "- countif(OperationName == 'DeleteMessage')"} {
		if !strings.Contains(dead, want) {
			t.Errorf("dead-letters alert %q lacks %q: it would not count what waits", dead, want)
		}
	}
	if strings.Contains(dead, "Moving message") {
		t.Errorf("dead-letters alert %q counts the host's moves", dead)
	}
	// The queue service's write and delete requests reach the workspace.
	b := m.resources["azurerm_monitor_diagnostic_setting.storage"]
	src, err := os.ReadFile("azure/monitoring.tf")
	if err != nil || b == nil {
		t.Fatalf("no diagnostic setting of the storage services (%v)", err)
	}
	var logs string
	for _, nb := range b.Body.Blocks {
		if nb.Type == "dynamic" && len(nb.Labels) == 1 && nb.Labels[0] == "enabled_log" {
			r := nb.Body.Attributes["for_each"].Expr.Range()
			logs = string(src[r.Start.Byte:r.End.Byte])
		}
	}
	for _, want := range []string{`"queueServices"`, `"StorageWrite"`, `"StorageDelete"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the storage diagnostic setting's enabled_log (%q) lacks %s", logs, want)
		}
	}
}

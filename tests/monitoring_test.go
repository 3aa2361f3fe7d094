package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"fngateway/core"
	"fngateway/internal/emulators"
)

// The dashboards, alarms and queries of the Terraform modules name what the
// gateway emits: they are only right if the binary emits those names. These
// tests run the binary, read what it emitted (its Embedded Metric Format
// lines, its OTLP metrics as the OpenTelemetry Collector received them, its
// plain log line as the Azure host forwards it) and check every gateway
// name the modules reference against it, so that renaming a metric without
// its dashboards fails.

// emitted is what one run of the binary said.
type emitted struct {
	emfNamespaces map[string]bool
	emfMetrics    map[string]bool // the _aws directive's metric names
	emfDims       map[string]bool // the keys of its dimension sets
	otlp          map[string]emulators.Metric
	lineKeys      map[string]bool  // the plain per-request and async end lines' fields (no EmfNamespace, as on Azure)
	rawLines      []string         // the plain per-request lines, as written
	ownLines      []map[string]any // those of requests to the gateway's own endpoints (/_gateway/…)
	endLines      []string         // the plain async end lines, as written
	contLines     []string         // the Azure continuation invocations' lines that carry queueAgeMs, as written
	otherLines    []string         // the plain gateway's other lines
}

const testEMFNamespace = "Gateway/Names"

// runForNames runs two gateways, one with EmfNamespace and OpenTelemetry as
// the AWS module configures it, one plain as on Azure, sends each a request
// on a route the TTL ends and one on no route, one that a hedge joins before
// the TTL ends it, one whose refused connection ejects its host, and an
// async request the TTL ends, and collects what they emit.
func runForNames(t *testing.T) emitted {
	t.Helper()
	j := emulators.StartCollector(t)
	backend := newHangingTraceBackend(t)
	routes := `[{"prefix":"/api"},` +
		`{"prefix":"/hedge","timeoutMs":2000,"maxAttempts":2,"hedgeOnPerTryTimeout":true},` +
		`{"prefix":"/eject","hosts":["` + deadAddr(t) + `"],"ejectAfterFailures":1}]`
	env := otelEnv(j)
	env["OTEL_METRIC_EXPORT_INTERVAL"] = "100"
	env["EmfNamespace"] = testEMFNamespace
	for k, v := range asyncEnv(backend.URL, t.TempDir()) {
		env[k] = v
	}
	env["Routes"] = routes
	emf := StartGateway(t, env)
	plainEnv := asyncEnv(backend.URL, t.TempDir())
	plainEnv["Routes"] = routes
	plain := StartGateway(t, plainEnv)
	for _, gw := range []*Gateway{emf, plain} {
		for _, path := range []string{"/api/x", "/y"} {
			resp, body, _ := Do(t, "GET", gw.URL+path, map[string]string{"S7PTTL": "2"}, "")
			if resp.StatusCode != 504 {
				t.Fatalf("GET %s = %d %s; want 504 TTLExpired", path, resp.StatusCode, body)
			}
		}
	}
	for _, gw := range []*Gateway{emf, plain} {
		// The hedge starts when the first attempt's 2 s Timeout fires; the
		// 3 s TTL ends both, before the hedge's own Timeout.
		if resp, body, _ := Do(t, "GET", gw.URL+"/hedge/x", map[string]string{"S7PTTL": "3"}, ""); resp.StatusCode != 504 {
			t.Fatalf("GET /hedge/x = %d %s; want 504 TTLExpired", resp.StatusCode, body)
		}
		if resp, body, _ := Do(t, "GET", gw.URL+"/eject/x", nil, ""); resp.StatusCode != 502 {
			t.Fatalf("GET /eject/x = %d %s; want 502 BackendUnavailable", resp.StatusCode, body)
		}
	}
	isRequest := func(path string) func(m map[string]any) bool {
		return func(m map[string]any) bool { return m["msg"] == "request" && m["path"] == path }
	}
	for _, gw := range []*Gateway{emf, plain} {
		for path, field := range map[string]string{"/y": "", "/hedge/x": "hedges", "/eject/x": "ejections"} {
			line := gw.WaitLog(t, loadMargin, isRequest(path))
			// The line of the request a hedge joined, or whose failure
			// ejected its host, counts it (the EMF line as a metric).
			if n, _ := line[field].(float64); field != "" && n != 1 {
				t.Errorf("GET %s: log line %s = %v; want 1 (line %v)", path, field, line[field], line)
			}
		}
	}
	// Requests to the gateway's own endpoints, which the Azure queries
	// must not count as requests.
	for _, path := range []string{"/_gateway/health", "/_gateway/stats"} {
		if resp, body, _ := Do(t, "GET", plain.URL+path, nil, ""); resp.StatusCode != 200 {
			t.Fatalf("GET %s = %d %s; want 200", path, resp.StatusCode, body)
		}
		plain.WaitLog(t, loadMargin, isRequest(path))
	}
	// An async request the TTL ends: its end line (in whichever state).
	isEnd := func(m map[string]any) bool { return m["msg"] == "async request ended" }
	for _, gw := range []*Gateway{emf, plain} {
		submitAsync(t, gw.URL, "/api/x", map[string]string{"S7PTTL": "0.2"})
		gw.WaitLog(t, 30*time.Second, isEnd)
	}

	// On Azure a continuation's invocation line says how long its message
	// waited: the host's InsertionTime, 90 s before the delivery here. The
	// age is said whatever becomes of the message: here async is off (an
	// Azure host's store is Azure Storage), so it is left to the queue.
	azure := StartAzureHandler(t, map[string]string{"Hosts": backend.URL})
	msg := `{"v":1,"id":"0123456789abcdef0123456789abcdef"}`
	if got := deliverContinuationAt(t, azure, msg, 1, time.Now().Add(-90*time.Second)); got != 503 {
		t.Fatalf("continuation with async off = %d; want 503 (left to the queue)", got)
	}
	line := azure.WaitLog(t, loadMargin, func(m map[string]any) bool { return m["msg"] == "continuation not run" })
	if age, _ := line["queueAgeMs"].(float64); age < 90000 {
		t.Errorf("continuation line queueAgeMs = %v; want 90000 or more (line %v)", line["queueAgeMs"], line)
	}

	e := emitted{emfNamespaces: map[string]bool{}, emfMetrics: map[string]bool{}, emfDims: map[string]bool{}, lineKeys: map[string]bool{}}
	ends := 0
	for _, m := range emf.Logs() {
		if m["msg"] != "request" && m["msg"] != "async request ended" {
			continue
		}
		if m["msg"] != "request" {
			ends++
		}
		raw, _ := json.Marshal(m["_aws"])
		var aws struct {
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name string }
			}
		}
		if err := json.Unmarshal(raw, &aws); err != nil || len(aws.CloudWatchMetrics) == 0 {
			t.Fatalf("%s line without an EMF directive: %v", m["msg"], m)
		}
		for _, cw := range aws.CloudWatchMetrics {
			e.emfNamespaces[cw.Namespace] = true
			for _, set := range cw.Dimensions {
				for _, k := range set {
					e.emfDims[k] = true
				}
			}
			for _, mt := range cw.Metrics {
				e.emfMetrics[mt.Name] = true
			}
		}
	}
	for _, line := range append(plain.logs.Lines(), azure.logs.Lines()...) {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			e.otherLines = append(e.otherLines, line)
			continue
		}
		switch _, age := m["queueAgeMs"]; {
		case m["msg"] == "request":
			e.rawLines = append(e.rawLines, line)
			if p, _ := m["path"].(string); strings.HasPrefix(p, "/_gateway/") {
				e.ownLines = append(e.ownLines, m)
			}
		case m["msg"] == "async request ended":
			e.endLines = append(e.endLines, line)
		case age:
			e.contLines = append(e.contLines, line)
		default:
			e.otherLines = append(e.otherLines, line)
			continue
		}
		for k := range m {
			e.lineKeys[k] = true
		}
	}
	if len(e.emfMetrics) == 0 || !e.emfDims["route"] || len(e.rawLines) == 0 || ends == 0 || len(e.endLines) == 0 || len(e.contLines) == 0 {
		t.Fatalf("the gateways emitted no EMF metrics, no route dimension or no plain lines: %+v", e)
	}

	// The metrics go out every 100 ms: wait for the counters and the
	// request histogram with the route the request took.
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := j.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		if got["requests"].Name != "" && got["http.server.request.duration"].Attributes["http.route"] {
			e.otlp = got
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the collector got no requests counter and request histogram within 30 s; it has %v\n%s", keysOf(got), j.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return e
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// emfToOTLP names the OTLP metric that carries what an EMF metric of a
// different name carries; every other EMF metric has an OTLP counter of its
// own name (the /_gateway/stats names).
var emfToOTLP = map[string]string{"durationMs": "http.server.request.duration"}

// emfDimToOTLP: the EMF line's route dimension is the request histogram's
// http.route attribute.
var emfDimToOTLP = map[string]string{"route": "http.route"}

// gatewayRefs are the gateway names a module references.
type gatewayRefs struct {
	metrics map[string][]string // EMF metric → where
	dims    map[string][]string // EMF dimension → where
	fields  map[string][]string // log line field (j.<field>) → where
	codes   map[string][]string // compared with j.code → where
	filters map[string][]string // the text that selects the request lines → where
}

func newRefs() gatewayRefs {
	return gatewayRefs{metrics: map[string][]string{}, dims: map[string][]string{}, fields: map[string][]string{}, codes: map[string][]string{}, filters: map[string][]string{}}
}

// awsRefs reads the AWS module: the dashboard's template (the rows whose
// namespace is the module's EMF namespace) and the alarms whose namespace is
// var.emf_namespace.
func awsRefs(t *testing.T) gatewayRefs {
	t.Helper()
	r := newRefs()
	raw, err := os.ReadFile("../terraform/aws/dashboard.json.tftpl")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Widgets []struct {
			Properties struct {
				Title   string  `json:"title"`
				Metrics [][]any `json:"metrics"`
			} `json:"properties"`
		} `json:"widgets"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard.json.tftpl: %v", err)
	}
	for _, w := range dash.Widgets {
		for _, row := range w.Properties.Metrics {
			if opts, ok := row[0].(map[string]any); ok {
				// A SEARCH expression over the namespace's series by
				// route: the metrics it names and its dimension keys.
				expr, _ := opts["expression"].(string)
				m := searchRef.FindStringSubmatch(expr)
				if m == nil {
					continue
				}
				where := "dashboard panel " + w.Properties.Title
				if m[1] != "${namespace}" {
					t.Errorf("%s: SEARCH over %q, not the module's namespace", where, m[1])
				}
				for _, k := range strings.Split(m[2], ",") {
					r.dims[k] = append(r.dims[k], where)
				}
				for _, n := range searchMetric.FindAllStringSubmatch(m[3], -1) {
					r.metrics[n[1]] = append(r.metrics[n[1]], where)
				}
				continue
			}
			if ns, _ := row[0].(string); ns != "${namespace}" {
				continue
			}
			where := "dashboard panel " + w.Properties.Title
			name, _ := row[1].(string)
			r.metrics[name] = append(r.metrics[name], where)
			for i := 2; i+1 < len(row); i += 2 {
				if k, ok := row[i].(string); ok {
					r.dims[k] = append(r.dims[k], where)
				}
			}
		}
	}

	src, err := os.ReadFile("../terraform/aws/monitoring.tf")
	if err != nil {
		t.Fatal(err)
	}
	f, diags := hclsyntax.ParseConfig(src, "monitoring.tf", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	// The alarms are a for_each over local.metric_alarms, each entry naming
	// its namespace, metric_name and dimensions, and one over
	// local.rate_alarms, each naming the EMF metrics of its numerator and
	// denominator.
	var alarms, rates *hclsyntax.ObjectConsExpr
	for _, b := range f.Body.(*hclsyntax.Body).Blocks {
		if b.Type == "locals" {
			if a, ok := b.Body.Attributes["metric_alarms"]; ok {
				alarms, _ = a.Expr.(*hclsyntax.ObjectConsExpr)
			}
			if a, ok := b.Body.Attributes["rate_alarms"]; ok {
				rates, _ = a.Expr.(*hclsyntax.ObjectConsExpr)
			}
		}
	}
	if alarms == nil || len(alarms.Items) == 0 {
		t.Fatal("terraform/aws/monitoring.tf: no local.metric_alarms object of alarms")
	}
	if rates == nil || len(rates.Items) == 0 {
		t.Fatal("terraform/aws/monitoring.tf: no local.rate_alarms object of alarms")
	}
	for _, item := range rates.Items {
		where := "rate alarm " + strings.Trim(exprText(src, item.KeyExpr), `"`)
		obj, ok := item.ValueExpr.(*hclsyntax.ObjectConsExpr)
		if !ok {
			t.Errorf("%s is not an object", where)
			continue
		}
		n := 0
		for _, a := range obj.Items {
			if k := strings.Trim(exprText(src, a.KeyExpr), `"`); k != "numerator" && k != "denominator" {
				continue
			}
			list, ok := a.ValueExpr.(*hclsyntax.TupleConsExpr)
			if !ok {
				t.Errorf("%s: %s is not a list of metric names", where, exprText(src, a.KeyExpr))
				continue
			}
			for _, e := range list.Exprs {
				name := strings.Trim(exprText(src, e), `"`)
				r.metrics[name] = append(r.metrics[name], where)
				n++
			}
		}
		if n < 2 {
			t.Errorf("%s names %d metrics; want a numerator and a denominator", where, n)
		}
	}
	for _, item := range alarms.Items {
		where := "alarm " + strings.Trim(exprText(src, item.KeyExpr), `"`)
		obj, ok := item.ValueExpr.(*hclsyntax.ObjectConsExpr)
		if !ok {
			t.Errorf("%s is not an object", where)
			continue
		}
		attrs := map[string]hclsyntax.Expression{}
		for _, a := range obj.Items {
			attrs[strings.Trim(exprText(src, a.KeyExpr), `"`)] = a.ValueExpr
		}
		ns, ok := attrs["namespace"]
		if !ok {
			t.Errorf("%s has no namespace", where)
			continue
		}
		if exprText(src, ns) != "var.emf_namespace" {
			continue // an AWS namespace
		}
		mn, ok := attrs["metric_name"]
		if !ok {
			t.Errorf("%s has no metric_name", where)
			continue
		}
		name := strings.Trim(exprText(src, mn), `"`)
		r.metrics[name] = append(r.metrics[name], where)
		if d, ok := attrs["dimensions"].(*hclsyntax.ObjectConsExpr); ok {
			for _, item := range d.Items {
				k := strings.Trim(exprText(src, item.KeyExpr), `"`)
				r.dims[k] = append(r.dims[k], where)
			}
		}
	}
	return r
}

func exprText(src []byte, e hclsyntax.Expression) string {
	rg := e.Range()
	return strings.TrimSpace(string(src[rg.Start.Byte:rg.End.Byte]))
}

var (
	// searchRef: a CloudWatch SEARCH expression's schema (namespace and
	// dimension keys) and its search terms.
	searchRef    = regexp.MustCompile(`^SEARCH\('\{"([^"]*)",([^}]*)\} ([^']*)'`)
	searchMetric = regexp.MustCompile(`MetricName="([^"]+)"`)
	fieldRef     = regexp.MustCompile(`\bj\.([A-Za-z_][A-Za-z0-9_]*)`)
	lineRef      = regexp.MustCompile(`AppTraces \| where Message contains_cs '([^']*)' \| extend j = parse_json`)
	codeRef      = regexp.MustCompile(`j\.code\) == '([^']*)'`)
)

// azureRefs reads the Azure module's workbook template and alerts: every
// field of the gateway's log line they read (j.<field>) and every code they
// compare with.
func azureRefs(t *testing.T) gatewayRefs {
	t.Helper()
	r := newRefs()
	for _, file := range []string{"workbook.json.tftpl", "monitoring.tf"} {
		raw, err := os.ReadFile(filepath.Join("../terraform/azure", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range fieldRef.FindAllStringSubmatch(string(raw), -1) {
			r.fields[m[1]] = append(r.fields[m[1]], file)
		}
		for _, m := range codeRef.FindAllStringSubmatch(string(raw), -1) {
			r.codes[m[1]] = append(r.codes[m[1]], file)
		}
		text := strings.ReplaceAll(string(raw), `\"`, `"`) // JSON and HCL escape the quotes
		for _, m := range lineRef.FindAllStringSubmatch(text, -1) {
			r.filters[m[1]] = append(r.filters[m[1]], file)
		}
	}
	return r
}

// TestMonitoringNamesEmitted: every gateway metric and dimension the AWS
// dashboard and alarms name is in the binary's EMF lines, and has its OTLP
// counterpart; every log field and code the Azure workbook and alerts read
// is in the binary's plain per-request line; the modules write the EMF
// namespace their dashboard reads.
func TestMonitoringNamesEmitted(t *testing.T) {
	t.Parallel()
	aws, az := awsRefs(t), azureRefs(t)
	if len(aws.metrics) == 0 || len(az.fields) == 0 || len(az.codes) == 0 {
		t.Fatalf("the modules reference no gateway metric, field or code: %+v %+v", aws, az)
	}
	e := runForNames(t)
	if !e.emfNamespaces[testEMFNamespace] || len(e.emfNamespaces) != 1 {
		t.Errorf("EMF namespaces = %v; want only EmfNamespace's %s", keysOf(e.emfNamespaces), testEMFNamespace)
	}
	for name, where := range aws.metrics {
		if !e.emfMetrics[name] {
			t.Errorf("%v: metric %q is not in the binary's EMF lines (it has %v)", where, name, keysOf(e.emfMetrics))
		}
		otlp := name
		if o, ok := emfToOTLP[name]; ok {
			otlp = o
		}
		if e.otlp[otlp].Name == "" {
			t.Errorf("%v: metric %q has no OTLP metric %q (the collector got %v)", where, name, otlp, keysOf(e.otlp))
		}
	}
	for dim, where := range aws.dims {
		if !e.emfDims[dim] {
			t.Errorf("%v: dimension %q is not in the binary's EMF lines (it has %v)", where, dim, keysOf(e.emfDims))
		}
		if a, ok := emfDimToOTLP[dim]; !ok || !e.otlp["http.server.request.duration"].Attributes[a] {
			t.Errorf("%v: dimension %q has no OTLP attribute on http.server.request.duration", where, dim)
		}
	}
	for field, where := range az.fields {
		if !e.lineKeys[field] {
			t.Errorf("%v: log field j.%s is not in the binary's per-request line (it has %v)", where, field, keysOf(e.lineKeys))
		}
	}
	codes := map[string]bool{"": true} // the line's code when the backend answered
	for r := core.ReasonNone; r < core.ReasonNone+64; r++ {
		codes[r.Code()] = true
	}
	for code, where := range az.codes {
		if !codes[code] {
			t.Errorf("%v: code %q is no error code of the gateway", where, code)
		}
	}
	if len(az.filters) == 0 {
		t.Errorf("the Azure module selects the request lines with no filter this test knows (%s)", lineRef)
	}
	// A filter selects every line of one kind (per-request, async end,
	// continuation), and no other line.
	kinds := []struct {
		name  string
		lines []string
	}{{"per-request", e.rawLines}, {"async end", e.endLines}, {"continuation", e.contLines}}
	for filter, where := range az.filters {
		k := 0
		for i, kd := range kinds {
			if strings.Contains(kd.lines[0], filter) {
				k = i
			}
		}
		kind, lines, others := kinds[k].name, kinds[k].lines, append([]string(nil), e.otherLines...)
		for i, kd := range kinds {
			if i != k {
				others = append(others, kd.lines...)
			}
		}
		for _, line := range lines {
			if !strings.Contains(line, filter) {
				t.Errorf("%v: %s line %s lacks the text the queries select it by, %s", where, kind, line, filter)
			}
		}
		for _, line := range others {
			if strings.Contains(line, filter) {
				t.Errorf("%v: the queries select %s by %s, which is no %s line", where, line, filter, kind)
			}
		}
	}

	// The Azure queries count gateway requests only: every query that
	// selects the per-request lines drops those of the gateway's own
	// endpoints by their route, which is theirs alone.
	perRequest := regexp.MustCompile(regexp.QuoteMeta(`AppTraces | where Message contains_cs '"msg":"request' | extend j = parse_json(substring(Message, indexof(Message, '{')))`) + `( \| where tostring\(j\.route\) != '([^']*)')?`)
	for _, file := range []string{"workbook.json.tftpl", "monitoring.tf"} {
		raw, err := os.ReadFile(filepath.Join("../terraform/azure", file))
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(raw), `\"`, `"`)
		found := perRequest.FindAllStringSubmatch(text, -1)
		if len(found) == 0 {
			t.Errorf("terraform/azure/%s: no query selects the per-request lines as %s", file, perRequest)
		}
		for _, m := range found {
			if m[1] == "" {
				t.Errorf("terraform/azure/%s: a query counts the per-request lines with those of the gateway's own endpoints (status polls, /_gateway/stats, /_gateway/health): want | where tostring(j.route) != '/_gateway/' after %q", file, m[0])
				continue
			}
			if len(e.ownLines) == 0 {
				t.Fatal("the gateway wrote no line for its own endpoints")
			}
			for _, own := range e.ownLines {
				if own["route"] != m[2] {
					t.Errorf("terraform/azure/%s drops route %q, but the line of %v has route %v", file, m[2], own["path"], own["route"])
				}
			}
			for _, line := range e.rawLines {
				if !strings.Contains(line, `"path":"/_gateway/`) && strings.Contains(line, `"route":"`+m[2]+`"`) {
					t.Errorf("terraform/azure/%s drops route %q, which a proxied request's line has: %s", file, m[2], line)
				}
			}
		}
	}

	// The AWS module writes the namespace its dashboard and alarms read.
	main, err := os.ReadFile("../terraform/aws/main.tf")
	if err != nil {
		t.Fatal(err)
	}
	mon, err := os.ReadFile("../terraform/aws/monitoring.tf")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		src  []byte
		re   string
		what string
	}{
		{main, `EmfNamespace\s*=\s*var\.emf_namespace\b`, "main.tf writes EmfNamespace from var.emf_namespace"},
		{mon, `dashboard_namespace\s*=\s*coalesce\(var\.emf_namespace,`, "monitoring.tf's dashboard namespace is var.emf_namespace"},
		{mon, `\bnamespace\s*=\s*local\.dashboard_namespace\b`, "monitoring.tf passes the dashboard namespace to the dashboard"},
	} {
		if !regexp.MustCompile(c.re).Match(c.src) {
			t.Errorf("terraform/aws: want %s", c.what)
		}
	}
}

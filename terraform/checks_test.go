package terraform

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"fngateway/internal/settings"
)

// setting is what the gateway knows of one of its settings.
type setting struct {
	def      string
	hasDef   bool
	required bool
}

// gatewaySettings reads the settings the gateway knows from settings.Settings
// (the field names are the settings, the struct tags their defaults), and
// adds the settings source's own (internal/settings: read from the
// environment only, never from a document), with their defaults.
func gatewaySettings() map[string]setting {
	out := map[string]setting{}
	t := reflect.TypeOf(settings.Settings{})
	for i := range t.NumField() {
		f := t.Field(i)
		def, ok := f.Tag.Lookup("default")
		out[f.Name] = setting{def: def, hasDef: ok, required: f.Tag.Get("required") == "true"}
	}
	for name, s := range sourceSettings {
		out[name] = s
	}
	return out
}

// sourceSettings are the settings of the settings source
// (docs/settings.md#reloading-settings-warm-and-cold), named by
// internal/settings' constants; the defaults are those functions/settings.go
// and internal/settings apply (SettingsRefreshSecs 30 s, the Reloader's
// Interval; SettingsSourceOptional false; SettingsKeyPrefix DefaultPrefix).
var sourceSettings = map[string]setting{
	settings.SourceSetting:   {},
	settings.RefreshSetting:  {def: "30", hasDef: true},
	settings.OptionalSetting: {def: "false", hasDef: true},
	settings.PrefixSetting:   {def: settings.DefaultPrefix, hasDef: true},
	settings.LabelSetting:    {},
}

// spec says where a module writes the gateway's settings and which other
// names it may write.
type spec struct {
	dir string
	// settingsAt is the resource and argument path of the app settings.
	settingsAt []string
	// platform are the names the host itself reads, not the gateway.
	platform []string
	// notHere are gateway settings the module does not expose, and why.
	notHere map[string]string
	// sample are values for the variables without a default.
	sample vars
	// limitAt is the resource whose preconditions nest the budgets.
	limitAt string
	// lifecycleDays is the resource and argument path of the result expiry.
	lifecycleDays []string
}

var sampleHosts = vars{"hosts": cty.ListVal([]cty.Value{cty.StringVal("https://backend.example")})}

var azureSpec = spec{
	dir:        "azure",
	settingsAt: []string{"azurerm_function_app_flex_consumption.gateway", "app_settings"},
	platform: []string{
		"AzureWebJobsStorage__accountName",
		"AzureWebJobsStorage__blobServiceUri",
		"AzureWebJobsStorage__queueServiceUri",
		"AzureWebJobsStorage__credential",
		"AzureFunctionsJobHost__functionTimeout",
		// The instance's memory (var.instance_memory_in_mb), read by
		// functions/memory.go beside Lambda's AWS_LAMBDA_FUNCTION_MEMORY_SIZE.
		"InstanceMemoryMB",
		"APPLICATIONINSIGHTS_CONNECTION_STRING",
		"AzureFunctionsJobHost__telemetryMode",
		"OTEL_EXPORTER_OTLP_ENDPOINT",
		"OTEL_EXPORTER_OTLP_HEADERS",
		"OTEL_SERVICE_NAME",
	},
	notHere: map[string]string{
		"ListenAddr":            "local host only",
		"AzureWebJobsStorage":   "identity-based: AzureWebJobsStorage__* instead of a connection string (the provider writes a key-less one the module leaves alone: terraform/azure/main.tf)",
		"InvokeMode":            "Lambda only",
		"EmfNamespace":          "CloudWatch only: metrics reach Azure Monitor over OpenTelemetry",
		"NotificationTopicArns": "AWS only: notifications go to Storage queues on Azure",
		"SettingsSource":        "no variable: written from the App Configuration store (warm_settings.tf) when warm_settings is set (TestWarmSettingsRestartNothing)",
		"SettingsKeyPrefix":     "the module writes warm_settings under Warm:, the gateway's default (SimpleL7Proxy's layout)",
	},
	sample: sampleHosts.with(vars{
		"name": cty.StringVal("fngw"), "resource_group_name": cty.StringVal("rg"), "location": cty.StringVal("swedencentral"),
	}),
	limitAt:       "azurerm_function_app_flex_consumption.gateway",
	lifecycleDays: []string{"azurerm_storage_management_policy.results", "rule", "actions", "base_blob", "delete_after_days_since_creation_greater_than"},
}

var awsSpec = spec{
	dir:        "aws",
	settingsAt: []string{"aws_lambda_function.gateway", "environment", "variables"},
	platform: []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_SERVICE_NAME",
		// The AppConfig Agent Lambda extension's poll interval
		// (warm_settings_source = appconfig).
		"AWS_APPCONFIG_EXTENSION_POLL_INTERVAL_SECONDS",
	},
	notHere: map[string]string{
		"ListenAddr":          "local host only",
		"AzureWebJobsStorage": "Azure only",
		// TestNotificationQueuesOwned checks it is written when there are topics.
		"NotificationTopicArns": "no variable: written from the SNS topics the module creates (aws_sns_topic.notifications), when there are any",
		"SettingsSource":        "no variable: written from the settings object or AppConfig profile (warm_settings.tf) when warm_settings is set (TestWarmSettingsRestartNothing)",
		"SettingsKeyPrefix":     "Azure App Configuration only: the module's source is an S3 object or AWS AppConfig",
		"SettingsLabel":         "Azure App Configuration only: the module's source is an S3 object or AWS AppConfig",
	},
	sample:        sampleHosts.with(vars{"name": cty.StringVal("fngw"), "package_path": cty.StringVal("dist/aws-lambda.zip")}),
	limitAt:       "aws_lambda_function.gateway",
	lifecycleDays: []string{"aws_s3_bucket_lifecycle_configuration.results", "rule", "expiration", "days"},
}

// writtenSettings evaluates the settings the module writes for these values.
func writtenSettings(m *module, sp spec, given vars) (map[string]cty.Value, error) {
	e, err := m.eval(sp.sample.with(given))
	if err != nil {
		return nil, err
	}
	v, err := e.attr(sp.settingsAt[0], sp.settingsAt[1:]...)
	if err != nil {
		return nil, err
	}
	if !v.IsKnown() || v.IsNull() || !(v.Type().IsObjectType() || v.Type().IsMapType()) {
		return nil, fmt.Errorf("%s: settings are not a known map: %#v", m.name, v)
	}
	return v.AsValueMap(), nil
}

// checkSettingsKnown reports every name the module writes, or may write
// (the keys of local.gateway_settings), that neither the gateway nor the
// host reads.
func checkSettingsKnown(m *module, sp spec, known map[string]setting) []string {
	var problems []string
	allowed := func(name string) bool {
		_, ok := known[name]
		return ok || contains(sp.platform, name)
	}
	written, err := writtenSettings(m, sp, nil)
	if err != nil {
		return []string{err.Error()}
	}
	names := keys(written)
	gs, err := gatewaySettingsExprs(m)
	if err != nil {
		return []string{err.Error()}
	}
	names = append(names, keys(gs)...)
	sort.Strings(names)
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		if !allowed(n) {
			problems = append(problems, fmt.Sprintf("%s writes %s, which the gateway does not read (not a settings.Settings field nor a settings source's setting) and which is not a documented host setting", m.name, n))
		}
	}
	return problems
}

// gatewaySettingsExprs returns local.gateway_settings evaluated with the
// variables' defaults (placeholders for those without one).
func gatewaySettingsExprs(m *module) (map[string]cty.Value, error) {
	e, err := m.eval(sampleHosts.filterDeclared(m))
	if err != nil {
		return nil, err
	}
	v, err := e.localValue("gateway_settings")
	if err != nil {
		return nil, err
	}
	if !v.Type().IsObjectType() {
		return nil, fmt.Errorf("%s: local.gateway_settings is not an object", m.name)
	}
	return v.AsValueMap(), nil
}

// filterDeclared keeps the values of variables m declares, and gives the
// others without a default a placeholder of their type.
func (vs vars) filterDeclared(m *module) vars {
	out := vars{}
	for name, v := range m.vars {
		if given, ok := vs[name]; ok {
			out[name] = given
			continue
		}
		if v.def == cty.NilVal {
			out[name] = placeholder(v.ty)
		}
	}
	return out
}

func placeholder(ty cty.Type) cty.Value {
	switch {
	case ty == cty.String:
		return cty.StringVal("x")
	case ty == cty.Number:
		return cty.NumberIntVal(1)
	case ty == cty.Bool:
		return cty.False
	case ty.IsListType():
		return cty.ListVal([]cty.Value{placeholder(ty.ElementType())})
	}
	return cty.NullVal(ty)
}

// checkDefaults reports every gateway setting whose value, written with
// the variables' defaults, is not the gateway's default (a setting without
// a default must not be written; a required one must have no default), and
// every local.gateway_defaults entry that is not the gateway's.
func checkDefaults(m *module, known map[string]setting) []string {
	var problems []string
	gs, err := gatewaySettingsExprs(m)
	if err != nil {
		return []string{err.Error()}
	}
	for _, name := range keys(gs) {
		s, ok := known[name]
		if !ok {
			continue // checkSettingsKnown reports it
		}
		v := gs[name]
		if s.required {
			for _, vn := range settingVars(m, name) {
				if m.vars[vn].def != cty.NilVal {
					problems = append(problems, fmt.Sprintf("%s: %s is required by the gateway, but var.%s has a default", m.name, name, vn))
				}
			}
			continue
		}
		got, isSet := text(v)
		switch {
		case !s.hasDef && isSet:
			problems = append(problems, fmt.Sprintf("%s: %s has no gateway default, but the module's default writes %q (want null)", m.name, name, got))
		case s.hasDef && !isSet:
			problems = append(problems, fmt.Sprintf("%s: %s defaults to %q in the gateway, but the module's default writes nothing", m.name, name, s.def))
		case s.hasDef && !sameValue(got, s.def):
			problems = append(problems, fmt.Sprintf("%s: %s defaults to %q in the gateway, but the module's default is %q", m.name, name, s.def, got))
		}
	}
	e, err := m.eval(sampleHosts.filterDeclared(m))
	if err != nil {
		return append(problems, err.Error())
	}
	defs, err := e.localValue("gateway_defaults")
	if err != nil {
		return append(problems, err.Error())
	}
	for name, v := range defs.AsValueMap() {
		s, ok := known[name]
		got, _ := text(v)
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s: local.gateway_defaults has %s, which the gateway does not read", m.name, name))
		case !s.hasDef || !sameValue(got, s.def):
			problems = append(problems, fmt.Sprintf("%s: local.gateway_defaults.%s is %q, the gateway's default is %q", m.name, name, got, s.def))
		}
	}
	return problems
}

// settingVars returns the variables local.gateway_settings.<name> refers to.
func settingVars(m *module, name string) []string {
	oc, ok := m.locals["gateway_settings"].(*hclsyntax.ObjectConsExpr)
	if !ok {
		return nil
	}
	var out []string
	for _, item := range oc.Items {
		k, diags := item.KeyExpr.Value(nil)
		if diags.HasErrors() || k.Type() != cty.String || k.AsString() != name {
			continue
		}
		for _, t := range item.ValueExpr.Variables() {
			if t.RootName() != "var" || len(t) < 2 {
				continue
			}
			if a, ok := t[1].(hcl.TraverseAttr); ok {
				out = append(out, a.Name)
			}
		}
	}
	return out
}

// checkComplete reports every gateway setting the module neither writes
// nor lists in spec.notHere.
func checkComplete(m *module, sp spec, known map[string]setting) []string {
	gs, err := gatewaySettingsExprs(m)
	if err != nil {
		return []string{err.Error()}
	}
	written, err := writtenSettings(m, sp, nil)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	for _, name := range keys(known) {
		_, inGateway := gs[name]
		_, inWritten := written[name]
		if !inGateway && !inWritten && sp.notHere[name] == "" {
			problems = append(problems, fmt.Sprintf("%s: the gateway reads %s, but the module has no variable for it (add one, or list it in notHere with the reason)", m.name, name))
		}
	}
	return problems
}

// checkLifecycle reports an AsyncTTLSecs whose results the storage would
// delete before the request expires (or never).
func checkLifecycle(m *module, sp spec) []string {
	var problems []string
	for _, ttl := range []float64{0.5, 1, 3600, 86399, 86400, 86400.5, 86401, 30 * 86400, 400 * 86400} {
		e, err := m.eval(sp.sample.with(vars{"async_ttl_secs": cty.NumberFloatVal(ttl)}))
		if err != nil {
			return append(problems, err.Error())
		}
		v, err := e.attr(sp.lifecycleDays[0], sp.lifecycleDays[1:]...)
		if err != nil {
			return append(problems, err.Error())
		}
		days, ok := number(v)
		if !ok || days < 1 || days != math.Trunc(days) || days*86400 < ttl {
			problems = append(problems, fmt.Sprintf("%s: with AsyncTTLSecs=%v the results expire after %#v days: want a whole number of days >= 1 covering the TTL", m.name, ttl, v))
		}
	}
	return problems
}

// checkVisibility reports a continuation queue whose visibility timeout is
// less than 6 times the function timeout, and a variable validation that
// lets one through.
func checkVisibility(m *module, sp spec) []string {
	var problems []string
	for _, timeout := range []int64{1, 60, 120, 900} {
		given := vars{"lambda_timeout": cty.NumberIntVal(timeout)}
		e, err := m.eval(sp.sample.with(given))
		if err != nil {
			return append(problems, err.Error())
		}
		vis, err1 := e.attr("aws_sqs_queue.continuations", "visibility_timeout_seconds")
		fn, err2 := e.attr("aws_lambda_function.gateway", "timeout")
		if err1 != nil || err2 != nil {
			return append(problems, fmt.Sprint(err1, err2))
		}
		v, ok1 := number(vis)
		f, ok2 := number(fn)
		if !ok1 || !ok2 || v < 6*f {
			problems = append(problems, fmt.Sprintf("%s: lambda_timeout=%d gives a visibility timeout of %#v for a function timeout of %#v: want at least 6 times", m.name, timeout, vis, fn))
		}
	}
	// A visibility given explicitly must be refused below 6 times.
	if _, ok := m.vars["queue_visibility_timeout_secs"]; ok {
		e, err := m.eval(sp.sample.with(vars{"lambda_timeout": cty.NumberIntVal(60), "queue_visibility_timeout_secs": cty.NumberIntVal(359)}))
		if err != nil {
			return append(problems, err.Error())
		}
		if len(e.failedValidations()) == 0 {
			problems = append(problems, m.name+": queue_visibility_timeout_secs=359 with lambda_timeout=60 passes validation: want it refused (< 6 times)")
		}
	}
	return problems
}

// outcome is whether a set of values must be accepted.
type outcome struct {
	given  vars
	accept bool
}

// checkOutcomes reports every case whose validations and preconditions do
// not accept or refuse it as wanted.
func checkOutcomes(m *module, sp spec, cases []outcome) []string {
	var problems []string
	for _, c := range cases {
		e, err := m.eval(sp.sample.with(c.given))
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		failed := append(e.failedValidations(), e.failedPreconditions(sp.limitAt)...)
		switch {
		case c.accept && len(failed) > 0:
			problems = append(problems, fmt.Sprintf("%s: %s: want accepted, got %q", m.name, describe(c.given), failed))
		case !c.accept && len(failed) == 0:
			problems = append(problems, fmt.Sprintf("%s: %s: want refused, got accepted", m.name, describe(c.given)))
		}
	}
	return problems
}

func report(t *testing.T, what string, problems []string) {
	t.Helper()
	for _, p := range problems {
		t.Errorf("%s: %s", what, p)
	}
}

// text returns a known string value's text, or a number's or bool's as
// tostring would write it; false for null or unknown.
func text(v cty.Value) (string, bool) {
	if v.IsNull() || !v.IsKnown() {
		return "", false
	}
	switch v.Type() {
	case cty.String:
		return v.AsString(), true
	case cty.Number:
		return v.AsBigFloat().Text('f', -1), true
	case cty.Bool:
		return strconv.FormatBool(v.True()), true
	}
	return fmt.Sprintf("%#v", v), true
}

func number(v cty.Value) (float64, bool) {
	if v.IsNull() || !v.IsKnown() || v.Type() != cty.Number {
		return 0, false
	}
	f, _ := v.AsBigFloat().Float64()
	return f, true
}

// sameValue compares two setting texts as values: "300" and "300.0" are the
// same number.
func sameValue(a, b string) bool {
	fa, errA := strconv.ParseFloat(a, 64)
	fb, errB := strconv.ParseFloat(b, 64)
	if errA == nil && errB == nil {
		return fa == fb
	}
	return a == b
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func stringsToValues(m map[string]string) map[string]cty.Value {
	out := map[string]cty.Value{}
	for k, v := range m {
		out[k] = cty.StringVal(v)
	}
	return out
}

func describe(vs vars) string {
	if len(vs) == 0 {
		return "defaults"
	}
	parts := make([]string, 0, len(vs))
	for _, k := range keys(vs) {
		s, ok := text(vs[k])
		if !ok {
			s = "…"
		}
		if !vs[k].Type().IsPrimitiveType() {
			s = "…"
		}
		parts = append(parts, k+"="+s)
	}
	return strings.Join(parts, " ")
}

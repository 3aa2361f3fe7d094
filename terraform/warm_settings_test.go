package terraform

import (
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"fngateway/internal/settings"
)

// warmSample is a warm_settings value: a deadline and the routes.
var warmSample = cty.MapVal(map[string]cty.Value{
	"DefaultTTLSecs": cty.StringVal("60"),
	"Routes":         cty.StringVal(`[{"prefix":"/api","timeoutMs":5000}]`),
})

// warmChanged is warmSample after an operator's WARM change.
var warmChanged = cty.MapVal(map[string]cty.Value{
	"DefaultTTLSecs": cty.StringVal("120"),
	"Routes":         cty.StringVal(`[{"prefix":"/api","timeoutMs":5000}]`),
})

// warmSource is, per module, what holds warm_settings: the resources a WARM
// change rewrites, which the function's settings must not refer to.
var warmSource = map[string][]string{
	"azure": {"azurerm_app_configuration_key.warm", "azurerm_app_configuration_key.sentinel"},
	"aws":   {"aws_s3_object.warm_settings", "aws_appconfig_hosted_configuration_version.settings", "aws_appconfig_deployment.settings"},
}

// appConfigSample selects AWS AppConfig for warm_settings.
var appConfigSample = vars{
	"warm_settings_source":          cty.StringVal("appconfig"),
	"appconfig_extension_layer_arn": cty.StringVal("arn:aws:lambda:eu-west-1:434848589818:layer:AWS-AppConfig-Extension-Arm64:1"),
}

// TestWarmSettingsRestartNothing checks that a change of warm_settings
// changes no app setting (Azure) or environment variable (AWS) of the
// function, so that terraform apply restarts nothing: the settings written
// are the same before and after the change, they name the source in
// SettingsSource, and neither the function nor any local it reads refers to
// the resources holding the values.
func TestWarmSettingsRestartNothing(t *testing.T) {
	existingStore := vars{"app_configuration_id": cty.StringVal("/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.AppConfiguration/configurationStores/Fngw-Store")}
	for _, c := range []struct {
		sp         spec
		given      vars
		wantSource string // afterApply when known only after apply
	}{
		{azureSpec, nil, afterApply},
		{azureSpec, existingStore, "https://fngw-store.azconfig.io"},
		{awsSpec, nil, afterApply},
		{awsSpec, appConfigSample, "appconfig:fngw/gateway/settings"},
	} {
		t.Run(c.sp.dir+" "+describe(c.given), func(t *testing.T) {
			m, err := loadModule(c.sp.dir)
			if err != nil {
				t.Fatal(err)
			}
			none, err := writtenSettings(m, c.sp, c.given)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := none[settings.SourceSetting]; ok {
				t.Errorf("without warm_settings: %s written, want none", settings.SourceSetting)
			}
			before, err := writtenSettings(m, c.sp, c.given.with(vars{"warm_settings": warmSample}))
			if err != nil {
				t.Fatal(err)
			}
			after, err := writtenSettings(m, c.sp, c.given.with(vars{"warm_settings": warmChanged}))
			if err != nil {
				t.Fatal(err)
			}
			src, ok := before[settings.SourceSetting]
			switch {
			case !ok:
				t.Fatalf("with warm_settings: no %s written", settings.SourceSetting)
			case c.wantSource == afterApply && src.IsKnown():
				t.Errorf("%s: %#v, want the source's location, known after apply", settings.SourceSetting, src)
			case c.wantSource != afterApply && textOf(src) != c.wantSource:
				t.Errorf("%s: %q, want %q", settings.SourceSetting, textOf(src), c.wantSource)
			}
			// The warm values themselves are no setting of the function.
			for name := range warmSample.AsValueMap() {
				if _, ok := before[name]; ok {
					t.Errorf("%s is written as a setting of the function: want it in the source only", name)
				}
			}
			if g, w := keys(after), keys(before); !reflect.DeepEqual(g, w) {
				t.Fatalf("a WARM change changes the settings written: %q, then %q", w, g)
			}
			for k, v := range before {
				if !v.RawEquals(after[k]) {
					t.Errorf("a WARM change changes the setting %s: %#v, then %#v", k, v, after[k])
				}
			}
			for _, p := range referencesTo(m, c.sp.settingsAt[0], warmSource[c.sp.dir]) {
				t.Error(p)
			}
		})
	}
}

// referencesTo reports every reference of the resource (its arguments and
// nested blocks, and the locals they read, transitively) to one of targets
// ("type.name"): a value known only after the target's apply, which would
// change the resource whenever the target does.
func referencesTo(m *module, resource string, targets []string) []string {
	var problems []string
	seen := map[string]bool{}
	var visit func(where string, expr hclsyntax.Expression)
	visit = func(where string, expr hclsyntax.Expression) {
		for _, tr := range expr.Variables() {
			root := tr.RootName()
			name := traversalText(&hclsyntax.ScopeTraversalExpr{Traversal: tr})
			if root == "local" {
				parts := strings.SplitN(name, ".", 3)
				if len(parts) < 2 || seen[parts[1]] {
					continue
				}
				seen[parts[1]] = true
				if e, ok := m.locals[parts[1]].(hclsyntax.Expression); ok {
					visit("local."+parts[1], e)
				}
				continue
			}
			for _, target := range targets {
				if name == target || strings.HasPrefix(name, target+".") {
					problems = append(problems, fmt.Sprintf("%s: %s refers to %s, which a WARM change rewrites: the function would change (and restart) with it", resource, where, target))
				}
			}
		}
	}
	var body func(b *hclsyntax.Body)
	body = func(b *hclsyntax.Body) {
		for _, a := range b.Attributes {
			visit(a.Name, a.Expr)
		}
		for _, nb := range b.Blocks {
			body(nb.Body)
		}
	}
	body(m.resources[resource].Body)
	return problems
}

// TestWarmSettingsSource checks what each module writes to the source: the
// document (AWS) or the keys (Azure) the gateway reads back as exactly
// warm_settings (settings.ParseDocument: every name a setting, none the
// source's own), and on Azure a sentinel under the gateway's default prefix
// whose value changes with any key and only then.
func TestWarmSettingsSource(t *testing.T) {
	want := map[string]string{}
	for k, v := range warmSample.AsValueMap() {
		want[k] = v.AsString()
	}

	t.Run("aws", func(t *testing.T) {
		m, err := loadModule("aws")
		if err != nil {
			t.Fatal(err)
		}
		e, err := m.eval(awsSpec.sample.with(vars{"warm_settings": warmSample}))
		if err != nil {
			t.Fatal(err)
		}
		content, err := e.attr("aws_s3_object.warm_settings", "content")
		if err != nil {
			t.Fatal(err)
		}
		got, err := settings.ParseDocument([]byte(textOf(content)))
		if err != nil {
			t.Fatalf("the settings document %s: %v", textOf(content), err)
		}
		if !maps.Equal(got, want) {
			t.Errorf("the settings document reads as %q, want %q", got, want)
		}

		// With AppConfig: the hosted configuration, deployed.
		e, err = m.eval(awsSpec.sample.with(appConfigSample).with(vars{"warm_settings": warmSample}))
		if err != nil {
			t.Fatal(err)
		}
		content, err = e.attr("aws_appconfig_hosted_configuration_version.settings", "content")
		if err != nil {
			t.Fatal(err)
		}
		if got, err = settings.ParseDocument([]byte(textOf(content))); err != nil || !maps.Equal(got, want) {
			t.Errorf("the hosted configuration reads as %q (%v), want %q", got, err, want)
		}
		if v, err := e.attr("aws_appconfig_deployment.settings", "deployment_strategy_id"); err != nil || textOf(v) != "AppConfig.AllAtOnce" {
			t.Errorf("deployment strategy %#v (%v), want AppConfig.AllAtOnce", v, err)
		}
		// The extension polls as often as the gateway reads it.
		written, err := writtenSettings(m, awsSpec, appConfigSample.with(vars{"warm_settings": warmSample, "settings_refresh_secs": cty.NumberIntVal(45)}))
		if err != nil {
			t.Fatal(err)
		}
		if g := textOf(written["AWS_APPCONFIG_EXTENSION_POLL_INTERVAL_SECONDS"]); g != "45" {
			t.Errorf("AWS_APPCONFIG_EXTENSION_POLL_INTERVAL_SECONDS %q, want settings_refresh_secs (45)", g)
		}
		if g := textOf(written[settings.RefreshSetting]); g != "45" {
			t.Errorf("%s %q, want 45", settings.RefreshSetting, g)
		}
	})

	t.Run("azure", func(t *testing.T) {
		m, err := loadModule("azure")
		if err != nil {
			t.Fatal(err)
		}
		sentinel := func(ws cty.Value) string {
			t.Helper()
			e, err := m.eval(azureSpec.sample.with(vars{"warm_settings": ws}))
			if err != nil {
				t.Fatal(err)
			}
			if k, err := e.attr("azurerm_app_configuration_key.sentinel", "key"); err != nil || textOf(k) != settings.DefaultPrefix+"Sentinel" {
				t.Errorf("sentinel key %#v (%v), want %s", k, err, settings.DefaultPrefix+"Sentinel")
			}
			v, err := e.attr("azurerm_app_configuration_key.sentinel", "value")
			if err != nil {
				t.Fatal(err)
			}
			if !v.IsKnown() || v.IsNull() || textOf(v) == "" {
				t.Fatalf("sentinel value %#v: want a known value from warm_settings", v)
			}
			return textOf(v)
		}
		if a, b := sentinel(warmSample), sentinel(warmSample); a != b {
			t.Errorf("the sentinel changes with nothing changed: %q, then %q", a, b)
		}
		if a, b := sentinel(warmSample), sentinel(warmChanged); a == b {
			t.Errorf("the sentinel %q stays the same across a change of warm_settings", a)
		}

		// Each key, as its for_each instance writes it.
		e, err := m.eval(azureSpec.sample.with(vars{"warm_settings": warmSample}))
		if err != nil {
			t.Fatal(err)
		}
		if fe, err := e.attr("azurerm_app_configuration_key.warm", "for_each"); err != nil || !fe.RawEquals(warmSample) {
			t.Fatalf("azurerm_app_configuration_key.warm: for_each %#v (%v), want warm_settings", fe, err)
		}
		got := map[string]string{}
		for name, value := range warmSample.AsValueMap() {
			e.ctx.Variables["each"] = cty.ObjectVal(map[string]cty.Value{"key": cty.StringVal(name), "value": value})
			k, err1 := e.attr("azurerm_app_configuration_key.warm", "key")
			v, err2 := e.attr("azurerm_app_configuration_key.warm", "value")
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			setting, ok := strings.CutPrefix(textOf(k), settings.DefaultPrefix)
			if !ok {
				t.Errorf("key %q: want it under %s (SettingsKeyPrefix's default)", textOf(k), settings.DefaultPrefix)
			}
			got[setting] = textOf(v)
		}
		doc := "{"
		for k, v := range got {
			if doc != "{" {
				doc += ","
			}
			doc += fmt.Sprintf("%q:%q", k, v)
		}
		parsed, err := settings.ParseDocument([]byte(doc + "}"))
		if err != nil {
			t.Fatalf("the keys read back: %v", err)
		}
		if !maps.Equal(parsed, want) {
			t.Errorf("the keys read back as %q, want %q", parsed, want)
		}
	})
}

// TestWarmSettingsNames checks that warm_settings takes every WARM setting
// and refuses the names the source cannot hold: the source's own settings
// (environment only) and, on Azure, the sentinel the module writes.
func TestWarmSettingsNames(t *testing.T) {
	for _, sp := range []spec{azureSpec, awsSpec} {
		t.Run(sp.dir, func(t *testing.T) {
			m, err := loadModule(sp.dir)
			if err != nil {
				t.Fatal(err)
			}
			var cases []outcome
			for name, class := range settings.Classes {
				if class == settings.Warm {
					cases = append(cases, outcome{vars{"warm_settings": cty.MapVal(map[string]cty.Value{name: cty.StringVal("1")})}, true})
				}
			}
			refused := []string{settings.SourceSetting, settings.RefreshSetting, "default_ttl_secs", "Warm:DefaultTTLSecs"}
			if sp.dir == "azure" {
				refused = append(refused, "Sentinel")
			}
			for _, name := range refused {
				cases = append(cases, outcome{vars{"warm_settings": cty.MapVal(map[string]cty.Value{name: cty.StringVal("1")})}, false})
			}
			if sp.dir == "aws" {
				// AppConfig without the extension's layer is refused.
				cases = append(cases,
					outcome{vars{"warm_settings": warmSample, "warm_settings_source": cty.StringVal("appconfig")}, false},
					outcome{appConfigSample.with(vars{"warm_settings": warmSample}), true})
			}
			report(t, "warm_settings names", checkOutcomes(m, sp, cases))
		})
	}
}

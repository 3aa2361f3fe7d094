package terraform

import (
	"archive/zip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

const (
	sampleClientID = "11111111-2222-3333-4444-555555555555"
	sampleTenantID = "99999999-8888-7777-6666-555555555555"
	sampleCallerID = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
)

// frontDoor is what the Azure module puts in front of the gateway for some
// values, evaluated as Terraform would before any provider is involved.
type frontDoor struct {
	auth    map[string]cty.Value // auth_settings_v2's arguments, nested blocks as "block.argument"; nil: no block
	outputs map[string]cty.Value // the module's outputs that say it
}

// azureFrontDoor evaluates the Azure module's auth_settings_v2 block (a
// dynamic block: one instance or none) and its front door outputs.
func azureFrontDoor(m *module, given vars) (*frontDoor, error) {
	e, err := m.eval(given)
	if err != nil {
		return nil, err
	}
	fd := &frontDoor{outputs: map[string]cty.Value{}}
	app, ok := m.resources["azurerm_function_app_flex_consumption.gateway"]
	if !ok {
		return nil, fmt.Errorf("%s: no azurerm_function_app_flex_consumption.gateway", m.name)
	}
	var dyn *hclsyntax.Block
	for _, b := range app.Body.Blocks {
		if b.Type == "auth_settings_v2" {
			return nil, fmt.Errorf("%s: auth_settings_v2 is a static block: authentication could not turn it off", m.name)
		}
		if b.Type == "dynamic" && len(b.Labels) == 1 && b.Labels[0] == "auth_settings_v2" {
			dyn = b
		}
	}
	if dyn == nil {
		return nil, fmt.Errorf("%s: the function app has no auth_settings_v2: nothing stands in front of the gateway but the function key", m.name)
	}
	forEach, err := e.value(dyn.Body.Attributes["for_each"].Expr)
	if err != nil {
		return nil, fmt.Errorf("auth_settings_v2 for_each: %w", err)
	}
	if !forEach.IsKnown() {
		return nil, fmt.Errorf("auth_settings_v2 for_each is not known before apply")
	}
	if n := forEach.LengthInt(); n > 1 {
		return nil, fmt.Errorf("auth_settings_v2: %d instances, want at most one", n)
	}
	for it := forEach.ElementIterator(); it.Next(); {
		key, val := it.Element()
		e.ctx.Variables["auth_settings_v2"] = cty.ObjectVal(map[string]cty.Value{"key": key, "value": val})
		fd.auth = map[string]cty.Value{}
		var walk func(prefix string, body *hclsyntax.Body) error
		walk = func(prefix string, body *hclsyntax.Body) error {
			for name, a := range body.Attributes {
				v, err := e.value(a.Expr)
				if err != nil {
					return fmt.Errorf("auth_settings_v2 %s%s: %w", prefix, name, err)
				}
				fd.auth[prefix+name] = v
			}
			for _, nb := range body.Blocks {
				if err := walk(prefix+nb.Type+".", nb.Body); err != nil {
					return err
				}
			}
			return nil
		}
		for _, cb := range dyn.Body.Blocks {
			if cb.Type == "content" {
				if err := walk("", cb.Body); err != nil {
					return nil, err
				}
			}
		}
		delete(e.ctx.Variables, "auth_settings_v2")
	}
	outs, err := outputExprs(filepath.Join(m.name, "outputs.tf"))
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"authentication", "package_auth_level", "entra_scope"} {
		expr, ok := outs[name]
		if !ok {
			return nil, fmt.Errorf("%s: no output %s", m.name, name)
		}
		if fd.outputs[name], err = e.value(expr); err != nil {
			return nil, fmt.Errorf("output %s: %w", name, err)
		}
	}
	return fd, nil
}

// outputExprs reads the value expressions of a file's output blocks.
func outputExprs(path string) (map[string]hcl.Expression, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, diags := hclparse.NewParser().ParseHCL(src, path)
	if diags.HasErrors() {
		return nil, fmt.Errorf("%s: %s", path, diags.Error())
	}
	out := map[string]hcl.Expression{}
	for _, b := range f.Body.(*hclsyntax.Body).Blocks {
		if b.Type == "output" {
			if a, ok := b.Body.Attributes["value"]; ok {
				out[b.Labels[0]] = a.Expr
			}
		}
	}
	return out, nil
}

// gatewayAuthLevel reads the HTTP function's authLevel from a
// function.json.
func gatewayAuthLevel(src []byte) (string, error) {
	var fj struct {
		Bindings []struct {
			Type      string `json:"type"`
			AuthLevel string `json:"authLevel"`
		} `json:"bindings"`
	}
	if err := json.Unmarshal(src, &fj); err != nil {
		return "", err
	}
	for _, b := range fj.Bindings {
		if b.Type == "httpTrigger" {
			return b.AuthLevel, nil
		}
	}
	return "", fmt.Errorf("no httpTrigger binding")
}

func textOf(v cty.Value) string {
	s, _ := text(v)
	return s
}

func listOf(v cty.Value) []string {
	if v.IsNull() || !v.IsKnown() || !v.CanIterateElements() {
		return nil
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, ev := it.Element()
		out = append(out, textOf(ev))
	}
	return out
}

// TestAzureFrontDoor checks what the Azure module puts in front of the
// gateway: by default the function key the package demands (and nothing
// open); with authentication = entra, App Service Authentication that
// answers 401 to a request without a token for the app registration; with
// none, nothing, and the package built anonymous. The package's own
// function.json agrees with the default.
func TestAzureFrontDoor(t *testing.T) {
	m, err := loadModule("azure")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("../functions/gateway/function.json")
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := gatewayAuthLevel(src)
	if err != nil {
		t.Fatalf("functions/gateway/function.json: %v", err)
	}

	t.Run("default", func(t *testing.T) {
		fd, err := azureFrontDoor(m, azureSpec.sample)
		if err != nil {
			t.Fatal(err)
		}
		if got := textOf(fd.outputs["authentication"]); got == "none" || got == "" {
			t.Errorf("default authentication %q: want the gateway authenticated unless the operator opts out", got)
		}
		if got := textOf(fd.outputs["package_auth_level"]); got != "function" {
			t.Errorf("default package_auth_level %q, want function (a key on every request)", got)
		}
		if shipped != textOf(fd.outputs["package_auth_level"]) {
			t.Errorf("functions/gateway/function.json ships authLevel %q, but the module's default wants %q", shipped, textOf(fd.outputs["package_auth_level"]))
		}
		if fd.auth != nil {
			t.Errorf("auth_settings_v2 without authentication = entra: %v", fd.auth)
		}
		if !fd.outputs["entra_scope"].IsNull() {
			t.Errorf("entra_scope = %#v without entra, want null", fd.outputs["entra_scope"])
		}
	})

	t.Run("entra", func(t *testing.T) {
		fd, err := azureFrontDoor(m, azureSpec.sample.with(vars{
			"authentication":             cty.StringVal("entra"),
			"entra_client_id":            cty.StringVal(sampleClientID),
			"entra_tenant_id":            cty.StringVal(sampleTenantID),
			"entra_allowed_applications": cty.ListVal([]cty.Value{cty.StringVal(sampleCallerID)}),
		}))
		if err != nil {
			t.Fatal(err)
		}
		if fd.auth == nil {
			t.Fatal("authentication = entra configures no auth_settings_v2")
		}
		want := map[string]string{
			"auth_enabled":                             "true",
			"require_authentication":                   "true",
			"unauthenticated_action":                   "Return401",
			"require_https":                            "true",
			"active_directory_v2.client_id":            sampleClientID,
			"active_directory_v2.tenant_auth_endpoint": "https://login.microsoftonline.com/" + sampleTenantID + "/v2.0",
			"login.token_store_enabled":                "false",
		}
		for k, w := range want {
			v, ok := fd.auth[k]
			got := ""
			if ok && v.IsKnown() && !v.IsNull() {
				switch v.Type() {
				case cty.Bool:
					got = fmt.Sprint(v.True())
				default:
					got = textOf(v)
				}
			}
			if got != w {
				t.Errorf("auth_settings_v2 %s = %q, want %q", k, got, w)
			}
		}
		if got := listOf(fd.auth["active_directory_v2.allowed_audiences"]); len(got) != 1 || got[0] != "api://"+sampleClientID {
			t.Errorf("allowed_audiences %q, want the App ID URI api://%s (the client ID is always allowed)", got, sampleClientID)
		}
		if got := listOf(fd.auth["active_directory_v2.allowed_applications"]); len(got) != 1 || got[0] != sampleCallerID {
			t.Errorf("allowed_applications %q, want [%s]", got, sampleCallerID)
		}
		if got := textOf(fd.outputs["package_auth_level"]); got != "function" {
			t.Errorf("entra: package_auth_level %q, want function (the key stays wanted behind App Service Authentication)", got)
		}
		if got := textOf(fd.outputs["entra_scope"]); got != "api://"+sampleClientID+"/.default" {
			t.Errorf("entra_scope %q, want api://%s/.default", got, sampleClientID)
		}
	})

	t.Run("entra defaults", func(t *testing.T) {
		fd, err := azureFrontDoor(m, azureSpec.sample.with(vars{"authentication": cty.StringVal("entra"), "entra_client_id": cty.StringVal(sampleClientID)}))
		if err != nil {
			t.Fatal(err)
		}
		if v := fd.auth["active_directory_v2.allowed_applications"]; !v.IsNull() {
			// An empty list is not "any application": App Service would read
			// it as an allow-list that admits none.
			t.Errorf("allowed_applications = %#v with entra_allowed_applications = [], want null", v)
		}
		if v := fd.auth["active_directory_v2.tenant_auth_endpoint"]; v.IsKnown() {
			t.Errorf("tenant_auth_endpoint = %#v without entra_tenant_id, want the signed-in tenant's (known after apply)", v)
		}
	})

	t.Run("none", func(t *testing.T) {
		fd, err := azureFrontDoor(m, azureSpec.sample.with(vars{"authentication": cty.StringVal("none")}))
		if err != nil {
			t.Fatal(err)
		}
		if fd.auth != nil || textOf(fd.outputs["package_auth_level"]) != "anonymous" {
			t.Errorf("none: auth %v, package_auth_level %q; want no auth_settings_v2 and anonymous", fd.auth, textOf(fd.outputs["package_auth_level"]))
		}
	})

	// Values the module must refuse, each with the message that names it.
	for _, c := range []struct {
		name  string
		given vars
		want  string
	}{
		{"unknown mode", vars{"authentication": cty.StringVal("open")}, "must be function_keys, entra or none"},
		{"empty mode", vars{"authentication": cty.StringVal("")}, "must be function_keys, entra or none"},
		{"entra without client", vars{"authentication": cty.StringVal("entra")}, "authentication = entra needs entra_client_id"},
		{"client without entra", vars{"entra_client_id": cty.StringVal(sampleClientID)}, "entra_client_id is set but authentication is not entra"},
		{"client not a GUID", vars{"authentication": cty.StringVal("entra"), "entra_client_id": cty.StringVal("api://gateway")}, "entra_client_id value must be an application (client) ID"},
		{"tenant not a GUID", vars{"authentication": cty.StringVal("entra"), "entra_client_id": cty.StringVal(sampleClientID), "entra_tenant_id": cty.StringVal("contoso.onmicrosoft.com")}, "entra_tenant_id value must be a tenant ID"},
		{"caller not a GUID", vars{"authentication": cty.StringVal("entra"), "entra_client_id": cty.StringVal(sampleClientID), "entra_allowed_applications": cty.ListVal([]cty.Value{cty.StringVal("me")})}, "entra_allowed_applications value must list client IDs"},
		{"callers without entra", vars{"entra_allowed_applications": cty.ListVal([]cty.Value{cty.StringVal(sampleCallerID)})}, "entra_allowed_applications is set but authentication is not entra"},
	} {
		t.Run("refuses "+c.name, func(t *testing.T) {
			e, err := m.eval(azureSpec.sample.with(c.given))
			if err != nil {
				t.Fatal(err)
			}
			failed := e.failedValidations()
			if !strings.Contains(strings.Join(failed, "\n"), c.want) {
				t.Errorf("%s: validations failed %q; want one containing %q", describe(c.given), failed, c.want)
			}
		})
	}
	for _, ok := range []vars{
		{},
		{"authentication": cty.StringVal("function_keys")},
		{"authentication": cty.StringVal("none")},
		{"authentication": cty.StringVal("entra"), "entra_client_id": cty.StringVal(sampleClientID)},
	} {
		e, err := m.eval(azureSpec.sample.with(ok))
		if err != nil {
			t.Fatal(err)
		}
		if failed := e.failedValidations(); len(failed) > 0 {
			t.Errorf("%s: validations failed %q; want none", describe(ok), failed)
		}
	}
}

// TestAzureExampleFrontDoor checks that the example passes its front door
// variables to the module and shows what the guide reads.
func TestAzureExampleFrontDoor(t *testing.T) {
	ex, err := loadModule("examples/azure")
	if err != nil {
		t.Fatal(err)
	}
	e, err := ex.eval(sampleHosts.with(vars{"subscription_id": cty.StringVal("s"), "name": cty.StringVal("fngw"),
		"authentication": cty.StringVal("entra"), "entra_client_id": cty.StringVal(sampleClientID)}))
	if err != nil {
		t.Fatal(err)
	}
	_, args, err := e.callArgs("gateway")
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(args["authentication"]); got != "entra" {
		t.Errorf("the example passes authentication %q, want the example's variable (entra)", got)
	}
	if got := textOf(args["entra_client_id"]); got != sampleClientID {
		t.Errorf("the example passes entra_client_id %q, want the example's variable", got)
	}
	outs, err := outputExprs("examples/azure/outputs.tf")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"package_auth_level", "entra_scope"} {
		if _, ok := outs[name]; !ok {
			t.Errorf("examples/azure has no output %s (the deploy guide reads it)", name)
		}
	}
	m, err := loadModule("azure")
	if err != nil {
		t.Fatal(err)
	}
	if def := ex.vars["authentication"].def; textOf(def) != textOf(m.vars["authentication"].def) {
		t.Errorf("the example's authentication defaults to %q, the module's to %q: want the same", textOf(def), textOf(m.vars["authentication"].def))
	}
}

// TestAzurePackageAuthLevel builds the zip as make package-azure builds it
// with AZURE_AUTH_LEVEL=anonymous (authentication = none) and reads the
// HTTP function's authLevel back; a value the module never asks for stops
// the build, naming it.
func TestAzurePackageAuthLevel(t *testing.T) {
	bad := exec.Command("make", "-s", "package-azure", "AZURE_DIST="+t.TempDir(), "AZURE_AUTH_LEVEL=admin")
	bad.Dir = ".."
	if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), "AZURE_AUTH_LEVEL=admin: want function or anonymous") {
		t.Errorf("make package-azure AZURE_AUTH_LEVEL=admin: %v, %s; want a failure naming the value", err, out)
	}

	dist := t.TempDir()
	cmd := exec.Command("make", "-s", "package-azure", "AZURE_DIST="+dist, "AZURE_AUTH_LEVEL=anonymous")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make package-azure: %v\n%s", err, out)
	}
	zr, err := zip.OpenReader(filepath.Join(dist, "azure-functionapp.zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	f, err := zr.Open("gateway/function.json")
	if err != nil {
		t.Fatal(err)
	}
	src, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := gatewayAuthLevel(src); err != nil || got != "anonymous" {
		t.Errorf("AZURE_AUTH_LEVEL=anonymous builds gateway/function.json with authLevel %q (%v), want anonymous", got, err)
	}
	// Built for one cloud (-tags noaws): the AWS SDK is not linked.
	mods, err := zippedModules(filepath.Join(dist, "azure-functionapp.zip"), "handler")
	if err != nil {
		t.Fatal(err)
	}
	checkLinked(t, "make package-azure", mods, "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob", "github.com/aws/aws-sdk-go-v2", "github.com/aws/smithy-go")
	// What needs the AWS SDK stops the start-up with one line naming the
	// setting and the build.
	if runtime.GOOS == "linux" && runtime.GOARCH == "amd64" {
		// Liveness only: the handler stops at once, before it listens.
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(dist, "azure-functionapp", "handler"))
		cmd.Env = []string{"Hosts=http://127.0.0.1:1", "AsyncModeEnabled=true", "AsyncStore=s3://bucket",
			"AsyncQueue=https://sqs.eu-west-1.amazonaws.com/123456789012/q", "ListenAddr=127.0.0.1:0", "AWS_REGION=eu-west-1"}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		got := strings.TrimSpace(stderr.String())
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || strings.Contains(got, "\n") ||
			!strings.Contains(got, `setting AsyncStore="s3://bucket"`) || !strings.Contains(got, "-tags noaws") {
			t.Errorf("the Azure handler with AsyncStore=s3://: %v, stderr %q; want exit 2 and one line naming the setting and -tags noaws", err, got)
		}
	}
}

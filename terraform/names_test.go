package terraform

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// TestGlobalNames checks that what must be globally unique has no default a
// second deployment would collide with: the Azure example's name (the
// function app is <name>.azurewebsites.net) is required, the storage account's
// name carries a suffix derived from the resource group and name, and the
// AWS bucket's name a generated one.
func TestGlobalNames(t *testing.T) {
	ex, err := loadModule("examples/azure")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := ex.vars["name"]; !ok || v.def != cty.NilVal {
		t.Errorf("examples/azure: variable name must exist without a default (the function app's name is global)")
	}

	m, err := loadModule("azure")
	if err != nil {
		t.Fatal(err)
	}
	account := func(rg, name string) string {
		t.Helper()
		e, err := m.eval(azureSpec.sample.with(vars{"resource_group_name": cty.StringVal(rg), "name": cty.StringVal(name)}))
		if err != nil {
			t.Fatal(err)
		}
		if fails := e.failedValidations(); len(fails) > 0 {
			t.Fatalf("name %q refused: %q", name, fails)
		}
		v, err := e.localValue("storage_account_name")
		if err != nil {
			t.Fatal(err)
		}
		s, _ := text(v)
		return s
	}
	valid := regexp.MustCompile(`^[a-z0-9]{3,24}$`)
	long := "a-very-long-gateway-name-32-char"
	got := map[string]string{}
	for _, c := range [][2]string{{"rg-a", "fngateway"}, {"rg-b", "fngateway"}, {"rg-a", "fngateway2"}, {"rg-a", long}, {"rg-a", "abc"}} {
		s := account(c[0], c[1])
		if !valid.MatchString(s) {
			t.Errorf("storage account name %q for %v: want 3-24 lowercase letters and digits", s, c)
		}
		if prev, dup := got[s]; dup {
			t.Errorf("storage account name %q for both %s and %v: want a suffix that differs", s, prev, c)
		}
		got[s] = strings.Join(c[:], "/")
	}
	if s := account("rg-a", "fngateway"); !strings.HasPrefix(s, "fngateway") || s == "fngatewaygw" {
		t.Errorf("storage account name %q: want fngateway plus a derived suffix", s)
	}

	aws, err := loadModule("aws")
	if err != nil {
		t.Fatal(err)
	}
	e, err := aws.eval(awsSpec.sample)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := e.attr("aws_s3_bucket.results", "bucket_prefix"); err != nil || v.IsNull() {
		t.Errorf("aws: with bucket_name null the bucket must get a generated name (bucket_prefix): %#v, %v", v, err)
	}
}

// TestAzureRoles checks the roles the Azure module grants: to the app's
// identity, what Microsoft documents for an identity-based
// AzureWebJobsStorage, on the storage account only, and App Configuration
// Data Reader on the settings store; to the deployer, App Configuration Data
// Owner on the store it creates (roleScopes); nothing else.
func TestAzureRoles(t *testing.T) {
	m, err := loadModule("azure")
	if err != nil {
		t.Fatal(err)
	}
	e, err := m.eval(azureSpec.sample)
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for key := range m.resources {
		if !strings.HasPrefix(key, "azurerm_role_assignment.") {
			continue
		}
		v, err := e.attr(key, "role_definition_name")
		if err != nil {
			t.Fatal(err)
		}
		s, _ := text(v)
		roles = append(roles, s)
		scope := traversalText(m.resources[key].Body.Attributes["scope"].Expr)
		if want := roleScopes[s]; scope != want {
			t.Errorf("%s: %s on %q, want it on %q only", key, s, scope, want)
		}
	}
	sort.Strings(roles)
	if want := sortedKeys(roleScopes); strings.Join(roles, ",") != strings.Join(want, ",") {
		t.Errorf("roles %q, want %q", roles, want)
	}
}

// roleScopes are the roles the Azure module grants and where: the app's
// storage roles on the storage account; with warm_settings, the app's
// reader role and (for a store the module creates) the deployer's owner
// role on the App Configuration store only.
var roleScopes = map[string]string{
	"Storage Blob Data Owner":        "azurerm_storage_account.gateway.id",
	"Storage Queue Data Contributor": "azurerm_storage_account.gateway.id",
	"App Configuration Data Reader":  "local.app_configuration_id",
	"App Configuration Data Owner":   "azurerm_app_configuration.settings.id",
}

// traversalText renders an expression that is a single reference
// (a.b.c); anything else renders as "(expression)".
func traversalText(expr hclsyntax.Expression) string {
	st, ok := expr.(*hclsyntax.ScopeTraversalExpr)
	if !ok {
		return "(expression)"
	}
	parts := []string{st.Traversal.RootName()}
	for _, step := range st.Traversal[1:] {
		if a, ok := step.(hcl.TraverseAttr); ok {
			parts = append(parts, a.Name)
		}
	}
	return strings.Join(parts, ".")
}

// TestNameEdges: a name that starts or ends with a hyphen (or, on AWS, an
// underscore) is refused at plan time: the results bucket's name starts with
// the AWS name (an S3 bucket name starts and ends with a letter or digit:
// "General purpose bucket naming rules", Amazon S3 User Guide), and the Azure
// function app's host name label cannot start or end with a hyphen.
func TestNameEdges(t *testing.T) {
	for _, c := range []struct {
		dir  string
		sp   spec
		name string
		ok   bool
	}{
		{"aws", awsSpec, "gw", true}, {"aws", awsSpec, "g", true}, {"aws", awsSpec, "my_gw-1", true},
		{"aws", awsSpec, "-gw", false}, {"aws", awsSpec, "gw-", false}, {"aws", awsSpec, "_gw", false}, {"aws", awsSpec, "gw_", false},
		{"azure", azureSpec, "gw1", true}, {"azure", azureSpec, "-gw", false}, {"azure", azureSpec, "gw-", false},
	} {
		t.Run(c.dir+"/"+c.name, func(t *testing.T) {
			m, err := loadModule(c.dir)
			if err != nil {
				t.Fatal(err)
			}
			e, err := m.eval(c.sp.sample.with(vars{"name": cty.StringVal(c.name)}))
			if err != nil {
				t.Fatal(err)
			}
			fails := e.failedValidations()
			if got := len(fails) == 0; got != c.ok {
				t.Errorf("name %q: accepted %v (failed validations %q); want %v", c.name, got, fails, c.ok)
			}
		})
	}
}

// TestAzureResultContainersLimit: more result containers than the expiry
// rule's prefix_match takes (10) are refused at plan time, not by Azure at
// apply; 10 pass.
func TestAzureResultContainersLimit(t *testing.T) {
	m, err := loadModule("azure")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{8, 9} {
		var extra []cty.Value
		for i := range n {
			extra = append(extra, cty.StringVal(fmt.Sprintf("results-%d", i)))
		}
		e, err := m.eval(azureSpec.sample.with(vars{"result_containers": cty.ListVal(extra)}))
		if err != nil {
			t.Fatal(err)
		}
		fails := e.failedPreconditions("azurerm_storage_management_policy.results")
		if got, want := len(fails) > 0, n+2 > 10; got != want {
			t.Errorf("%d result containers: refused %v (%q); want refused %v", n+2, got, fails, want)
		}
	}
}

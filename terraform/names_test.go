package terraform

import (
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

// TestAzureRoles checks the roles the Azure module grants the app's identity:
// what Microsoft documents for an identity-based AzureWebJobsStorage, on the
// storage account only, and nothing else.
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
		if got := traversalText(m.resources[key].Body.Attributes["scope"].Expr); got != "azurerm_storage_account.gateway.id" {
			t.Errorf("%s: scope %q, want the storage account only", key, got)
		}
	}
	sort.Strings(roles)
	if want := []string{"Storage Blob Data Owner", "Storage Queue Data Contributor"}; strings.Join(roles, ",") != strings.Join(want, ",") {
		t.Errorf("roles %q, want %q", roles, want)
	}
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

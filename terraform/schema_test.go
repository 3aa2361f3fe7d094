package terraform

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode"

	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// The providers' schemas: the .jsii assemblies of the CDKTF provider
// packages, which HashiCorp generated from the providers' own schemas. make
// tools (make schemas) installs them; the versions are pinned in the
// Makefile (CDKTF_AWS_VERSION, CDKTF_AZURERM_VERSION).
var schemaProviders = []schemaProvider{
	{name: "aws", file: "aws.jsii", version: "6.25.0"},
	{name: "azurerm", file: "azurerm.jsii", version: "4.55.0"},
}

// newerThanSchema lists every argument or block the modules use that the
// pinned schemas do not have yet, with the provider version that added it:
// the one place for them. Each module's required_providers must demand at
// least that version (TestProviderVersions).
var newerThanSchema = []newerArgument{
	// The aws provider's CHANGELOG, 6.28.0 (January 7, 2026):
	// "resource/aws_lambda_permission: Add invoked_via_function_url argument".
	{provider: "aws", path: "resource aws_lambda_permission invoked_via_function_url", version: "6.28.0"},
}

// schemaDirs are the modules and examples held against the schemas.
var schemaDirs = []string{"aws", "azure", "examples/aws", "examples/azure"}

type schemaProvider struct {
	name    string // the provider's local name, the prefix of its types
	file    string // under .tools/schemas
	version string // the provider version the package was generated from
}

type newerArgument struct {
	provider string
	path     string // "resource <type> <argument or block path, space-separated>"
	version  string
}

// schemaFolder is where make tools puts the .jsii files.
const schemaFolder = "../.tools/schemas"

// blockSchema is one block's schema: its arguments and nested blocks.
type blockSchema struct {
	attrs  map[string]bool         // argument → required
	blocks map[string]*nestedBlock // nested block type
}

type nestedBlock struct {
	required bool
	fqn      string // the jsii struct of its body
}

// providerSchema is what one provider's assembly says.
type providerSchema struct {
	prov    schemaProvider
	structs map[string]jsiiType // datatype interfaces, by fqn
	configs map[string]string   // "resource <type>", "data <type>", "provider" → config struct fqn
	mu      sync.Mutex
	cache   map[string]*blockSchema
}

type jsiiType struct {
	Kind        string     `json:"kind"`
	Datatype    bool       `json:"datatype"`
	Docs        jsiiDocs   `json:"docs"`
	Properties  []jsiiProp `json:"properties"`
	Initializer *struct {
		Parameters []struct {
			Name string      `json:"name"`
			Type jsiiTypeRef `json:"type"`
		} `json:"parameters"`
	} `json:"initializer"`
}

type jsiiDocs struct {
	Summary string `json:"summary"`
	Remarks string `json:"remarks"`
}

type jsiiProp struct {
	Name     string      `json:"name"`
	Optional bool        `json:"optional"`
	Docs     jsiiDocs    `json:"docs"`
	Type     jsiiTypeRef `json:"type"`
}

type jsiiTypeRef struct {
	Primitive  string `json:"primitive"`
	Fqn        string `json:"fqn"`
	Collection *struct {
		Kind        string      `json:"kind"`
		Elementtype jsiiTypeRef `json:"elementtype"`
	} `json:"collection"`
	Union *struct {
		Types []jsiiTypeRef `json:"types"`
	} `json:"union"`
}

var (
	// "Represents a {@link https://…/docs/resources/lambda_function aws_lambda_function}."
	classLink = regexp.MustCompile(`\{@link \S+/docs/(resources|data-sources)/\w+ (\w+)\}`)
	// "Represents a {@link https://…/docs azurerm}."
	providerLink = regexp.MustCompile(`\{@link \S+/docs (\w+)\}`)
	// "{@link https://…#function_name LambdaFunction#function_name}"
	propLink = regexp.MustCompile(`\{@link \S+#(\w+) \S+\}`)
)

var schemas = sync.OnceValues(func() (map[string]*providerSchema, error) {
	out := map[string]*providerSchema{}
	for _, p := range schemaProviders {
		s, err := loadSchema(p)
		if err != nil {
			return nil, err
		}
		out[p.name] = s
	}
	out[azapiProvider.name] = azapiSchema()
	return out, nil
})

// loadSchema reads one provider's .jsii (or the gzip file it redirects to).
func loadSchema(p schemaProvider) (*providerSchema, error) {
	path := filepath.Join(schemaFolder, p.file)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("the %s provider schema is not installed (%v): run make tools (or make schemas) to install it", p.name, err)
	}
	defer f.Close()
	var r io.Reader = f
	if _, err := os.Stat(path + ".gz"); err == nil {
		// The assembly is compressed: the .jsii is a file redirect.
		gf, err := os.Open(path + ".gz")
		if err != nil {
			return nil, err
		}
		defer gf.Close()
		if r, err = gzip.NewReader(gf); err != nil {
			return nil, fmt.Errorf("%s.gz: %w", path, err)
		}
	}
	var asm struct {
		Schema  string              `json:"schema"`
		Version string              `json:"version"`
		Types   map[string]jsiiType `json:"types"`
	}
	if err := json.NewDecoder(r).Decode(&asm); err != nil {
		return nil, fmt.Errorf("%s: %w (run make tools to install it again)", path, err)
	}
	if len(asm.Types) == 0 {
		return nil, fmt.Errorf("%s (schema %q): no types: run make tools to install it again", path, asm.Schema)
	}
	s := &providerSchema{prov: p, structs: map[string]jsiiType{}, configs: map[string]string{}, cache: map[string]*blockSchema{}}
	for fqn, t := range asm.Types {
		switch {
		case t.Kind == "interface" && t.Datatype:
			s.structs[fqn] = t
		case t.Kind == "class" && t.Initializer != nil:
			var config string
			for _, prm := range t.Initializer.Parameters {
				if prm.Name == "config" {
					config = prm.Type.Fqn
				}
			}
			if config == "" {
				continue
			}
			if m := classLink.FindStringSubmatch(t.Docs.Summary); m != nil {
				kind := "resource"
				if m[1] == "data-sources" {
					kind = "data"
				}
				s.configs[kind+" "+m[2]] = config
			} else if m := providerLink.FindStringSubmatch(t.Docs.Summary); m != nil && m[1] == p.name {
				s.configs["provider"] = config
			}
		}
	}
	if s.configs["provider"] == "" || len(s.configs) < 100 {
		return nil, fmt.Errorf("%s: found %d resource and data types and no provider: not a CDKTF provider assembly", path, len(s.configs))
	}
	return s, nil
}

// block returns the schema of the struct fqn.
func (s *providerSchema) block(fqn string) (*blockSchema, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.cache[fqn]; ok {
		return b, nil
	}
	t, ok := s.structs[fqn]
	if !ok {
		return nil, fmt.Errorf("%s schema: no struct %s", s.prov.name, fqn)
	}
	b := &blockSchema{attrs: map[string]bool{}, blocks: map[string]*nestedBlock{}}
	for _, p := range t.Properties {
		name := snake(p.Name)
		if m := propLink.FindStringSubmatch(p.Docs.Summary + " " + p.Docs.Remarks); m != nil {
			name = m[1]
		}
		if nested := structIn(p.Type); nested != "" {
			b.blocks[name] = &nestedBlock{required: !p.Optional, fqn: nested}
			continue
		}
		b.attrs[name] = !p.Optional
	}
	s.cache[fqn] = b
	return b, nil
}

// structIn returns the provider struct a property's type holds (a nested
// block: the struct itself, a list of it, or either beside IResolvable).
func structIn(t jsiiTypeRef) string {
	switch {
	case t.Fqn != "" && !strings.HasPrefix(t.Fqn, "cdktf."):
		return t.Fqn
	case t.Collection != nil && t.Collection.Kind == "array":
		return structIn(t.Collection.Elementtype)
	case t.Union != nil:
		for _, u := range t.Union.Types {
			if f := structIn(u); f != "" {
				return f
			}
		}
	}
	return ""
}

// snake turns a jsii property name into Terraform's (the fallback when its
// docs carry no link with the name).
func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) || (unicode.IsDigit(r) && i > 0 && !unicode.IsDigit(rune(s[i-1]))) {
			if i > 0 {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// Meta-arguments and meta-blocks Terraform itself reads, per block kind.
var (
	metaAttrs = map[string][]string{
		"resource": {"count", "for_each", "depends_on", "provider"},
		"data":     {"count", "for_each", "depends_on", "provider"},
		"provider": {"alias"},
	}
	metaBlocks = map[string][]string{
		"resource": {"lifecycle", "provisioner", "connection"},
		"data":     {"lifecycle"},
	}
)

// schemaProblem is one finding of the schema check.
type schemaProblem struct {
	where string
	msg   string
}

func (p schemaProblem) String() string { return p.where + ": " + p.msg }

// checkAgainstSchemas holds every resource, data and provider block of m
// against its provider's schema. used collects the newerThanSchema entries
// the module relies on.
func checkAgainstSchemas(m *module, all map[string]*providerSchema, used map[string]bool) []schemaProblem {
	var problems []schemaProblem
	type top struct {
		kind, typ, where string
		b                *hclsyntax.Block
	}
	var blocks []top
	for key, b := range m.resources {
		blocks = append(blocks, top{"resource", b.Labels[0], m.name + ": resource " + key, b})
	}
	for key, b := range m.data {
		blocks = append(blocks, top{"data", b.Labels[0], m.name + ": data " + key, b})
	}
	for _, b := range m.providers {
		blocks = append(blocks, top{"provider", b.Labels[0], m.name + ": provider " + b.Labels[0], b})
	}
	sort.Slice(blocks, func(i, j int) bool { return blocks[i].where < blocks[j].where })
	for _, tb := range blocks {
		provName, _, _ := strings.Cut(tb.typ, "_")
		ps, ok := all[provName]
		if !ok {
			problems = append(problems, schemaProblem{tb.where, fmt.Sprintf("no schema for provider %q (known: %s)", provName, knownProviders())})
			continue
		}
		key := tb.kind + " " + tb.typ
		if tb.kind == "provider" {
			key = "provider"
		}
		fqn, ok := ps.configs[key]
		if !ok {
			problems = append(problems, schemaProblem{tb.where, fmt.Sprintf("%s %s does not exist in provider %s %s", tb.kind, tb.typ, provName, ps.prov.version)})
			continue
		}
		path := tb.kind + " " + tb.typ
		if tb.kind == "provider" {
			path = "provider " + tb.typ
		}
		problems = append(problems, checkBody(ps, fqn, tb.b.Body, tb.where, path, tb.kind, used)...)
	}
	return problems
}

func knownProviders() string {
	var names []string
	for _, p := range schemaProviders {
		names = append(names, p.name)
	}
	names = append(names, azapiProvider.name)
	return strings.Join(names, ", ")
}

// checkBody holds one block body against the struct fqn: every argument and
// nested block exists, every required one is set. kind is the top-level
// block's kind for its own body (whose meta-arguments Terraform reads), ""
// for nested bodies.
func checkBody(ps *providerSchema, fqn string, body *hclsyntax.Body, where, path, kind string, used map[string]bool) []schemaProblem {
	bs, err := ps.block(fqn)
	if err != nil {
		return []schemaProblem{{where, err.Error()}}
	}
	var problems []schemaProblem
	newer := func(name string) bool {
		p := path + " " + name
		for _, n := range newerThanSchema {
			if n.path == p && n.provider == ps.prov.name {
				used[p] = true
				return true
			}
		}
		return false
	}
	set := map[string]bool{}
	for _, name := range sortedKeys(body.Attributes) {
		set[name] = true
		switch {
		case contains(metaAttrs[kind], name):
		case hasKey(bs.attrs, name):
		case hasKey(bs.blocks, name):
			// A nested block may be given as an argument (attributes as blocks).
		case newer(name):
		default:
			problems = append(problems, schemaProblem{where, fmt.Sprintf("argument %q does not exist in %s %s%s", name, ps.prov.name, ps.prov.version, suggest(name, bs))})
		}
	}
	for _, nb := range body.Blocks {
		typ, content := nb.Type, nb.Body
		if contains(metaBlocks[kind], typ) {
			continue
		}
		if typ == "dynamic" && len(nb.Labels) == 1 {
			typ = nb.Labels[0]
			content = nil
			for _, cb := range nb.Body.Blocks {
				if cb.Type == "content" {
					content = cb.Body
				}
			}
			if content == nil {
				problems = append(problems, schemaProblem{where, fmt.Sprintf("dynamic %q has no content block", typ)})
				continue
			}
		}
		set[typ] = true
		nested, ok := bs.blocks[typ]
		if !ok {
			if !newer(typ) {
				problems = append(problems, schemaProblem{where, fmt.Sprintf("block %q does not exist in %s %s%s", typ, ps.prov.name, ps.prov.version, suggest(typ, bs))})
			}
			continue
		}
		problems = append(problems, checkBody(ps, nested.fqn, content, where+" "+typ, path+" "+typ, "", used)...)
	}
	for _, name := range sortedKeys(bs.attrs) {
		if bs.attrs[name] && !set[name] {
			problems = append(problems, schemaProblem{where, fmt.Sprintf("required argument %q is not set", name)})
		}
	}
	for _, name := range sortedKeys(bs.blocks) {
		if bs.blocks[name].required && !set[name] {
			problems = append(problems, schemaProblem{where, fmt.Sprintf("required block %q is not set", name)})
		}
	}
	return problems
}

// suggest names the schema's arguments and blocks, for the message.
func suggest(name string, bs *blockSchema) string {
	var names []string
	for n := range bs.attrs {
		names = append(names, n)
	}
	for n := range bs.blocks {
		names = append(names, n+" {}")
	}
	sort.Strings(names)
	return fmt.Sprintf(" (it has: %s; if a newer provider added it, list it in newerThanSchema)", strings.Join(names, ", "))
}

func hasKey[V any](m map[string]V, k string) bool {
	_, ok := m[k]
	return ok
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// loadSchemas returns the schemas or stops the test with how to install them.
func loadSchemas(t *testing.T) map[string]*providerSchema {
	t.Helper()
	all, err := schemas()
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// TestProviderSchemas holds every resource, data and provider block of both
// modules and both examples against the providers' published schemas.
func TestProviderSchemas(t *testing.T) {
	all := loadSchemas(t)
	used := map[string]bool{}
	for _, dir := range schemaDirs {
		t.Run(dir, func(t *testing.T) {
			m, err := loadModule(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(m.resources)+len(m.data)+len(m.providers) == 0 && len(m.calls) == 0 {
				t.Fatalf("%s: nothing to check", dir)
			}
			for _, p := range checkAgainstSchemas(m, all, used) {
				t.Error(p)
			}
		})
	}
	for _, n := range newerThanSchema {
		if !used[n.path] {
			t.Errorf("newerThanSchema lists %q (%s %s), which no module uses: remove it", n.path, n.provider, n.version)
		}
	}
}

// TestNewerThanSchemaIsNewer checks that each entry of newerThanSchema is
// really missing from the pinned schema (else it is stale).
func TestNewerThanSchemaIsNewer(t *testing.T) {
	all := loadSchemas(t)
	for _, n := range newerThanSchema {
		f := strings.Fields(n.path)
		if len(f) < 3 {
			t.Errorf("newerThanSchema %q: want \"<resource|data> <type> <argument>\"", n.path)
			continue
		}
		ps := all[n.provider]
		fqn := ps.configs[f[0]+" "+f[1]]
		if fqn == "" {
			continue // a type newer than the schema: missing indeed
		}
		bs, err := ps.block(fqn)
		for _, name := range f[2 : len(f)-1] {
			if err != nil {
				break
			}
			nb, ok := bs.blocks[name]
			if !ok {
				err = fmt.Errorf("no block %s", name)
				break
			}
			bs, err = ps.block(nb.fqn)
		}
		if err != nil {
			continue
		}
		last := f[len(f)-1]
		if hasKey(bs.attrs, last) || hasKey(bs.blocks, last) {
			t.Errorf("newerThanSchema lists %q, but %s %s has it already: remove it", n.path, n.provider, n.prov())
		}
	}
}

func (n newerArgument) prov() string {
	for _, p := range schemaProviders {
		if p.name == n.provider {
			return p.version
		}
	}
	return "?"
}

// TestProviderVersions checks that every module's and example's
// required_providers admits no version older than the schema the module is
// checked against, nor older than what newerThanSchema says it uses.
func TestProviderVersions(t *testing.T) {
	need := map[string]string{azapiProvider.name: azapiProvider.version}
	for _, p := range schemaProviders {
		need[p.name] = p.version
	}
	for _, n := range newerThanSchema {
		if compareVersions(n.version, need[n.provider]) > 0 {
			need[n.provider] = n.version
		}
	}
	for _, dir := range schemaDirs {
		t.Run(dir, func(t *testing.T) {
			m, err := loadModule(dir)
			if err != nil {
				t.Fatal(err)
			}
			req, err := requiredProviders(m)
			if err != nil {
				t.Fatal(err)
			}
			if len(req) == 0 {
				t.Fatalf("%s: no required_providers", dir)
			}
			for name, constraint := range req {
				want, ok := need[name]
				if !ok {
					t.Errorf("%s requires provider %s, which has no schema here", dir, name)
					continue
				}
				lowest, err := lowestAdmitted(constraint)
				if err != nil {
					t.Errorf("%s: provider %s: %v", dir, name, err)
					continue
				}
				if compareVersions(lowest, want) < 0 {
					t.Errorf("%s: provider %s version %q admits %s, but the module needs at least %s", dir, name, constraint, lowest, want)
				}
			}
		})
	}
}

// requiredProviders reads terraform { required_providers { … } }: provider
// name → version constraint.
func requiredProviders(m *module) (map[string]string, error) {
	out := map[string]string{}
	for _, tb := range m.settings {
		for _, rb := range tb.Body.Blocks {
			if rb.Type != "required_providers" {
				continue
			}
			for name, a := range rb.Body.Attributes {
				v, diags := a.Expr.Value(nil)
				if diags.HasErrors() {
					return nil, fmt.Errorf("%s: required_providers.%s: %s", m.name, name, diags.Error())
				}
				if !v.Type().IsObjectType() || !v.Type().HasAttribute("version") {
					return nil, fmt.Errorf("%s: required_providers.%s has no version constraint", m.name, name)
				}
				s, ok := text(v.GetAttr("version"))
				if !ok {
					return nil, fmt.Errorf("%s: required_providers.%s.version is not a string", m.name, name)
				}
				out[name] = s
			}
		}
	}
	return out, nil
}

// lowestAdmitted returns the lowest version a Terraform version constraint
// admits: the highest of its lower bounds (>=, ~>, = or a bare version).
func lowestAdmitted(constraint string) (string, error) {
	lowest := ""
	for _, part := range strings.Split(constraint, ",") {
		part = strings.TrimSpace(part)
		op := ""
		for _, o := range []string{">=", "~>", "<=", "!=", ">", "<", "="} {
			if strings.HasPrefix(part, o) {
				op = o
				break
			}
		}
		v := strings.TrimSpace(strings.TrimPrefix(part, op))
		if _, err := parseVersion(v); err != nil {
			return "", fmt.Errorf("constraint %q: %w", constraint, err)
		}
		switch op {
		case ">=", "~>", "=", "":
			if lowest == "" || compareVersions(v, lowest) > 0 {
				lowest = v
			}
		case ">":
			return "", fmt.Errorf("constraint %q: use >= or ~> so the lowest admitted version is explicit", constraint)
		}
	}
	if lowest == "" {
		return "", fmt.Errorf("constraint %q has no lower bound: it admits any old version", constraint)
	}
	return lowest, nil
}

func parseVersion(v string) ([3]int, error) {
	var out [3]int
	parts := strings.Split(v, ".")
	if len(parts) == 0 || len(parts) > 3 {
		return out, fmt.Errorf("version %q: want major[.minor[.patch]]", v)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return out, fmt.Errorf("version %q: want major[.minor[.patch]]", v)
		}
		out[i] = n
	}
	return out, nil
}

// compareVersions compares two versions: -1, 0 or 1 (unparsable ones sort
// first).
func compareVersions(a, b string) int {
	va, _ := parseVersion(a)
	vb, _ := parseVersion(b)
	for i := range va {
		switch {
		case va[i] < vb[i]:
			return -1
		case va[i] > vb[i]:
			return 1
		}
	}
	return 0
}

// TestSchemaCheckFails feeds the check mistakes: a made-up argument in every
// block of both modules and examples (nested and dynamic blocks included),
// each required argument taken out in turn, an unknown block type, an unknown
// resource type, and a version constraint too low for what a module uses.
func TestSchemaCheckFails(t *testing.T) {
	all := loadSchemas(t)
	const madeUp = "made_up_argument"
	for _, dir := range schemaDirs {
		m, err := loadModule(dir)
		if err != nil {
			t.Fatal(err)
		}
		// A made-up argument in each block, one at a time.
		var bodies []*hclsyntax.Body
		var walk func(b *hclsyntax.Body)
		walk = func(b *hclsyntax.Body) {
			bodies = append(bodies, b)
			for _, nb := range b.Blocks {
				switch nb.Type {
				case "lifecycle", "provisioner", "connection", "precondition", "postcondition":
					continue
				case "dynamic":
					for _, cb := range nb.Body.Blocks {
						if cb.Type == "content" {
							walk(cb.Body)
						}
					}
				default:
					walk(nb.Body)
				}
			}
		}
		for _, b := range m.resources {
			walk(b.Body)
		}
		for _, b := range m.data {
			walk(b.Body)
		}
		for _, b := range m.providers {
			walk(b.Body)
		}
		if len(bodies) == 0 {
			t.Fatalf("%s: no blocks to try", dir)
		}
		for _, body := range bodies {
			body.Attributes[madeUp] = &hclsyntax.Attribute{Name: madeUp, Expr: &hclsyntax.LiteralValueExpr{}}
			problems := checkAgainstSchemas(m, all, map[string]bool{})
			delete(body.Attributes, madeUp)
			if !anyProblem(problems, `argument "`+madeUp+`" does not exist`) {
				t.Errorf("%s: a made-up argument in a block at %v went unnoticed: %v", dir, body.SrcRange, problems)
			}
		}
		// Each required argument of each top-level block, taken out.
		tops := map[string]*hclsyntax.Block{}
		for k, b := range m.resources {
			tops["resource "+k] = b
		}
		for k, b := range m.data {
			tops["data "+k] = b
		}
		removed := 0
		for _, key := range sortedKeys(tops) {
			b := tops[key]
			kind, typ, _ := strings.Cut(key, " ")
			typ, _, _ = strings.Cut(typ, ".")
			prov, _, _ := strings.Cut(typ, "_")
			ps := all[prov]
			bs, err := ps.block(ps.configs[kind+" "+typ])
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range sortedKeys(bs.attrs) {
				a, ok := b.Body.Attributes[name]
				if !bs.attrs[name] || !ok {
					continue
				}
				delete(b.Body.Attributes, name)
				problems := checkAgainstSchemas(m, all, map[string]bool{})
				b.Body.Attributes[name] = a
				removed++
				if !anyProblem(problems, `required argument "`+name+`" is not set`) {
					t.Errorf("%s: %s without %s went unnoticed: %v", dir, key, name, problems)
				}
			}
		}
		if strings.HasPrefix(dir, "aws") || strings.HasPrefix(dir, "azure") {
			if removed == 0 {
				t.Errorf("%s: no required argument to take out", dir)
			}
		}
	}

	// Unknown types and blocks, and a block missing what it requires.
	bad := map[string][]byte{"main.tf": []byte(`
resource "aws_lambda_function_made_up" "a" {}
data "aws_region" "current" {
  made_up_block {}
}
resource "aws_lambda_event_source_mapping" "b" {
  function_name = "f"
  scaling_config {
    maximum_concurrency = 2
    made_up_nested      = 1
  }
  dynamic "filter_criteria" {
    for_each = []
    content {
      dynamic "filter" {
        for_each = []
        content {
          made_up_in_dynamic = 1
        }
      }
    }
  }
}
resource "azurerm_role_assignment" "c" {
  scope = "x"
}
`)}
	m, err := parseModule("bad", bad)
	if err != nil {
		t.Fatal(err)
	}
	problems := checkAgainstSchemas(m, all, map[string]bool{})
	for _, want := range []string{
		`resource aws_lambda_function_made_up does not exist`,
		`block "made_up_block" does not exist`,
		`scaling_config: argument "made_up_nested" does not exist`,
		`filter_criteria filter: argument "made_up_in_dynamic" does not exist`,
		`resource azurerm_role_assignment.c: required argument "principal_id" is not set`,
	} {
		if !anyProblem(problems, want) {
			t.Errorf("want a problem containing %q, got %v", want, problems)
		}
	}

	// Versions.
	for _, c := range []struct {
		constraint, lowest string
		ok                 bool
	}{
		{"~> 6.28", "6.28", true},
		{">= 6.25, < 7.0", "6.25", true},
		{"6.28.0", "6.28.0", true},
		{"< 7.0", "", false},
		{"> 6.27", "", false},
	} {
		got, err := lowestAdmitted(c.constraint)
		if (err == nil) != c.ok || got != c.lowest {
			t.Errorf("lowestAdmitted(%q) = %q, %v; want %q, ok %v", c.constraint, got, err, c.lowest, c.ok)
		}
	}
	if compareVersions("6.25", "6.28.0") >= 0 || compareVersions("6.28", "6.28.0") != 0 || compareVersions("4.100.0", "4.55.0") <= 0 {
		t.Error("compareVersions orders versions wrongly")
	}
}

func anyProblem(problems []schemaProblem, want string) bool {
	for _, p := range problems {
		if strings.Contains(p.String(), want) {
			return true
		}
	}
	return false
}

package terraform

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// module is one Terraform module, parsed: its variables, locals and
// resource blocks. It evaluates what Terraform would evaluate before any
// provider is involved (variables, validations, locals, preconditions and
// resource arguments that depend only on those); a resource attribute
// stands for an unknown value.
type module struct {
	name      string
	vars      map[string]*variable
	locals    map[string]hcl.Expression
	resources map[string]*hclsyntax.Block // "type.name"
	data      map[string]*hclsyntax.Block // "type.name"
	calls     map[string]*hclsyntax.Block // module blocks, by name
	providers []*hclsyntax.Block          // provider blocks
	settings  []*hclsyntax.Block          // terraform blocks
}

// variable is one variable block.
type variable struct {
	name        string
	ty          cty.Type
	defaults    *typeexpr.Defaults
	def         cty.Value // cty.NilVal when the variable has no default
	validations []*hclsyntax.Block
}

// loadModule parses every .tf file of dir.
func loadModule(dir string) (*module, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".tf") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		files[e.Name()] = b
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no .tf files", dir)
	}
	return parseModule(dir, files)
}

// parseModule parses a module given as file name → source.
func parseModule(name string, files map[string][]byte) (*module, error) {
	m := &module{name: name, vars: map[string]*variable{}, locals: map[string]hcl.Expression{},
		resources: map[string]*hclsyntax.Block{}, data: map[string]*hclsyntax.Block{}, calls: map[string]*hclsyntax.Block{}}
	p := hclparse.NewParser()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		f, diags := p.ParseHCL(files[n], n)
		if diags.HasErrors() {
			return nil, fmt.Errorf("%s: %s", name, diags.Error())
		}
		body := f.Body.(*hclsyntax.Body)
		for _, b := range body.Blocks {
			switch b.Type {
			case "variable":
				v, err := parseVariable(b)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
				m.vars[v.name] = v
			case "locals":
				for k, a := range b.Body.Attributes {
					if _, dup := m.locals[k]; dup {
						return nil, fmt.Errorf("%s: local %s defined twice", name, k)
					}
					m.locals[k] = a.Expr
				}
			case "resource":
				m.resources[b.Labels[0]+"."+b.Labels[1]] = b
			case "data":
				m.data[b.Labels[0]+"."+b.Labels[1]] = b
			case "module":
				m.calls[b.Labels[0]] = b
			case "provider":
				m.providers = append(m.providers, b)
			case "terraform":
				m.settings = append(m.settings, b)
			}
		}
	}
	return m, nil
}

func parseVariable(b *hclsyntax.Block) (*variable, error) {
	v := &variable{name: b.Labels[0], ty: cty.DynamicPseudoType, def: cty.NilVal}
	if a, ok := b.Body.Attributes["type"]; ok {
		ty, defaults, diags := typeexpr.TypeConstraintWithDefaults(a.Expr)
		if diags.HasErrors() {
			return nil, fmt.Errorf("variable %s: type: %s", v.name, diags.Error())
		}
		v.ty, v.defaults = ty, defaults
	}
	if a, ok := b.Body.Attributes["default"]; ok {
		raw, diags := a.Expr.Value(nil)
		if diags.HasErrors() {
			return nil, fmt.Errorf("variable %s: default: %s", v.name, diags.Error())
		}
		def, err := v.convert(raw)
		if err != nil {
			return nil, fmt.Errorf("variable %s: default: %w", v.name, err)
		}
		v.def = def
	}
	for _, vb := range b.Body.Blocks {
		if vb.Type == "validation" {
			v.validations = append(v.validations, vb)
		}
	}
	return v, nil
}

// convert gives raw the variable's type, optional attributes' defaults
// applied, as Terraform does with a value given for the variable.
func (v *variable) convert(raw cty.Value) (cty.Value, error) {
	if raw.IsNull() {
		return cty.NullVal(v.ty), nil
	}
	if v.defaults != nil {
		raw = v.defaults.Apply(raw)
	}
	return convert.Convert(raw, v.ty)
}

// vars are values given for variables, by name; the others take their
// defaults.
type vars map[string]cty.Value

// with returns a copy of vs with more values.
func (vs vars) with(more vars) vars {
	out := vars{}
	for k, v := range vs {
		out[k] = v
	}
	for k, v := range more {
		out[k] = v
	}
	return out
}

// evaluator evaluates the module's expressions for one set of variable
// values.
type evaluator struct {
	m      *module
	ctx    *hcl.EvalContext
	locals map[string]cty.Value
	busy   map[string]bool
}

// eval returns an evaluator for the given values; a variable without a
// default and without a value is an error, as in Terraform.
func (m *module) eval(given vars) (*evaluator, error) {
	vals := map[string]cty.Value{}
	for name, v := range m.vars {
		raw, ok := given[name]
		switch {
		case ok:
			c, err := v.convert(raw)
			if err != nil {
				return nil, fmt.Errorf("var.%s: %w", name, err)
			}
			vals[name] = c
		case v.def != cty.NilVal:
			vals[name] = v.def
		default:
			return nil, fmt.Errorf("var.%s has no default: give it a value", name)
		}
	}
	for name := range given {
		if _, ok := m.vars[name]; !ok {
			return nil, fmt.Errorf("var.%s is not declared", name)
		}
	}
	objs := func(blocks map[string]*hclsyntax.Block) map[string]cty.Value {
		byType := map[string]map[string]cty.Value{}
		for key := range blocks {
			typ, name, _ := strings.Cut(key, ".")
			if byType[typ] == nil {
				byType[typ] = map[string]cty.Value{}
			}
			byType[typ][name] = cty.DynamicVal
		}
		out := map[string]cty.Value{}
		for typ, names := range byType {
			out[typ] = cty.ObjectVal(names)
		}
		return out
	}
	variables := objs(m.resources)
	variables["var"] = cty.ObjectVal(vals)
	variables["data"] = cty.ObjectVal(objs(m.data))
	variables["path"] = cty.ObjectVal(map[string]cty.Value{"module": cty.StringVal("."), "root": cty.StringVal(".")})
	e := &evaluator{m: m, locals: map[string]cty.Value{}, busy: map[string]bool{}}
	e.ctx = &hcl.EvalContext{Variables: variables, Functions: functions()}
	return e, nil
}

// value evaluates expr, first evaluating the locals it refers to.
func (e *evaluator) value(expr hcl.Expression) (cty.Value, error) {
	for _, t := range expr.Variables() {
		if t.RootName() != "local" || len(t) < 2 {
			continue
		}
		attr, ok := t[1].(hcl.TraverseAttr)
		if !ok {
			continue
		}
		if err := e.local(attr.Name); err != nil {
			return cty.NilVal, err
		}
	}
	e.ctx.Variables["local"] = cty.ObjectVal(e.locals)
	v, diags := expr.Value(e.ctx)
	if diags.HasErrors() {
		return cty.NilVal, errors.New(diags.Error())
	}
	return v, nil
}

func (e *evaluator) local(name string) error {
	if _, done := e.locals[name]; done {
		return nil
	}
	expr, ok := e.m.locals[name]
	if !ok {
		return fmt.Errorf("local.%s is not defined", name)
	}
	if e.busy[name] {
		return fmt.Errorf("local.%s refers to itself", name)
	}
	e.busy[name] = true
	v, err := e.value(expr)
	if err != nil {
		return fmt.Errorf("local.%s: %w", name, err)
	}
	e.locals[name] = v
	return nil
}

// localValue evaluates local.name.
func (e *evaluator) localValue(name string) (cty.Value, error) {
	if err := e.local(name); err != nil {
		return cty.NilVal, err
	}
	return e.locals[name], nil
}

// attr evaluates an argument of a resource: path is the resource key
// ("type.name"), then nested block types, then the argument's name.
func (e *evaluator) attr(resource string, path ...string) (cty.Value, error) {
	expr, err := e.m.attrExpr(resource, path...)
	if err != nil {
		return cty.NilVal, err
	}
	v, err := e.value(expr)
	if err != nil {
		return cty.NilVal, fmt.Errorf("%s.%s: %w", resource, strings.Join(path, "."), err)
	}
	return v, nil
}

func (m *module) attrExpr(resource string, path ...string) (hcl.Expression, error) {
	b, ok := m.resources[resource]
	if !ok {
		return nil, fmt.Errorf("%s: no resource %s", m.name, resource)
	}
	body := b.Body
	for _, typ := range path[:len(path)-1] {
		var next *hclsyntax.Body
		for _, nb := range body.Blocks {
			if nb.Type == typ {
				next = nb.Body
				break
			}
		}
		if next == nil {
			return nil, fmt.Errorf("%s: %s has no %s block", m.name, resource, typ)
		}
		body = next
	}
	a, ok := body.Attributes[path[len(path)-1]]
	if !ok {
		return nil, fmt.Errorf("%s: %s has no argument %s", m.name, resource, strings.Join(path, "."))
	}
	return a.Expr, nil
}

// callArgs evaluates the arguments of module call name, source and the
// other meta-arguments left out.
func (e *evaluator) callArgs(name string) (source string, args vars, err error) {
	b, ok := e.m.calls[name]
	if !ok {
		return "", nil, fmt.Errorf("%s: no module %s", e.m.name, name)
	}
	args = vars{}
	for k, a := range b.Body.Attributes {
		v, err := e.value(a.Expr)
		if err != nil {
			return "", nil, fmt.Errorf("module.%s.%s: %w", name, k, err)
		}
		switch k {
		case "source":
			source = v.AsString()
		case "version", "providers", "count", "for_each", "depends_on":
		default:
			args[k] = v
		}
	}
	return source, args, nil
}

// failedValidations returns the error messages of the variables'
// validations that fail (or cannot be evaluated) for these values.
func (e *evaluator) failedValidations() []string {
	var out []string
	names := make([]string, 0, len(e.m.vars))
	for n := range e.m.vars {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, vb := range e.m.vars[n].validations {
			out = append(out, e.check("var."+n, vb)...)
		}
	}
	return out
}

// failedPreconditions returns the error messages of the resource's
// preconditions that fail (or cannot be evaluated) for these values.
func (e *evaluator) failedPreconditions(resource string) []string {
	b, ok := e.m.resources[resource]
	if !ok {
		return []string{fmt.Sprintf("%s: no resource %s", e.m.name, resource)}
	}
	var out []string
	for _, lb := range b.Body.Blocks {
		if lb.Type != "lifecycle" {
			continue
		}
		for _, pb := range lb.Body.Blocks {
			if pb.Type == "precondition" {
				out = append(out, e.check(resource, pb)...)
			}
		}
	}
	return out
}

// check evaluates a validation or precondition block: nil when its
// condition holds, else its error message.
func (e *evaluator) check(where string, b *hclsyntax.Block) []string {
	cond, ok := b.Body.Attributes["condition"]
	if !ok {
		return []string{where + ": a check without a condition"}
	}
	v, err := e.value(cond.Expr)
	if err != nil {
		return []string{fmt.Sprintf("%s: condition does not evaluate: %v", where, err)}
	}
	if !v.IsKnown() || v.IsNull() || v.Type() != cty.Bool {
		return []string{fmt.Sprintf("%s: condition is not a known bool: %#v", where, v)}
	}
	if v.True() {
		return nil
	}
	msg := "(no error_message)"
	if a, ok := b.Body.Attributes["error_message"]; ok {
		if mv, err := e.value(a.Expr); err == nil && mv.IsKnown() && !mv.IsNull() && mv.Type() == cty.String {
			msg = mv.AsString()
		}
	}
	return []string{where + ": " + msg}
}

// functions are the Terraform functions the modules call, from cty's
// standard library where it has Terraform's semantics.
func functions() map[string]function.Function {
	return map[string]function.Function{
		"abs":      stdlib.AbsoluteFunc,
		"alltrue":  allTrueFunc,
		"can":      tryfunc.CanFunc,
		"ceil":     stdlib.CeilFunc,
		"coalesce": stdlib.CoalesceFunc,
		"concat":   stdlib.ConcatFunc,
		"contains": stdlib.ContainsFunc,
		"distinct": stdlib.DistinctFunc,
		"filebase64sha256": function.New(&function.Spec{
			Params: []function.Parameter{{Name: "path", Type: cty.String}},
			Type:   function.StaticReturnType(cty.String),
			Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
				// The package is built later (make package-aws): stand in
				// for its hash with the hash of its name.
				sum := sha256.Sum256([]byte(args[0].AsString()))
				return cty.StringVal(base64.StdEncoding.EncodeToString(sum[:])), nil
			},
		}),
		"floor":      stdlib.FloorFunc,
		"format":     stdlib.FormatFunc,
		"join":       stdlib.JoinFunc,
		"jsondecode": stdlib.JSONDecodeFunc,
		"jsonencode": stdlib.JSONEncodeFunc,
		"length":     lengthFunc,
		"lookup":     stdlib.LookupFunc,
		"lower":      stdlib.LowerFunc,
		"max":        stdlib.MaxFunc,
		"merge":      stdlib.MergeFunc,
		"min":        stdlib.MinFunc,
		"regex":      stdlib.RegexFunc,
		"replace":    stdlib.ReplaceFunc,
		"sha256": function.New(&function.Spec{
			Params: []function.Parameter{{Name: "str", Type: cty.String}},
			Type:   function.StaticReturnType(cty.String),
			Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
				return cty.StringVal(fmt.Sprintf("%x", sha256.Sum256([]byte(args[0].AsString())))), nil
			},
		}),
		"sort":       stdlib.SortFunc,
		"startswith": startsWithFunc,
		"substr":     stdlib.SubstrFunc,
		"tolist":     stdlib.MakeToFunc(cty.List(cty.DynamicPseudoType)),
		"tonumber":   stdlib.MakeToFunc(cty.Number),
		"toset":      stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)),
		"tostring":   stdlib.MakeToFunc(cty.String),
		"trimspace":  stdlib.TrimSpaceFunc,
		"try":        tryfunc.TryFunc,
	}
}

// allTrueFunc is Terraform's alltrue: true when every element is true.
var allTrueFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "list", Type: cty.List(cty.Bool)}},
	Type:   function.StaticReturnType(cty.Bool),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		result := cty.True
		for it := args[0].ElementIterator(); it.Next(); {
			_, v := it.Element()
			if !v.IsKnown() {
				return cty.UnknownVal(cty.Bool), nil
			}
			if v.IsNull() {
				return cty.False, nil
			}
			result = result.And(v)
		}
		return result, nil
	},
})

// startsWithFunc is Terraform's startswith.
var startsWithFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "str", Type: cty.String}, {Name: "prefix", Type: cty.String}},
	Type:   function.StaticReturnType(cty.Bool),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		return cty.BoolVal(strings.HasPrefix(args[0].AsString(), args[1].AsString())), nil
	},
})

// lengthFunc is Terraform's length: of a string, or of a collection.
var lengthFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "value", Type: cty.DynamicPseudoType, AllowDynamicType: true}},
	Type:   function.StaticReturnType(cty.Number),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		if args[0].Type() == cty.String {
			return stdlib.Strlen(args[0])
		}
		return stdlib.Length(args[0])
	},
})

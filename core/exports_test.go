package core

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// exportedForTheirType are core's exported names that no other package
// names but that stay exported: the types of exported fields, parameters
// and results other packages use, the members of exported enums (a type's
// value set is its API), and retryPolicy, whose uses sit in the attempt
// loop's files.
var exportedForTheirType = []string{
	"AttemptEnding", "Failure", "Outcome", "Phase", "ReplyKind", "RetryBudget", "Stop",
	"BalanceLatency", "BalancePriority", "BalanceRandom", "BalanceRoundRobin", "CauseNone", "FailureOther", "PhaseBody",
	"ReasonHeaderNotAllowed", "ReasonQueryNotAllowed",
}

// TestExportsUsed: core exports only what another package of the module
// names (core.X in its Go files, tests included), besides
// exportedForTheirType; a name only core uses is unexported, so that
// core's API is what the rest of the gateway needs of it.
func TestExportsUsed(t *testing.T) {
	exported := coreExports(t)
	used := usesOutsideCore(t)
	var unused []string
	for _, n := range exported {
		if !used[n] && !slices.Contains(exportedForTheirType, n) {
			unused = append(unused, n)
		}
	}
	if len(unused) > 0 {
		t.Errorf("core exports %d names no other package uses; unexport them: %s", len(unused), strings.Join(unused, " "))
	}
	for _, n := range exportedForTheirType {
		if !slices.Contains(exported, n) {
			t.Errorf("exportedForTheirType names %s, which core does not export", n)
		}
	}
}

// coreExports returns the exported top-level names of package core.
func coreExports(tb testing.TB) []string {
	tb.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		tb.Fatal(err)
	}
	var names []string
	for _, p := range files {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.SkipObjectResolution)
		if err != nil {
			tb.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					names = append(names, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							names = append(names, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								names = append(names, n.Name)
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(names)
	return names
}

// usesOutsideCore returns the names the module's other Go files select
// from package core (core.X, under whatever name they import it).
func usesOutsideCore(tb testing.TB) map[string]bool {
	tb.Helper()
	used := map[string]bool{}
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != ".." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || filepath.Dir(p) == filepath.Join("..", "core") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, src, parser.ImportsOnly)
		if err != nil {
			return nil // not Go the module builds
		}
		local := ""
		for _, im := range f.Imports {
			if im.Path.Value == `"fngateway/core"` {
				local = "core"
				if im.Name != nil {
					local = im.Name.Name
				}
			}
		}
		if local == "" {
			return nil
		}
		if f, err = parser.ParseFile(token.NewFileSet(), p, src, parser.SkipObjectResolution); err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if se, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := se.X.(*ast.Ident); ok && id.Name == local {
					used[se.Sel.Name] = true
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return used
}

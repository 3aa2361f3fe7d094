package terraform

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// The deploy guides and the example each one deploys.
var guides = []struct {
	doc, example, module string
}{
	{"../docs/deploy-azure.md", "examples/azure", "azure"},
	{"../docs/deploy-aws.md", "examples/aws", "aws"},
}

// TestDeployGuides checks every command of the deploy guides' shell blocks:
// each make target exists (and each variable given to make is the
// Makefile's), each cd reaches a folder, each terraform -var names a
// variable of the example it runs in (with a value of the variable's type),
// each terraform apply sets every variable without a default, each terraform
// output names an output, and the files handed to other tools are the ones
// the make targets build. The prerequisites name the versions the modules
// require.
func TestDeployGuides(t *testing.T) {
	makefile, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range guides {
		t.Run(filepath.Base(g.doc), func(t *testing.T) {
			src, err := os.ReadFile(g.doc)
			if err != nil {
				t.Fatal(err)
			}
			problems, n := checkGuide(string(src), string(makefile))
			for _, p := range problems {
				t.Error(p)
			}
			if n < 10 {
				t.Errorf("%s: only %d commands checked: want the whole deploy (build, apply, output, request, async, change, destroy)", g.doc, n)
			}
			for _, want := range []string{"make package-", "terraform apply", "terraform output -raw", "terraform destroy", "go run ./functions check", "S7PAsyncMode: true", "_gateway/async/"} {
				if !strings.Contains(string(src), want) {
					t.Errorf("%s: no %q: want every step of the deploy", g.doc, want)
				}
			}
			// The prerequisites name what the modules require.
			for _, dir := range []string{g.module, g.example} {
				m, err := loadModule(dir)
				if err != nil {
					t.Fatal(err)
				}
				req, err := requiredProviders(m)
				if err != nil {
					t.Fatal(err)
				}
				for name, c := range req {
					if !strings.Contains(string(src), "`"+c+"`") {
						t.Errorf("%s: the prerequisites do not name %s's required provider %s version `%s`", g.doc, dir, name, c)
					}
				}
				if rv := requiredVersion(m); rv == "" || !strings.Contains(string(src), "Terraform `"+rv+"`") {
					t.Errorf("%s: the prerequisites do not name Terraform `%s` (%s's required_version)", g.doc, rv, dir)
				}
			}
		})
	}
}

// requiredVersion returns the module's terraform { required_version }.
func requiredVersion(m *module) string {
	for _, tb := range m.settings {
		if a, ok := tb.Body.Attributes["required_version"]; ok {
			if v, diags := a.Expr.Value(nil); !diags.HasErrors() {
				s, _ := text(v)
				return s
			}
		}
	}
	return ""
}

var (
	fence     = regexp.MustCompile("(?s)```(sh|bash|shell)\n(.*?)```")
	makeCall  = regexp.MustCompile(`(?:^|[\s;(&|])make\s+([^;&|)]*)`)
	tfOutput  = regexp.MustCompile(`terraform output(?:\s+-(?:raw|json))?\s+([A-Za-z0-9_-]+)`)
	tfCommand = regexp.MustCompile(`(?:^|[\s;(&|])terraform\s+(init|apply|destroy|plan|output)\b`)
	// Makefile rules: "name:" at the start of a line (not ":=").
	makeRule = regexp.MustCompile(`(?m)^([A-Za-z0-9_.-]+(?:\s+[A-Za-z0-9_.-]+)*)\s*:([^=]|$)`)
	makeVar  = regexp.MustCompile(`(?m)^([A-Za-z0-9_]+)\s*(?:\?=|:=|=)`)
	// A variable's default: "NAME ?= value" (or := / =) with a plain value.
	makeDefault = regexp.MustCompile(`(?m)^([A-Za-z0-9_]+)\s*(?:\?=|:=|=)[ \t]*([^$\s#]+)[ \t]*$`)
)

// checkGuide checks a guide's shell blocks against the Makefile and the
// Terraform folders (relative to terraform/, the guide's commands being run
// from the repository's root). It returns the problems and how many commands
// it checked.
func checkGuide(doc, makefile string) ([]string, int) {
	targets := map[string]bool{}
	for _, m := range makeRule.FindAllStringSubmatch(makefile, -1) {
		for _, name := range strings.Fields(m[1]) {
			targets[name] = true
		}
	}
	makeVars := map[string]bool{}
	for _, m := range makeVar.FindAllStringSubmatch(makefile, -1) {
		makeVars[m[1]] = true
	}
	// What the rules build with the variables' defaults: $(AZURE_DIST) is
	// dist unless the command line says otherwise.
	builds := makefile
	for _, m := range makeDefault.FindAllStringSubmatch(makefile, -1) {
		builds = strings.ReplaceAll(builds, "$("+m[1]+")", strings.TrimSpace(m[2]))
	}
	var problems []string
	checked := 0
	cwd := "." // relative to the repository's root
	for _, block := range fence.FindAllStringSubmatch(doc, -1) {
		for _, line := range shellLines(block[2]) {
			where := fmt.Sprintf("command %q", line)
			words := shellWords(line)
			if len(words) >= 2 && words[0] == "cd" {
				next := filepath.Clean(filepath.Join(cwd, words[1]))
				if st, err := os.Stat(filepath.Join("..", next)); err != nil || !st.IsDir() {
					problems = append(problems, fmt.Sprintf("%s: no folder %s", where, next))
				}
				cwd = next
				checked++
				continue
			}
			for _, m := range makeCall.FindAllStringSubmatch(line, -1) {
				checked++
				if cwd != "." {
					problems = append(problems, fmt.Sprintf("%s: make runs in %s, not at the repository's root", where, cwd))
				}
				args := strings.Fields(m[1])
				if len(args) == 0 {
					problems = append(problems, where+": make without a target")
				}
				for _, a := range args {
					if name, _, ok := strings.Cut(a, "="); ok {
						if !makeVars[name] {
							problems = append(problems, fmt.Sprintf("%s: the Makefile has no variable %s", where, name))
						}
						continue
					}
					if !targets[a] {
						problems = append(problems, fmt.Sprintf("%s: the Makefile has no target %s", where, a))
					}
				}
			}
			if strings.Contains(line, "go run ./functions") {
				checked++
				if cwd != "." {
					problems = append(problems, fmt.Sprintf("%s: go run ./functions runs in %s, not at the repository's root", where, cwd))
				}
			}
			if i := indexWord(words, "--src"); i >= 0 && i+1 < len(words) {
				checked++
				if got := filepath.Clean(filepath.Join(cwd, words[i+1])); !strings.HasPrefix(got, "dist/") || !strings.Contains(builds, strings.TrimSuffix(got, ".zip")) {
					problems = append(problems, fmt.Sprintf("%s: --src is %s, not a zip the Makefile builds under dist/", where, got))
				}
			}
			for _, m := range tfCommand.FindAllStringSubmatch(line, -1) {
				checked++
				p := checkTerraform(cwd, m[1], line, words)
				for _, s := range p {
					problems = append(problems, where+": "+s)
				}
			}
		}
	}
	return problems, checked
}

// checkTerraform checks one terraform command run in cwd.
func checkTerraform(cwd, sub, line string, words []string) []string {
	dir, err := filepath.Rel("terraform", cwd)
	if err != nil || strings.HasPrefix(dir, "..") {
		return []string{fmt.Sprintf("terraform runs in %s, not in a folder under terraform/", cwd)}
	}
	m, err := loadModule(dir)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	switch sub {
	case "output":
		outs := outputs(dir)
		for _, om := range tfOutput.FindAllStringSubmatch(line, -1) {
			if !outs[om[1]] {
				problems = append(problems, fmt.Sprintf("%s has no output %s", dir, om[1]))
			}
		}
	case "apply", "destroy", "plan":
		given := map[string]bool{}
		for i, w := range words {
			if w != "-var" || i+1 >= len(words) {
				continue
			}
			name, value, ok := strings.Cut(words[i+1], "=")
			if !ok {
				problems = append(problems, fmt.Sprintf("-var %q: want name=value", words[i+1]))
				continue
			}
			given[name] = true
			v, declared := m.vars[name]
			if !declared {
				problems = append(problems, fmt.Sprintf("%s has no variable %s", dir, name))
				continue
			}
			if err := checkVarValue(v, value); err != nil {
				problems = append(problems, fmt.Sprintf("-var %s: %v", name, err))
			}
		}
		for _, name := range sortedKeys(m.vars) {
			if m.vars[name].def == cty.NilVal && !given[name] {
				problems = append(problems, fmt.Sprintf("terraform %s does not set %s, which has no default", sub, name))
			}
		}
	}
	return problems
}

// checkVarValue checks a -var value against the variable's type: a string
// variable takes the text as is, any other type an HCL expression.
func checkVarValue(v *variable, value string) error {
	if v.ty.Equals(cty.String) {
		return nil
	}
	expr, diags := hclsyntax.ParseExpression([]byte(value), "-var", hcl.InitialPos)
	if diags.HasErrors() {
		return fmt.Errorf("%q does not parse: %s", value, diags.Error())
	}
	raw, diags := expr.Value(nil)
	if diags.HasErrors() {
		return fmt.Errorf("%q: %s", value, diags.Error())
	}
	if _, err := convert.Convert(raw, v.ty); err != nil {
		return fmt.Errorf("%q is not a %s: %v", value, v.ty.FriendlyName(), err)
	}
	return nil
}

// outputs returns the names of a folder's output blocks.
func outputs(dir string) map[string]bool {
	out := map[string]bool{}
	files, _ := filepath.Glob(filepath.Join(dir, "*.tf"))
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		file, diags := hclsyntax.ParseConfig(src, f, hcl.InitialPos)
		if diags.HasErrors() {
			continue
		}
		for _, b := range file.Body.(*hclsyntax.Body).Blocks {
			if b.Type == "output" && len(b.Labels) == 1 {
				out[b.Labels[0]] = true
			}
		}
	}
	return out
}

// shellLines returns a block's commands: backslash continuations joined,
// comments and blank lines left out.
func shellLines(block string) []string {
	var out []string
	var cur strings.Builder
	for _, l := range strings.Split(block, "\n") {
		trimmed := strings.TrimSpace(l)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		out = append(out, cur.String())
		cur.Reset()
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// shellWords splits a command into words as a shell would, quotes removed
// (no expansion: $(…) stays inside its word).
func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	depth := 0
	for _, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == '(' && strings.HasSuffix(cur.String(), "$"):
			depth++
			cur.WriteRune(r)
		case r == ')' && depth > 0:
			depth--
			cur.WriteRune(r)
		case (r == ' ' || r == '\t') && depth == 0:
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

func indexWord(words []string, w string) int {
	for i, x := range words {
		if x == w {
			return i
		}
	}
	return -1
}

// TestGuideCheckFails feeds the guide checker a guide with one mistake of
// each kind: each must be reported.
func TestGuideCheckFails(t *testing.T) {
	makefile, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	bad := "```sh\n" + `make package-aws PACKAGE_ARCH=arm64
make pakage-aws
cd terraform/examples/aws
terraform apply -var region=eu-west-1
terraform apply -var 'hosts=["https://a"]' -var regoin=eu-west-1
terraform apply -var 'hosts=https://a'
curl "$(terraform output -raw function_uri)"
make package-aws
go run ./functions check "$URL"
` + "```\n" + "```sh\ncd ../azure\naz functionapp deployment source config-zip --src ../../dist/azure-functionapp.zip\ncd ../nowhere\n```\n"
	problems, _ := checkGuide(bad, string(makefile))
	all := strings.Join(problems, "\n")
	for _, want := range []string{
		"the Makefile has no variable PACKAGE_ARCH",
		"the Makefile has no target pakage-aws",
		"terraform apply does not set hosts, which has no default",
		"examples/aws has no variable regoin",
		`-var hosts: "https://a" does not parse`,
		"examples/aws has no output function_uri",
		"make runs in terraform/examples/aws",
		"go run ./functions runs in terraform/examples/aws",
		"no folder terraform/examples/nowhere",
		"--src is terraform/dist/azure-functionapp.zip",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("want a problem containing %q; got:\n%s", want, all)
		}
	}
}

// TestGuideChecks checks that each deploy guide's gateway check step runs
// the probes the guide promises: a TTL that runs out during an attempt
// (--slow-path with a positive --ttl, not the S7PTTL: 0 that expires before
// any attempt) and an async request followed to its result (--async with
// --profile naming a profile of the example whose async-config is enabled);
// and that the Azure guide retries the first zip deployment while the app
// identity's new storage role propagates.
func TestGuideChecks(t *testing.T) {
	for _, g := range guides {
		t.Run(filepath.Base(g.doc), func(t *testing.T) {
			src, err := os.ReadFile(g.doc)
			if err != nil {
				t.Fatal(err)
			}
			profiles := exampleAsyncProfiles(t, g.example)
			n := 0
			for _, block := range fence.FindAllStringSubmatch(string(src), -1) {
				for _, line := range shellLines(block[2]) {
					if !strings.Contains(line, "go run ./functions check") {
						continue
					}
					n++
					for _, p := range checkStepProblems(shellWords(line), profiles) {
						t.Errorf("%s: %q: %s", g.doc, line, p)
					}
				}
			}
			if n == 0 {
				t.Errorf("%s: no go run ./functions check step", g.doc)
			}
			if g.module == "azure" {
				for _, p := range zipRetryProblems(string(src)) {
					t.Errorf("%s: %s", g.doc, p)
				}
			}
		})
	}
}

// checkStepProblems returns what a gateway check command line lacks.
func checkStepProblems(words []string, asyncProfiles map[string]bool) []string {
	var problems []string
	value := func(flag string) (string, bool) {
		i := indexWord(words, flag)
		if i < 0 || i+1 >= len(words) {
			return "", false
		}
		return words[i+1], true
	}
	if p, ok := value("--slow-path"); !ok || !strings.HasPrefix(p, "/") {
		problems = append(problems, "no --slow-path: the TTL probe then sends S7PTTL: 0, which expires before any attempt, not on time")
	}
	if v, ok := value("--ttl"); ok {
		if f, err := strconv.ParseFloat(v, 64); err != nil || f <= 0 {
			problems = append(problems, fmt.Sprintf("--ttl %s: want a positive number of seconds", v))
		}
	}
	if indexWord(words, "--async") < 0 {
		problems = append(problems, "no --async: no async request is followed to its result")
	}
	if p, ok := value("--profile"); !ok || !asyncProfiles[p] {
		problems = append(problems, fmt.Sprintf("--profile %q: want a profile of the example with async-config.enabled (%q)", p, sortedKeys(asyncProfiles)))
	}
	return problems
}

// zipRetryProblems returns what the Azure guide's zip deployment lacks: it
// must be retried (for … && break … sleep … done), since the first one
// fails while the app identity's Storage Blob Data Owner assignment
// propagates.
func zipRetryProblems(doc string) []string {
	for _, block := range fence.FindAllStringSubmatch(doc, -1) {
		if !strings.Contains(block[2], "config-zip") {
			continue
		}
		lines := shellLines(block[2])
		retried := len(lines) > 0 && strings.HasPrefix(lines[0], "for ") && strings.Contains(block[2], "sleep ") && lines[len(lines)-1] == "done"
		for _, l := range lines {
			if strings.Contains(l, "config-zip") && !strings.HasSuffix(l, "&& break") {
				retried = false
			}
		}
		if !retried {
			return []string{"the zip deployment is not retried (for …; do az … config-zip … && break; sleep …; done): the first one fails with 400 BlobUploadFailedException until the storage role assignment has propagated"}
		}
		return nil
	}
	return []string{"no az functionapp deployment source config-zip step"}
}

// exampleAsyncProfiles returns the userIds of the example's user_profiles
// whose async-config is enabled.
func exampleAsyncProfiles(tb testing.TB, example string) map[string]bool {
	tb.Helper()
	ex, err := loadModule(example)
	if err != nil {
		tb.Fatal(err)
	}
	sample := azureSpec.sample
	if strings.HasSuffix(example, "aws") {
		sample = awsSpec.sample
	}
	for _, df := range deployedFiles {
		if df.example == example {
			sample = df.sample
		}
	}
	e, err := ex.eval(sample)
	if err != nil {
		tb.Fatal(err)
	}
	_, args, err := e.callArgs("gateway")
	if err != nil {
		tb.Fatal(err)
	}
	raw, ok := args["user_profiles"]
	if !ok || raw.IsNull() || !raw.IsKnown() {
		tb.Fatalf("%s: the gateway module gets no known user_profiles", example)
	}
	var profiles []struct {
		UserID      string `json:"userId"`
		AsyncConfig struct {
			Enabled bool `json:"enabled"`
		} `json:"async-config"`
	}
	if err := json.Unmarshal([]byte(raw.AsString()), &profiles); err != nil {
		tb.Fatalf("%s: user_profiles: %v", example, err)
	}
	out := map[string]bool{}
	for _, p := range profiles {
		if p.AsyncConfig.Enabled {
			out[p.UserID] = true
		}
	}
	return out
}

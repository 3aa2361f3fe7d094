package tests

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// outsideDoc is the name of the contract document that lives outside the
// repository, which code used to cite by section. It is spelt in two halves
// so that this file does not cite it itself.
const outsideDoc = "CONTR" + "ACT"

// docRef is a reference to a document of docs/, with its anchor if any:
// docs/deadlines.md#status-codes.
var docRef = regexp.MustCompile(`docs/([A-Za-z0-9_-]+\.md)(?:#([\p{L}\p{N}_-]+))?`)

// TestCodeCitesDocs holds the code to citations a reader can follow: no .go
// or .tf file of the repository cites the contract document kept outside it,
// and every docs/<file>.md#<anchor> one cites names a document of docs/ and
// a heading of it, as GitHub anchors it.
func TestCodeCitesDocs(t *testing.T) {
	root := ".."
	anchors := map[string]map[string]bool{} // docs file → its anchors
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no documents under docs/: %v", err)
	}
	for _, p := range docs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		anchors[filepath.Base(p)] = headingAnchors(string(b))
	}
	files, refs := 0, 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", ".tools", "dist", "node_modules", ".terraform":
				return fs.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(path); ext != ".go" && ext != ".tf" || !d.Type().IsRegular() {
			return nil
		}
		files++
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		rel, _ := filepath.Rel(root, path)
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if strings.Contains(line, outsideDoc) {
				t.Errorf("%s:%d cites %s, a document outside the repository: cite the docs/<file>.md#<anchor> that covers the rule\n\t%s",
					rel, n, outsideDoc, strings.TrimSpace(line))
			}
			for _, m := range docRef.FindAllStringSubmatch(line, -1) {
				refs++
				doc, anchor := m[1], m[2]
				have, ok := anchors[doc]
				switch {
				case !ok:
					t.Errorf("%s:%d cites docs/%s, which does not exist", rel, n, doc)
				case anchor != "" && !have[anchor]:
					t.Errorf("%s:%d cites docs/%s#%s, which is no heading's anchor of docs/%s; its anchors: %s",
						rel, n, doc, anchor, doc, strings.Join(sortedKeys(have), " "))
				}
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 || refs == 0 {
		t.Fatalf("read %d .go and .tf files with %d docs/ references: the walk found nothing to check", files, refs)
	}
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown document: ATX headings (#, ##, …) outside fenced code blocks,
// each slugged by githubAnchor, a repeated one suffixed -1, -2, … as GitHub
// does.
func headingAnchors(md string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fence := ""
	for line := range strings.Lines(md) {
		line = strings.TrimRight(line, "\r\n")
		trimmed := strings.TrimLeft(line, " ")
		if len(line)-len(trimmed) > 3 {
			continue // indented code
		}
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			for len(fence) < len(trimmed) && trimmed[len(fence)] == fence[0] {
				fence += fence[:1]
			}
			continue
		}
		level := len(trimmed) - len(strings.TrimLeft(trimmed, "#"))
		if level < 1 || level > 6 || len(trimmed) > level && trimmed[level] != ' ' {
			continue
		}
		text := strings.TrimSpace(trimmed[level:])
		text = strings.TrimSpace(strings.TrimRight(text, "#")) // closing sequence
		a := githubAnchor(text)
		if n := seen[a]; n > 0 {
			seen[a] = n + 1
			a += "-" + strconv.Itoa(n)
		} else {
			seen[a] = 1
		}
		anchors[a] = true
	}
	return anchors
}

// mdLink is an inline link or image, whose text alone is rendered.
var mdLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)

// githubAnchor slugs a heading's text as GitHub does (github-slugger): the
// rendered text (code spans and links reduced to their text), lower-cased,
// every character but letters, digits, '_', '-' and spaces removed, and
// each space made a '-'.
func githubAnchor(heading string) string {
	text := mdLink.ReplaceAllString(heading, "$1")
	text = strings.NewReplacer("`", "", "*", "").Replace(text)
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestGithubAnchor holds githubAnchor and headingAnchors to anchors GitHub
// renders for headings of this repository's documents.
func TestGithubAnchor(t *testing.T) {
	for _, c := range []struct{ heading, want string }{
		{"Deadlines and retries", "deadlines-and-retries"},
		{"Azure's HTTP clock", "azures-http-clock"},
		{"Signed routes: a capability the operator grants", "signed-routes-a-capability-the-operator-grants"},
		{"The operation URI (status monitor)", "the-operation-uri-status-monitor"},
		{"`/_gateway/stats`", "_gatewaystats"},
		{"`FunctionLimit` endings", "functionlimit-endings"},
		{"1. Prerequisites", "1-prerequisites"},
		{"Checking a deployment: `functions check`", "checking-a-deployment-functions-check"},
		{"The hand-off, results and notifications", "the-hand-off-results-and-notifications"},
		{"Why a slow path, and which one", "why-a-slow-path-and-which-one"},
		{"A — B", "a--b"},
		{"See [the guide](guide.md) now", "see-the-guide-now"},
	} {
		if got := githubAnchor(c.heading); got != c.want {
			t.Errorf("githubAnchor(%q) = %q, want %q", c.heading, got, c.want)
		}
	}
	md := "# Title\n\n## Notes\n\n```sh\n# not a heading\n```\n\n## Notes\n\n    # indented code\n#nospace\n### Notes ##\n"
	got := sortedKeys(headingAnchors(md))
	want := []string{"notes", "notes-1", "notes-2", "title"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("headingAnchors = %v, want %v", got, want)
	}
}

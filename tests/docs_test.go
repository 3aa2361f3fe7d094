package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The documents TestDocs reads, from the repository's root.
var docFiles = []string{"README.md", "docs/*.md"}

// cloudDocs need a cloud account: their shell blocks are checked statically,
// command by command, by terraform/ TestDeployGuides.
var cloudDocs = map[string]bool{"docs/deploy-azure.md": true, "docs/deploy-aws.md": true}

// docAddr is the gateway's address as the documents write it: ListenAddr's default.
const docAddr = "127.0.0.1:8080"

// TestDocs runs the documents' commands as a reader would, against the local
// host, and compares what they print with what the documents show.
//
// A fenced block is run when an HTML comment just before it (blank lines
// between allowed) says so:
//
//   - <!-- run --> before a block of commands: a block whose lines start with
//     "$ " is a transcript (each "$ " line a command, "\" continuing it, the
//     lines up to the next "$ " the output it must print); a block without
//     "$ " is a list of commands whose output is not shown. Either way every
//     command must exit 0. The block runs in one bash (set -o pipefail), in
//     the repository's root.
//   - <!-- run: server --> before a block of one command that starts a
//     gateway (go run ./functions …): it runs in the background, with
//     ListenAddr=127.0.0.1:0 and its store in a temporary directory unless
//     the command sets them, until the next server block or the end of the
//     document; 127.0.0.1:8080 in the later blocks is its address.
//   - <!-- run: backend ADDR --> (may be combined: "backend ADDR, server"):
//     a backend on a loopback port of its own stands for ADDR in the block
//     and in the later ones; it answers every request 200 with
//     "hello from your backend".
//   - <!-- static: REASON --> marks a shell block that cannot run on one
//     machine. Any other shell block (```sh, ```console, or one that starts
//     with a command) without a marker fails the test, except in cloudDocs.
//
// Before comparing, both sides are normalised: Date headers dropped;
// loopback ports, 32-hex ids, RFC 3339 times, durations (2ms, 1.5s), poll
// counts, Content-Length, durationMs, x-Gateway-Latency-Ms and signatures replaced by a
// placeholder. In the document's output, "…" matches anything within its
// line, and a line of "…" alone any number of lines.
//
// Inline code in the prose that starts with "go build" is run too.
//
// `go` on the commands' PATH is the real one except that `go run
// ./functions ARGS` runs the gateway TestMain built, and `go build` adds
// -race, so both reuse that build instead of compiling the module anew.
// Files the commands leave in the repository's root are removed afterwards.
func TestDocs(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	shim := goShim(t)
	var docs []string
	for _, pat := range docFiles {
		m, err := filepath.Glob(filepath.Join(root, pat))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, m...)
	}
	type doc struct {
		rel    string
		blocks []docBlock
		spans  []inlineCmd
	}
	var parsed []doc
	inBlocks := map[string]bool{} // the commands of the run blocks
	for _, path := range docs {
		rel, _ := filepath.Rel(root, path)
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		blocks, spans, problems := parseDoc(string(src))
		for _, p := range problems {
			t.Errorf("%s:%s", rel, p)
		}
		for _, b := range blocks {
			if b.run != nil {
				for _, c := range splitBlock(b) {
					inBlocks[c.cmd] = true
				}
			}
		}
		parsed = append(parsed, doc{rel, blocks, spans})
	}
	// A command of the prose that a run block runs as well is run there
	// (each go build links the binary anew); the others once each.
	ranSpans := map[string]bool{}
	ran := 0
	for _, d := range parsed {
		rel, blocks := d.rel, d.blocks
		var spans []inlineCmd
		for _, sp := range d.spans {
			if !inBlocks[sp.cmd] && !ranSpans[sp.cmd] {
				ranSpans[sp.cmd] = true
				spans = append(spans, sp)
			}
		}
		var runnable []docBlock
		for _, b := range blocks {
			switch {
			case b.run != nil:
				runnable = append(runnable, b)
			case b.static == "" && b.shell && !cloudDocs[rel]:
				t.Errorf("%s:%d: a shell block without a marker: put <!-- run … --> before it (TestDocs runs it) or <!-- static: why it cannot run on one machine -->", rel, b.line)
			}
		}
		if len(runnable) == 0 && len(spans) == 0 {
			continue
		}
		ran += len(runnable) + len(spans)
		t.Run(rel, func(t *testing.T) {
			s := &docSession{t: t, doc: rel, root: root, shim: shim, subst: map[string]string{}}
			defer s.close()
			for _, sp := range spans {
				s.runCommands(docBlock{line: sp.line, text: sp.cmd})
			}
			for _, b := range runnable {
				s.runBlock(b)
			}
		})
	}
	if ran == 0 {
		t.Fatal("no runnable block or command in the documents")
	}
}

// docBlock is a fenced block of a document.
type docBlock struct {
	line   int      // of its first content line (1-based)
	info   string   // the fence's info string
	text   string   // its content
	run    []string // the items of its run marker (empty: a plain run); nil when not marked run
	static string   // the reason of its static marker
	shell  bool     // it holds commands
}

// inlineCmd is a command in a code span of the prose.
type inlineCmd struct {
	line int
	cmd  string
}

var (
	markerRe  = regexp.MustCompile(`^<!--\s*(run|static)\s*(?::\s*(.*?))?\s*-->$`)
	inlineRe  = regexp.MustCompile("`(go build [^`]*)`")
	shellInfo = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true}
)

// shellStarts are the first words of a block that holds commands.
var shellStarts = []string{"$ ", "go ", "./", "curl ", "make "}

// parseDoc returns a document's fenced blocks, the go build commands of its
// prose, and the markers it cannot read.
func parseDoc(src string) (blocks []docBlock, spans []inlineCmd, problems []string) {
	lines := strings.Split(src, "\n")
	var marker *docBlock // the pending marker
	markerLine := 0
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if m := markerRe.FindStringSubmatch(l); m != nil {
			marker = &docBlock{}
			markerLine = i + 1
			if m[1] == "run" {
				marker.run = []string{}
				for _, it := range strings.Split(m[2], ",") {
					if it = strings.TrimSpace(it); it != "" {
						marker.run = append(marker.run, it)
					}
				}
			} else {
				if m[2] == "" {
					problems = append(problems, fmt.Sprintf("%d: <!-- static --> without a reason", i+1))
				}
				marker.static = m[2]
			}
			continue
		}
		if strings.HasPrefix(l, "```") {
			b := docBlock{info: strings.TrimSpace(strings.TrimPrefix(l, "```")), line: i + 2}
			var body []string
			for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "```"); i++ {
				body = append(body, lines[i])
			}
			b.text = strings.Join(body, "\n")
			b.shell = shellInfo[b.info]
			if first := strings.TrimSpace(b.text); !b.shell {
				for _, p := range shellStarts {
					if strings.HasPrefix(first, p) {
						b.shell = true
					}
				}
			}
			if marker != nil {
				b.run, b.static = marker.run, marker.static
				marker = nil
			}
			blocks = append(blocks, b)
			continue
		}
		if l == "" {
			continue
		}
		if marker != nil {
			problems = append(problems, fmt.Sprintf("%d: a marker not followed by a fenced block", markerLine))
			marker = nil
		}
		for _, m := range inlineRe.FindAllStringSubmatch(lines[i], -1) {
			spans = append(spans, inlineCmd{line: i + 1, cmd: m[1]})
		}
	}
	if marker != nil {
		problems = append(problems, fmt.Sprintf("%d: a marker not followed by a fenced block", markerLine))
	}
	return blocks, spans, problems
}

// goShim writes the `go` the documents' commands run and returns its folder.
func goShim(tb testing.TB) string {
	tb.Helper()
	real, err := exec.LookPath("go")
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	script := `#!/bin/bash
# go, as TestDocs runs the documents' commands: go run ./functions runs the
# gateway the tests built; go build is the real one, with -race to reuse
# the packages compiled for it.
if [ "$1" = run ] && [ "$2" = ./functions ]; then shift 2; exec "$DOCS_GATEWAY" "$@"; fi
if [ "$1" = build ]; then shift; exec "$DOCS_REAL_GO" build -race "$@"; fi
exec "$DOCS_REAL_GO" "$@"
`
	if err := os.WriteFile(filepath.Join(dir, "go"), []byte(script), 0o755); err != nil {
		tb.Fatal(err)
	}
	tb.Setenv("DOCS_REAL_GO", real)
	tb.Setenv("DOCS_GATEWAY", binary)
	return dir
}

// docSession runs one document's blocks in order.
type docSession struct {
	t      *testing.T
	doc    string
	root   string
	shim   string
	subst  map[string]string // the documents' addresses → the running ones
	server *exec.Cmd
	done   chan struct{}
	before map[string]bool // the root's entries before the first command
	loose  map[string]bool // the files git neither tracks nor ignores, then; nil outside a git checkout
}

// looseFiles returns the files of the checkout at root that git neither
// tracks nor ignores, or nil when root is not a git checkout.
func looseFiles(root string) map[string]bool {
	cmd := exec.Command("git", "ls-files", "--others", "--exclude-standard", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil
	}
	files := map[string]bool{}
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" {
			files[f] = true
		}
	}
	return files
}

// env is the environment of the documents' commands.
func (s *docSession) env() []string {
	env := []string{"PATH=" + s.shim + string(os.PathListSeparator) + os.Getenv("PATH")}
	for _, kv := range baseEnv() {
		if !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	// go build finds the build cache the tests' own build filled.
	for _, k := range []string{"GOCACHE", "GOPATH", "GOMODCACHE", "GOFLAGS", "GOTOOLCHAIN", "GOROOT"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, "DOCS_REAL_GO="+os.Getenv("DOCS_REAL_GO"), "DOCS_GATEWAY="+binary)
}

// substitute replaces the documents' addresses by the running ones.
func (s *docSession) substitute(text string) string {
	for from, to := range s.subst {
		text = strings.ReplaceAll(text, from, to)
	}
	return text
}

func (s *docSession) runBlock(b docBlock) {
	s.t.Helper()
	server := false
	for _, it := range b.run {
		switch {
		case it == "server":
			server = true
		case strings.HasPrefix(it, "backend "):
			s.backend(strings.TrimSpace(strings.TrimPrefix(it, "backend ")))
		default:
			s.t.Errorf("%s:%d: unknown run marker item %q: want server or backend ADDR", s.doc, b.line, it)
			return
		}
	}
	if server {
		s.startServer(b)
		return
	}
	s.runCommands(b)
}

// backend starts the stand-in for the document's backend at addr.
func (s *docSession) backend(addr string) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "hello from your backend\n")
	}))
	s.t.Cleanup(srv.Close)
	s.subst[addr] = strings.TrimPrefix(srv.URL, "http://")
}

// startServer runs the block's one command in the background and waits
// until it listens.
func (s *docSession) startServer(b docBlock) {
	t := s.t
	t.Helper()
	s.stopServer()
	cmdline := strings.TrimSpace(b.text)
	if strings.Contains(cmdline, "\n") {
		t.Fatalf("%s:%d: a server block holds one command, not %q", s.doc, b.line, cmdline)
	}
	s.snapshotRoot()
	cmd := exec.Command("bash", "-c", s.substitute(cmdline))
	cmd.Dir = s.root
	cmd.Env = append(s.env(), "ListenAddr=127.0.0.1:0", "AsyncStore=file:"+t.TempDir())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s:%d: %v", s.doc, b.line, err)
	}
	s.server, s.done = cmd, make(chan struct{})
	logs := newLogTail()
	addr := make(chan string, 1)
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			logs.add(sc.Text())
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == "listening" {
				a, _ := m["addr"].(string)
				select {
				case addr <- a:
				default:
				}
			}
		}
		cmd.Wait()
	}()
	select {
	case a := <-addr:
		s.subst[docAddr] = a
	case <-s.done:
		t.Fatalf("%s:%d: %s exited before listening:\n%s", s.doc, b.line, cmdline, strings.Join(logs.Lines(), "\n"))
	case <-time.After(loadMargin):
		t.Fatalf("%s:%d: %s did not listen within %v:\n%s", s.doc, b.line, cmdline, loadMargin, strings.Join(logs.Lines(), "\n"))
	}
}

func (s *docSession) stopServer() {
	if s.server == nil {
		return
	}
	syscall.Kill(-s.server.Process.Pid, syscall.SIGKILL)
	<-s.done
	s.server = nil
}

// snapshotRoot remembers the root's entries before the first command.
func (s *docSession) snapshotRoot() {
	if s.before != nil {
		return
	}
	s.before = map[string]bool{}
	s.loose = looseFiles(s.root)
	ents, err := os.ReadDir(s.root)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, e := range ents {
		s.before[e.Name()] = true
	}
}

// close stops the server and removes what the commands left in the root.
// A file they left that git would show as untracked fails the test: what
// a reader's commands write must be ignored by git.
func (s *docSession) close() {
	s.stopServer()
	if s.before == nil {
		return
	}
	if s.loose != nil {
		for f := range looseFiles(s.root) {
			if !s.loose[f] {
				s.t.Errorf("%s: the commands left %s, which git does not ignore: build into an ignored path or add it to .gitignore", s.doc, f)
				os.Remove(filepath.Join(s.root, f))
			}
		}
	}
	ents, _ := os.ReadDir(s.root)
	for _, e := range ents {
		if !s.before[e.Name()] {
			os.RemoveAll(filepath.Join(s.root, e.Name()))
		}
	}
}

// docCmd is one command of a block and the output the document shows for it.
type docCmd struct {
	line   int
	cmd    string
	want   []string
	shown  bool // the document shows its output
	got    string
	status int
}

// splitBlock reads a block as commands and their outputs.
func splitBlock(b docBlock) []*docCmd {
	lines := strings.Split(b.text, "\n")
	transcript := strings.HasPrefix(strings.TrimSpace(b.text), "$ ")
	var cmds []*docCmd
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if transcript && !strings.HasPrefix(l, "$ ") {
			if len(cmds) > 0 {
				c := cmds[len(cmds)-1]
				c.want = append(c.want, l)
			}
			continue
		}
		if strings.TrimSpace(l) == "" || strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		c := &docCmd{line: b.line + i, cmd: strings.TrimPrefix(l, "$ "), shown: transcript}
		for strings.HasSuffix(c.cmd, "\\") && i+1 < len(lines) {
			i++
			c.cmd += "\n" + lines[i]
		}
		cmds = append(cmds, c)
	}
	return cmds
}

const (
	startMark = "\x1edocs-command "
	endMark   = "\x1edocs-status "
)

// runCommands runs a block's commands in one bash and checks each one's
// exit status and output.
func (s *docSession) runCommands(b docBlock) {
	t := s.t
	t.Helper()
	cmds := splitBlock(b)
	if len(cmds) == 0 {
		t.Errorf("%s:%d: a run block without a command", s.doc, b.line)
		return
	}
	s.snapshotRoot()
	var script strings.Builder
	script.WriteString("set -o pipefail\n")
	for i, c := range cmds {
		fmt.Fprintf(&script, "printf '\\n%s%d\\n'\n%s\nprintf '\\n%s%%d\\n' $?\n", startMark, i, s.substitute(c.cmd), endMark)
	}
	cmd := exec.Command("bash", "-c", script.String())
	cmd.Dir = s.root
	cmd.Env = s.env()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Run()
	// Split the output at the marks.
	cur := -1
	var buf []string
	for _, l := range strings.Split(out.String(), "\n") {
		switch {
		case strings.HasPrefix(l, startMark):
			fmt.Sscanf(strings.TrimPrefix(l, startMark), "%d", &cur)
			buf = nil
		case strings.HasPrefix(l, endMark) && cur >= 0:
			fmt.Sscanf(strings.TrimPrefix(l, endMark), "%d", &cmds[cur].status)
			cmds[cur].got = strings.Join(buf, "\n")
			cur = -1
		case cur >= 0:
			buf = append(buf, l)
		}
	}
	for _, c := range cmds {
		if c.status != 0 {
			t.Errorf("%s:%d: `%s` failed (exit status %d):\n%s", s.doc, c.line, c.cmd, c.status, c.got)
			continue
		}
		if !c.shown {
			continue
		}
		got := s.unsubstitute(c.got)
		if !matchOutput(normaliseOutput(strings.Join(c.want, "\n")), normaliseOutput(got)) {
			t.Errorf("%s:%d: `%s` printed other than the document shows\n--- document (normalised):\n%s\n--- got (normalised):\n%s",
				s.doc, c.line, c.cmd, strings.Join(normaliseOutput(strings.Join(c.want, "\n")), "\n"), strings.Join(normaliseOutput(got), "\n"))
		}
	}
}

// unsubstitute writes the running addresses as the documents do.
func (s *docSession) unsubstitute(text string) string {
	for from, to := range s.subst {
		text = strings.ReplaceAll(text, to, from)
	}
	return text
}

// The normalisations of an output, in order.
var outputNorms = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`127\.0\.0\.1:\d+`), "127.0.0.1:PORT"},
	{regexp.MustCompile(`\b[0-9a-f]{32}\b`), "ID"},
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`), "TIME"},
	{regexp.MustCompile(`\bse=\d+`), "se=N"},
	{regexp.MustCompile(`\bsig=[A-Za-z0-9_%-]+`), "sig=SIG"},
	{regexp.MustCompile(`(?i)^content-length: \d+$`), "Content-Length: N"},
	{regexp.MustCompile(`"durationMs":\d+`), `"durationMs":N`},
	{regexp.MustCompile(`(?i)^x-gateway-latency-ms: \d+$`), "X-Gateway-Latency-Ms: N"},
	{regexp.MustCompile(`\b\d+ polls?\b`), "N polls"},
	{regexp.MustCompile(`\b\d+(\.\d+)?(ns|µs|ms|s|m|h)\b`), "DUR"},
}

// normaliseOutput returns an output's lines, normalised.
func normaliseOutput(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.ReplaceAll(s, "\r", ""), "\n") {
		l = strings.TrimRight(l, " \t")
		if strings.HasPrefix(strings.ToLower(l), "date: ") {
			continue
		}
		for _, n := range outputNorms {
			l = n.re.ReplaceAllString(l, n.with)
		}
		out = append(out, l)
	}
	for len(out) > 0 && out[0] == "" {
		out = out[1:]
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// matchOutput reports whether got matches the document's want: lines equal,
// "…" matching anything within a line and a line of "…" any lines.
func matchOutput(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if want[0] == "…" {
		for i := 0; i <= len(got); i++ {
			if matchOutput(want[1:], got[i:]) {
				return true
			}
		}
		return false
	}
	if len(got) == 0 || !matchLine(want[0], got[0]) {
		return false
	}
	return matchOutput(want[1:], got[1:])
}

func matchLine(want, got string) bool {
	if !strings.Contains(want, "…") {
		return want == got
	}
	parts := strings.Split(want, "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$").MatchString(got)
}

// TestDocsMatchOutput holds the comparison's rules.
func TestDocsMatchOutput(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, want, got string
		ok              bool
	}{
		{"equal", "a\nb", "a\nb", true},
		{"a line differs", "a\nb", "a\nc", false},
		{"a line missing", "a\nb", "a", false},
		{"a line more", "a", "a\nb", false},
		{"within a line", "sig=…&x", "sig=SIG&x", true},
		{"within a line, not across the rest", "a…b", "axc", false},
		{"any lines", "a\n…\nd", "a\nb\nc\nd", true},
		{"no lines", "a\n…\nd", "a\nd", true},
		{"dates dropped", "HTTP/1.1 200 OK\nX: 1", "HTTP/1.1 200 OK\r\nDate: Tue, 01 Dec 2026 22:55:44 GMT\r\nX: 1\r\n", true},
		{"ids, times and ports", `{"id":"32dee15ec1611441a62f63cdad32d49d","at":"2026-12-01T14:07:21.5Z","u":"http://127.0.0.1:8080/"}`,
			`{"id":"a53163a1f94a525a02da251ffea57a84","at":"2026-12-02T01:00:00Z","u":"http://127.0.0.1:41234/"}`, true},
		{"durations", "→ 504 in 1s (2 polls)", "→ 504 in 1.02s (3 polls)", true},
		{"a status is not a duration", "→ 504 in 1s", "→ 412 in 1s", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := matchOutput(normaliseOutput(c.want), normaliseOutput(c.got)); got != c.ok {
				t.Errorf("matchOutput(%q, %q) = %v, want %v", c.want, c.got, got, c.ok)
			}
		})
	}
}

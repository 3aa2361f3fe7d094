// Package tests holds end-to-end tests: they build the real binary, start it
// as its own process on a loopback port, and talk to it and to real backends
// over HTTP.
package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binary is the gateway built once for the whole package.
var binary string

// loadMargin is the slack an end-to-end wait adds to what its settings
// imply (lease, visibility, backend delay, Retry-After): room for a loaded
// 2-core machine, with -race, to start a gateway process, schedule its
// goroutines and answer the polls. A wait that overruns it is a failure;
// it is never a delay a test waits out.
const loadMargin = 20 * time.Second

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gateway-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "gateway")
	build := exec.Command("go", "build", "-race", "-ldflags=-w", "-o", binary, "../functions")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the gateway:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var (
	productionOnce   sync.Once
	productionBinary string
	productionErr    error
)

// productionGateway builds the gateway once, as make package-aws and make
// package-azure build it (no race detector, whose shadow memory would swamp
// a memory measurement; gRPC without its tracing, grpcnotrace, which also lets
// the one-cloud builds of the tests reuse its compiled packages), with both
// clouds, for the tests that measure the shipped binary.
func productionGateway(tb testing.TB) string {
	tb.Helper()
	productionOnce.Do(func() {
		productionBinary = filepath.Join(filepath.Dir(binary), "gateway-production")
		build := exec.Command("go", "build", "-tags", "lambda.norpc,grpcnotrace", "-trimpath", "-ldflags=-s -w", "-o", productionBinary, "../functions")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			productionErr = fmt.Errorf("building the gateway as the packages do: %v\n%s", err, out)
		}
	})
	if productionErr != nil {
		tb.Fatal(productionErr)
	}
	return productionBinary
}

// Gateway is a running gateway process.
type Gateway struct {
	URL  string
	cmd  *exec.Cmd
	logs *logTail
	done chan struct{}
}

// logTail keeps the process's output lines.
type logTail struct {
	mu    sync.Mutex
	lines []string
	cond  *sync.Cond
}

func newLogTail() *logTail {
	l := &logTail{}
	l.cond = sync.NewCond(&l.mu)
	return l
}

func (l *logTail) add(s string) {
	l.mu.Lock()
	l.lines = append(l.lines, s)
	l.mu.Unlock()
	l.cond.Broadcast()
}

// Lines returns the output so far.
func (l *logTail) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// StartGateway starts the binary with env (plus ListenAddr on a free port
// and a store in a temporary directory unless given) and waits until it
// listens. It stops the process at the end of the test.
func StartGateway(tb testing.TB, env map[string]string) *Gateway {
	tb.Helper()
	if _, ok := env["AsyncStore"]; !ok {
		env["AsyncStore"] = "file:" + tb.TempDir()
	}
	return startGateway(tb, env)
}

func startGateway(tb testing.TB, env map[string]string) *Gateway {
	tb.Helper()
	return startBinary(tb, binary, env)
}

// startBinary is startGateway for the gateway binary bin.
func startBinary(tb testing.TB, bin string, env map[string]string) *Gateway {
	tb.Helper()
	g, err := tryStartBinary(tb, bin, env)
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

// errExited is tryStartBinary's error when the process ended before it
// listened; the error's text holds the process's output.
var errExited = errors.New("the gateway exited before listening")

// tryStartBinary is startBinary returning its failure (errExited when the
// process ended before listening) instead of ending the test.
func tryStartBinary(tb testing.TB, bin string, env map[string]string) (*Gateway, error) {
	tb.Helper()
	cmd := exec.Command(bin)
	cmd.Env = baseEnv()
	cmd.Env = append(cmd.Env, "ListenAddr=127.0.0.1:0")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	g := &Gateway{cmd: cmd, logs: newLogTail(), done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the gateway: %w", err)
	}
	tb.Cleanup(func() { g.Kill() })
	addr := make(chan string, 1)
	go func() {
		defer close(g.done)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			g.logs.add(line)
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "listening" {
				select {
				case addr <- m["addr"].(string):
				default:
				}
			}
		}
		cmd.Wait()
	}()
	select {
	case a := <-addr:
		g.URL = "http://" + a
	case <-g.done:
		return nil, fmt.Errorf("%w:\n%s", errExited, strings.Join(g.logs.Lines(), "\n"))
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("the gateway did not listen within 30 s:\n%s", strings.Join(g.logs.Lines(), "\n"))
	}
	return g, nil
}

// baseEnv is the environment without any gateway setting of the caller's.
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(k) {
		case "PATH", "HOME", "TMPDIR", "GOCOVERDIR", "GORACE":
			env = append(env, kv)
		}
	}
	return env
}

// Kill stops the process with SIGKILL and waits for it.
func (g *Gateway) Kill() {
	if g.cmd.Process != nil {
		g.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-g.done
}

// Logs returns the gateway's output lines decoded as JSON objects.
func (g *Gateway) Logs() []map[string]any {
	var out []map[string]any
	for _, l := range g.logs.Lines() {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// WaitLog waits until a log line satisfies match, or fails after timeout.
func (g *Gateway) WaitLog(tb testing.TB, timeout time.Duration, match func(map[string]any) bool) map[string]any {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, m := range g.Logs() {
			if match(m) {
				return m
			}
		}
		time.Sleep(10 * time.Millisecond) // polling a log with a deadline
	}
	tb.Fatalf("no matching log line within %v:\n%s", timeout, strings.Join(g.logs.Lines(), "\n"))
	return nil
}

// Do sends a request to the gateway and reads the whole answer.
func Do(tb testing.TB, method, url string, hdr map[string]string, body string) (*http.Response, []byte, time.Duration) {
	tb.Helper()
	var rb io.Reader
	if body != "" {
		rb = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, url, rb)
	if err != nil {
		tb.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	start := time.Now()
	resp, err := noRedirect.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	return resp, data, time.Since(start)
}

var noRedirect = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Timeout:       60 * time.Second,
}

// errorDoc is the gateway's error body.
type errorDoc struct {
	Error struct {
		Code     string `json:"code"`
		Message  string `json:"message"`
		Attempts []struct {
			Host       string `json:"host"`
			Status     int    `json:"status"`
			Outcome    string `json:"outcome"`
			DurationMs int64  `json:"durationMs"`
		} `json:"attempts"`
	} `json:"error"`
}

func decodeError(tb testing.TB, resp *http.Response, body []byte) errorDoc {
	tb.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		tb.Errorf("Content-Type = %q; want application/json", ct)
	}
	var d errorDoc
	if err := json.Unmarshal(body, &d); err != nil {
		tb.Fatalf("error body %q: %v", body, err)
	}
	if got := resp.Header.Get("X-Gateway-Error"); got != d.Error.Code {
		tb.Errorf("x-Gateway-Error = %q; body code %q", got, d.Error.Code)
	}
	return d
}

// within reports whether d is in [want-lo, want+hi].
func within(d, want, lo, hi time.Duration) bool { return d >= want-lo && d <= want+hi }

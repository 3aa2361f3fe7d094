package emulators

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// rieReadyTimeout bounds the wait for the emulator to listen.
const rieReadyTimeout = 3 * time.Minute // liveness only: an exit ends the wait at once; room for a loaded 2-core machine

// rieLogLimit bounds the output an RIE keeps (all of it, for assertions
// such as "never reported a timeout").
const rieLogLimit = 8 << 20

// RIE is a running AWS Lambda Runtime Interface Emulator (aws-lambda-rie)
// serving one function, the bootstrap binary it was started with, on a
// loopback port. The emulator starts the function process on the first
// invocation, as Lambda starts a cold instance, and passes it its own
// environment. Freeze and Thaw stop and resume the function process between
// invocations, as Lambda freezes an instance once an invocation returns.
// Methods may be called from multiple goroutines.
type RIE struct {
	dir       string
	addr      string
	bootstrap string
	run       *child
	out       *fullLog
}

// StartRIE starts aws-lambda-rie for bootstrap (an executable path) with env
// added to a minimal environment (PATH, HOME, TMPDIR) (AWS_LAMBDA_FUNCTION_TIMEOUT and the
// function's settings), its invocation endpoint and Runtime API on
// loopback ports, and waits until it listens on both. It is stopped (its
// function process thawed and ended with it) when the test finishes.
//
// The invocation endpoint binds port 0, and the port is read from the
// emulator's listening sockets. The Runtime API cannot: the emulator hands
// the function the address it was given, so port 0 would reach the
// function as "127.0.0.1:0". Its port is chosen free here, and when the
// emulator exits because another process took it meanwhile, it is started
// again on another one.
//
// The `aws-lambda-rie` command is looked up on PATH; `make tools` installs
// it into .tools/bin (a pinned `go install`) and `make test` puts that on
// PATH. A missing command fails the test.
func StartRIE(tb testing.TB, bootstrap string, env map[string]string) *RIE {
	tb.Helper()
	bin, err := exec.LookPath("aws-lambda-rie")
	if err != nil {
		tb.Fatalf("emulators: aws-lambda-rie not found on PATH: %v; run `make tools` in the repository root (it installs aws-lambda-rie into .tools/bin), and put .tools/bin on PATH (`make test` does)", err)
	}
	if bootstrap, err = filepath.Abs(bootstrap); err != nil {
		tb.Fatal(err)
	}
	r := &RIE{bootstrap: bootstrap, dir: tb.TempDir()}
	// Only what a process needs to run: the caller's other variables
	// (gateway settings, AWS credentials) must not reach the function.
	var cmdEnv []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "PATH", "HOME", "TMPDIR", "GORACE", "GOCOVERDIR":
			cmdEnv = append(cmdEnv, kv)
		}
	}
	for k, v := range env {
		cmdEnv = append(cmdEnv, k+"="+v)
	}
	tb.Cleanup(r.stop)
	deadline := time.Now().Add(rieReadyTimeout)
	for {
		ports, err := freePorts(1)
		if err != nil {
			tb.Fatalf("emulators: pick a Runtime API port: %v", err)
		}
		rapi := ports[0]
		r.out = &fullLog{}
		c, err := spawn([]string{bin,
			"--runtime-interface-emulator-address", "127.0.0.1:0",
			"--runtime-api-address", net.JoinHostPort("127.0.0.1", strconv.Itoa(rapi)),
			bootstrap}, cmdEnv, true, r.dir, r.out)
		if err != nil {
			tb.Fatalf("emulators: start aws-lambda-rie: %v", err)
		}
		r.run = c
		// It listens on the Runtime API port and its invocation port.
		ports, err = c.awaitListen(deadline, func(ports []int) (bool, error) {
			if len(ports) > 2 {
				return false, fmt.Errorf("listens on %v; want the Runtime API port %d and one more", ports, rapi)
			}
			return len(ports) == 2 && slices.Contains(ports, rapi), nil
		})
		switch {
		case err == nil:
			invoke := ports[0]
			if invoke == rapi {
				invoke = ports[1]
			}
			r.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(invoke))
			return r
		case errors.Is(err, errBindConflict) && time.Now().Before(deadline):
			continue
		}
		tb.Fatalf("emulators: aws-lambda-rie (Runtime API port %d): %v\n%s", rapi, err, r.Log())
	}
}

// Dir is the function's working directory (Lambda's is /var/task, read-only).
func (r *RIE) Dir() string { return r.dir }

// InvokeURL is the emulator's invocation endpoint.
func (r *RIE) InvokeURL() string {
	return "http://" + r.addr + "/2015-03-31/functions/function/invocations"
}

// Invoke sends one event and returns what the function answered (or what
// the emulator reported instead, such as "Task timed out").
func (r *RIE) Invoke(ctx context.Context, event []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.InvokeURL(), bytes.NewReader(event))
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("invoke: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("invoke: read the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return b, fmt.Errorf("invoke: emulator answered %s: %s", resp.Status, b)
	}
	return b, nil
}

// FunctionPID returns the pid of the function process: the emulator's child
// running the bootstrap binary. It fails before the first invocation.
func (r *RIE) FunctionPID() (int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(r.run.cmd.Process.Pid) {
			continue
		}
		if exe, err := os.Readlink("/proc/" + e.Name() + "/exe"); err == nil && exe == r.bootstrap {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no process of %s is a child of aws-lambda-rie (pid %d)", r.bootstrap, r.run.cmd.Process.Pid)
}

// Freeze stops the function process (SIGSTOP), as Lambda freezes an
// instance between invocations: nothing it left running makes progress.
func (r *RIE) Freeze() error { return r.signal(syscall.SIGSTOP) }

// Thaw resumes the function process (SIGCONT) before the next invocation.
func (r *RIE) Thaw() error { return r.signal(syscall.SIGCONT) }

func (r *RIE) signal(sig syscall.Signal) error {
	pid, err := r.FunctionPID()
	if err != nil {
		return err
	}
	return syscall.Kill(pid, sig)
}

// Log returns everything the emulator and the function wrote.
func (r *RIE) Log() string { return r.out.String() }

// Stop ends the emulator and its function process now, rather than when
// the test finishes (a benchmark that starts one emulator per iteration).
// Stopping again does nothing.
func (r *RIE) Stop() { r.stop() }

// stop thaws the function process, then ends the emulator (SIGTERM, SIGKILL
// after a grace period) and the function process with it.
func (r *RIE) stop() {
	if r.run == nil {
		return // never started
	}
	pid, _ := r.FunctionPID()
	if pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	r.run.stop(processStopGrace)
	if pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGKILL) // the emulator may leave it behind
	}
	r.run = nil
}

// fullLog keeps a process's output, up to rieLogLimit bytes.
type fullLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *fullLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := rieLogLimit - l.buf.Len(); room > 0 {
		l.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (l *fullLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

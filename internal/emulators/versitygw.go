package emulators

import (
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// The root credentials and region every Versitygw started here serves.
const (
	// VersitygwAccessKey is the root user's access key id.
	VersitygwAccessKey = "gatewaytest"
	// VersitygwSecretKey is the root user's secret access key.
	VersitygwSecretKey = "gatewaytest-secret"
	// VersitygwRegion is the region the server signs and checks with.
	VersitygwRegion = "us-east-1"
)

// versitygwReadyTimeout bounds the wait for versitygw to listen.
const versitygwReadyTimeout = 3 * time.Minute // liveness only: an exit ends the wait at once; room for a loaded 2-core machine

// Versitygw is a running (or stopped) versitygw, an S3-compatible server,
// on a loopback port chosen at start. Its posix backend keeps buckets as
// directories of a test temporary directory, so data survives Stop and
// Start. Requests are signed with VersitygwAccessKey and VersitygwSecretKey
// in VersitygwRegion, and buckets are addressed path-style. Methods may be
// called from multiple goroutines, but Start and Stop are meant for the
// test goroutine.
type Versitygw struct {
	p *process
	// access and secret are the root key it serves (Rekey changes them);
	// guarded by p.mu, which start holds while it builds the command.
	access, secret string
}

// StartVersitygw starts versitygw with its posix backend on a loopback port
// it picks itself (port 0) and waits until it listens there. It is stopped when the test
// and its subtests finish.
//
// The `versitygw` command is looked up on PATH; `make tools` installs it
// into .tools/bin (a pinned `go install`) and `make test` puts that on
// PATH. A missing command fails the test.
func StartVersitygw(tb testing.TB) *Versitygw {
	tb.Helper()
	bin, err := exec.LookPath("versitygw")
	if err != nil {
		tb.Fatalf("emulators: versitygw not found on PATH: %v; run `make tools` in the repository root (it installs versitygw into .tools/bin), and put .tools/bin on PATH (`make test` does)", err)
	}
	dir := tb.TempDir()
	v := &Versitygw{access: VersitygwAccessKey, secret: VersitygwSecretKey}
	v.p = &process{
		name: "versitygw",
		// Port 0 binds a free port; versitygw's banner prints the port it
		// was given, not the one bound, so start reads it from the
		// process's listening socket.
		command: func(port int) (argv, env []string) {
			return []string{bin,
				"--port", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
				"--access", v.access,
				"--secret", v.secret,
				"--region", VersitygwRegion,
				"--quiet",
				"posix", dir,
			}, nil
		},
		dir:   dir,
		ready: versitygwReadyTimeout,
	}
	v.p.start(tb)
	return v
}

// Start starts versitygw again on the same port and data after Stop and
// waits until it listens; while another process holds the port, it retries
// until the port is free or the start times out. It does nothing when it is running. The process
// is stopped when tb finishes, so pass the test that should outlive it.
func (v *Versitygw) Start(tb testing.TB) {
	tb.Helper()
	v.p.start(tb)
}

// Rekey stops versitygw and starts it again on the same port and data with
// the root key access and secret instead of the one it served: every URL
// presigned with the old key is refused from then on (403), as when an
// access key is deleted or a role's session token expires. The process is
// stopped when tb finishes.
func (v *Versitygw) Rekey(tb testing.TB, access, secret string) {
	tb.Helper()
	v.p.stop()
	v.p.mu.Lock()
	v.access, v.secret = access, secret
	v.p.mu.Unlock()
	v.p.start(tb)
}

// Stop stops versitygw (SIGTERM, then SIGKILL after a grace period) and
// waits for it to exit; its port then refuses connections until Start.
func (v *Versitygw) Stop() { v.p.stop() }

// Endpoint is the S3 endpoint URL, "http://127.0.0.1:<port>".
func (v *Versitygw) Endpoint() string {
	return "http://" + v.p.addr
}

// Log returns the tail of versitygw's output, for failure messages.
func (v *Versitygw) Log() string { return v.p.output() }

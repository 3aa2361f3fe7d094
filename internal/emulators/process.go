package emulators

import (
	"net"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// process is an emulator run as a plain process that serves on one
// loopback address. Ready means that address accepts connections. Its
// methods may be called from multiple goroutines.
type process struct {
	name  string   // for messages
	argv  []string // command and arguments
	env   []string // added to the test process's environment
	dir   string   // working directory
	addr  string   // host:port it serves on
	ready time.Duration

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	log  *logTail
}

// processStopGrace is how long stop waits after SIGTERM before SIGKILL.
const processStopGrace = 5 * time.Second

// start runs the process and waits until addr accepts connections, the
// process exits, or p.ready passes; the last two fail tb. The process is
// stopped when tb finishes (registered before readiness is checked).
// It does nothing when the process is running.
func (p *process) start(tb testing.TB) {
	tb.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return
	}
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Dir = p.dir
	cmd.Env = append(cmd.Environ(), p.env...)
	log := newLogTail()
	cmd.Stdout = log
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		tb.Fatalf("emulators: start %s (%s): %v", p.name, p.argv[0], err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	p.cmd, p.done, p.log = cmd, done, log
	// stop is idempotent, so a stop/start cycle may register it twice.
	tb.Cleanup(p.stop)

	deadline := time.Now().Add(p.ready)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		conn, err := net.DialTimeout("tcp", p.addr, 200*time.Millisecond)
		if err == nil {
			_ = conn.Close()
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("emulators: %s not listening on %s after %v: %v\n%s", p.name, p.addr, p.ready, err, log.String())
		}
		select {
		case <-done:
			tb.Fatalf("emulators: %s exited before listening on %s:\n%s", p.name, p.addr, log.String())
		case <-tick.C:
		}
	}
}

// stop sends SIGTERM, then SIGKILL after a grace period, and waits for the
// process to exit. It does nothing when the process is not running.
func (p *process) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(processStopGrace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	p.cmd, p.done = nil, nil
}

// output returns the tail of the process's output, for failure messages.
func (p *process) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.log == nil {
		return ""
	}
	return p.log.String()
}

package emulators

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// process is an emulator run as a plain process that serves on one
// loopback port. Ready means the process itself holds a listening socket
// on that port (see listeningPorts), not merely that the port accepts. Its
// methods may be called from multiple goroutines.
type process struct {
	name string   // for messages
	argv []string // command and arguments, when command is nil
	env  []string // added to the test process's environment, when command is nil
	// command, when set, gives the command line and environment that serve
	// on port; port 0 asks the process to pick one, and the first start
	// reads back which it picked (the only port it listens on).
	command func(port int) (argv, env []string)
	dir     string // working directory
	addr    string // host:port it serves on; with command, set by the first start
	ready   time.Duration

	mu   sync.Mutex
	run  *child // nil when not running
	port int    // with command: the port picked by the first start

	log atomic.Pointer[logTail] // the current run's output
}

// processStopGrace is how long stop waits after SIGTERM before SIGKILL.
const processStopGrace = 5 * time.Second

// start runs the process and waits until it listens on its port, the
// process exits, or p.ready passes; the last two fail tb. On the first
// start of a process with command, the process binds port 0 and its
// port is read back. A later start reuses that port (clients know it), so
// when the process exits because another process has taken the port, it
// is started again until the port is free or p.ready passes. The process
// is stopped when tb finishes (registered before readiness is checked).
// It does nothing when the process is running.
func (p *process) start(tb testing.TB) {
	tb.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.run != nil {
		return
	}
	// stop is idempotent, so a stop/start cycle may register it twice.
	tb.Cleanup(p.stop)
	port := p.port
	argv, env := p.argv, p.env
	if p.command != nil {
		argv, env = p.command(port)
	} else {
		_, ps, err := net.SplitHostPort(p.addr)
		if err == nil {
			port, err = strconv.Atoi(ps)
		}
		if err != nil || port == 0 {
			tb.Fatalf("emulators: %s: bad address %q", p.name, p.addr)
		}
	}
	deadline := time.Now().Add(p.ready)
	taken := 0 // runs that found the port taken
	for {
		log := newLogTail()
		p.log.Store(log)
		c, err := spawn(argv, env, false, p.dir, log)
		if err != nil {
			tb.Fatalf("emulators: start %s (%s): %v", p.name, argv[0], err)
		}
		p.run = c
		ports, err := c.awaitListen(deadline, func(ports []int) (bool, error) {
			if port != 0 {
				return slices.Contains(ports, port), nil
			}
			if len(ports) > 1 {
				return false, errors.New("listens on several ports; cannot tell which one serves")
			}
			return len(ports) == 1, nil
		})
		switch {
		case err == nil:
			if port == 0 {
				p.port = ports[0]
				p.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port))
			}
			return
		case errors.Is(err, errBindConflict) && time.Now().Before(deadline):
			// Another process holds the port; wait for it to let go.
			taken++
			p.run = nil
			<-time.After(pollEvery)
			continue
		}
		p.stopLocked()
		if taken > 0 {
			err = fmt.Errorf("%w (%d runs found it taken), then: %w", errBindConflict, taken, err)
		}
		tb.Fatalf("emulators: %s (port %d): %v\n%s", p.name, port, err, log.String())
	}
}

// stop sends SIGTERM, then SIGKILL after a grace period, and waits for the
// process to exit. It does nothing when the process is not running.
func (p *process) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopLocked()
}

func (p *process) stopLocked() {
	if p.run == nil {
		return
	}
	p.run.stop(processStopGrace)
	p.run = nil
}

// output returns the tail of the current run's output, for failure
// messages. It does not wait for a start in progress.
func (p *process) output() string {
	if log := p.log.Load(); log != nil {
		return log.String()
	}
	return ""
}

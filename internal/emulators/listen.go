package emulators

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// How an emulator gets its ports. Choosing a free port in the test process
// and handing it to the emulator leaves a gap between the check and the
// emulator's bind, in which a parallel test can take the port; and a dial
// that only sees "something accepts" may then reach that other test's
// process. So each emulator binds port 0 where it can and the port is read
// back (from its log, or from the listening sockets it holds); where it
// cannot, a bind conflict is detected (the process exits saying "address
// already in use") and the start is retried. Readiness is always that the
// emulator's own process holds a listening socket on the port, read from
// /proc, never merely that a dial to the port succeeds.

// pollEvery is how often a start looks at the child's sockets and log.
const pollEvery = 20 * time.Millisecond

// errBindConflict means the emulator exited because its port was taken.
var errBindConflict = errors.New("port already in use")

// outputLog is where a child's output goes: it keeps what failure
// messages quote.
type outputLog interface {
	io.Writer
	String() string
}

// child is one run of an emulator's process.
type child struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	out  outputLog
}

// spawn starts argv in dir with env added to the test process's
// environment (or, with onlyEnv, to nothing), its output going to out.
func spawn(argv, env []string, onlyEnv bool, dir string, out outputLog) (*child, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	if onlyEnv {
		cmd.Env = env
	} else {
		cmd.Env = append(cmd.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, done: make(chan struct{}), out: out}
	go func() {
		_ = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// exited reports whether the child has exited.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, then SIGKILL after grace, and waits for the exit.
func (c *child) stop(grace time.Duration) {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(grace):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// awaitListen polls the TCP ports the child holds listening sockets on
// until accept, given them, reports true, the child exits, or deadline
// passes. accept may return an error to give up (such as an ambiguous set
// of ports). An exit caused by a port already in use is errBindConflict.
func (c *child) awaitListen(deadline time.Time, accept func(ports []int) (bool, error)) ([]int, error) {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		ports, err := listeningPorts(c.cmd.Process.Pid)
		if err == nil {
			ok, aerr := accept(ports)
			if aerr != nil {
				return ports, aerr
			}
			if ok {
				return ports, nil
			}
		}
		if c.exited() {
			if isBindConflict(c.out.String()) {
				return nil, errBindConflict
			}
			return nil, errors.New("exited before listening")
		}
		if time.Now().After(deadline) {
			if err != nil {
				return nil, fmt.Errorf("not listening in time: %w", err)
			}
			return nil, fmt.Errorf("not listening in time (its listening ports: %v)", ports)
		}
		select {
		case <-c.done:
		case <-tick.C:
		}
	}
}

// isBindConflict reports whether output says a listen failed because the
// address was taken: Go's "bind: address already in use", Node's
// "listen EADDRINUSE: address already in use".
func isBindConflict(output string) bool {
	return strings.Contains(output, "address already in use") || strings.Contains(output, "EADDRINUSE")
}

// listeningPorts returns, sorted, the local TCP ports on which process pid
// holds listening sockets: the inodes of its socket descriptors
// (/proc/<pid>/fd) matched against the sockets in LISTEN state of its
// network namespace (/proc/<pid>/net/tcp and tcp6). A port another process
// listens on is never among them.
func listeningPorts(pid int) ([]int, error) {
	base := "/proc/" + strconv.Itoa(pid)
	fds, err := os.ReadDir(base + "/fd")
	if err != nil {
		return nil, fmt.Errorf("list the descriptors of pid %d: %w", pid, err)
	}
	inodes := make(map[string]bool, len(fds))
	for _, fd := range fds {
		link, err := os.Readlink(base + "/fd/" + fd.Name())
		if err != nil {
			continue // closed meanwhile
		}
		if ino, ok := strings.CutPrefix(link, "socket:["); ok {
			inodes[strings.TrimSuffix(ino, "]")] = true
		}
	}
	var ports []int
	for _, table := range []string{"/net/tcp", "/net/tcp6"} {
		data, err := os.ReadFile(base + table)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // no IPv6
			}
			return nil, fmt.Errorf("read %s: %w", table, err)
		}
		ports = append(ports, parseListening(string(data), inodes)...)
	}
	slices.Sort(ports)
	return slices.Compact(ports), nil
}

// tcpListen is the state column's value for LISTEN in /proc/net/tcp.
const tcpListen = "0A"

// parseListening returns the local ports of the rows of a /proc/net/tcp
// table ("sl local_address rem_address st ... uid timeout inode ...") that
// are in LISTEN state and whose inode is in inodes.
func parseListening(table string, inodes map[string]bool) []int {
	var ports []int
	for line := range strings.Lines(table) {
		f := strings.Fields(line)
		if len(f) < 10 || f[3] != tcpListen || !inodes[f[9]] {
			continue
		}
		_, hexPort, ok := strings.Cut(f[1], ":")
		if !ok {
			continue
		}
		port, err := strconv.ParseUint(hexPort, 16, 16)
		if err != nil {
			continue
		}
		ports = append(ports, int(port))
	}
	return ports
}

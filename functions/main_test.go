package main

import (
	"bytes"
	"context"
	"fngateway/internal/settings"
	"net"
	"os"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
)

// TestRunListenAddrInUse: a ListenAddr another process holds ends the
// local host at once with exit code 1 and the listen error, and leaves no
// goroutine behind waiting for a SIGTERM that never comes (synctest.Test
// fails on one).
func TestRunListenAddrInUse(t *testing.T) {
	st := reflect.TypeOf(settings.Settings{})
	for i := range st.NumField() {
		for _, n := range []string{st.Field(i).Name, strings.ToUpper(st.Field(i).Name)} {
			t.Setenv(n, "")
			os.Unsetenv(n)
		}
	}
	for _, n := range []string{"AWS_LAMBDA_RUNTIME_API", "FUNCTIONS_CUSTOMHANDLER_PORT", "OTEL_EXPORTER_OTLP_ENDPOINT",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"} {
		t.Setenv(n, "")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	t.Setenv("Hosts", "http://127.0.0.1:9")
	t.Setenv("ListenAddr", ln.Addr().String())
	for _, async := range []bool{false, true} {
		t.Run(map[bool]string{false: "async off", true: "async on"}[async], func(t *testing.T) {
			if async {
				t.Setenv("AsyncModeEnabled", "true")
				t.Setenv("AsyncStore", "file:"+t.TempDir())
			}
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background() // no SIGTERM, ever
				var stdout, stderr bytes.Buffer
				code := -1
				go func() { code = run(ctx, nil, &stdout, &stderr) }()
				synctest.Wait()
				if code != 1 || !strings.Contains(stderr.String(), "address already in use") {
					t.Fatalf("run with ListenAddr in use: exit code %d, stderr %q; want 1 and the listen error, at once", code, stderr.String())
				}
			})
		})
	}
}

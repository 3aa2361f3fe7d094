package bench

import (
	"archive/zip"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"fngateway/internal/emulators"
)

// BenchmarkColdStart compares the Lambda package's cold start with the floor
// any Go function pays: the gateway's bootstrap, built as make package-aws
// builds it (-tags lambda.norpc,noazure,lambdaonly,grpcnotrace, for this
// machine's architecture), against bench/forwarder, a minimal aws-lambda-go
// function that forwards the request with one http.Client call. Each op is
// a fresh Runtime Interface Emulator and its first invocation (one GET to a
// loopback backend): first-ms is that invocation's round trip, which
// includes starting the process (the emulator starts the function on its
// first invocation); init-ms is the sum of the process's package
// initialisation (GODEBUG=inittrace=1), and init-fastest-ms the sum of each
// package's fastest initialisation over the ops (the figure a load on the
// machine disturbs least); cpu-ms is the CPU time the function process used
// up to its first answer, which a load on the machine does not inflate as
// it does the clock (and which is what a Lambda with a fraction of a core
// waits for); zip-bytes is the size of the deployment zip.
// Medians of the ops. Run alone with `make bench-coldstart`;
// COLDSTART_GATEWAY_TAGS builds the gateway with other tags (lambda.norpc
// alone: both clouds' SDKs, as 46677da built the package; lambda.norpc,noazure
// as the previous round did, with the SDK's default credential chain and
// gRPC's tracing).
func BenchmarkColdStart(b *testing.B) {
	if _, err := exec.LookPath("aws-lambda-rie"); err != nil {
		b.Fatalf("aws-lambda-rie not found on PATH: %v; `make bench-coldstart` installs it into .tools/bin", err)
	}
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, smallBody)
	}))
	b.Cleanup(backend.Close)
	impls := []struct {
		name, pkg, tags string
		env             map[string]string
	}{
		{"gateway", "../../functions", cmp.Or(os.Getenv("COLDSTART_GATEWAY_TAGS"), "lambda.norpc,noazure,lambdaonly,grpcnotrace"), map[string]string{"Hosts": backend.URL}},
		{"forwarder", "../../bench/forwarder", "lambda.norpc", map[string]string{"BACKEND": backend.URL}},
	}
	for _, impl := range impls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			bin := buildBootstrap(b, impl.pkg, impl.tags)
			size := zipSize(b, bin)
			env := map[string]string{"GODEBUG": "inittrace=1", "AWS_LAMBDA_FUNCTION_TIMEOUT": "30"}
			for k, v := range impl.env {
				env[k] = v
			}
			var firsts, inits, cpus []float64
			fastest := map[string]float64{} // each package's fastest initialisation over the ops
			for b.Loop() {
				b.StopTimer()
				rie := emulators.StartRIE(b, bin, env)
				// Stamped now: the gateway's TTL starts at the event's timeEpoch.
				event := functionURLEvent(b)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				b.StartTimer()
				start := time.Now()
				out, err := rie.Invoke(ctx, event)
				first := time.Since(start)
				b.StopTimer()
				cancel()
				var resp struct {
					StatusCode int `json:"statusCode"`
				}
				if err != nil || json.Unmarshal(out, &resp) != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("first invocation: %q, %v; want status 200\n%s", out, err, rie.Log())
				}
				cpu, err := processCPU(rie)
				if err != nil {
					b.Fatal(err)
				}
				rie.Stop()
				sum, n := initSum(rie.Log(), fastest)
				if n == 0 {
					b.Fatalf("no inittrace lines in the emulator's output:\n%s", rie.Log())
				}
				firsts = append(firsts, float64(first.Microseconds())/1000)
				inits = append(inits, sum)
				cpus = append(cpus, cpu)
				b.StartTimer()
			}
			b.ReportMetric(median(firsts), "first-ms")
			b.ReportMetric(median(inits), "init-ms")
			var least float64
			for _, ms := range fastest {
				least += ms
			}
			b.ReportMetric(least, "init-fastest-ms")
			b.ReportMetric(median(cpus), "cpu-ms")
			b.ReportMetric(float64(size), "zip-bytes")
		})
	}
}

// buildBootstrap builds pkg as the Lambda packages are built (static,
// stripped, -trimpath) with tags, for this machine.
func buildBootstrap(tb testing.TB, pkg, tags string) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "bootstrap")
	cmd := exec.Command("go", "build", "-tags", tags, "-trimpath", "-ldflags=-s -w", "-o", bin, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// zipSize is the size of a zip holding bin as bootstrap, compressed as
// make package-aws's zip compresses it (deflate).
func zipSize(tb testing.TB, bin string) int {
	tb.Helper()
	exe, err := os.ReadFile(bin)
	if err != nil {
		tb.Fatal(err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	h := &zip.FileHeader{Name: "bootstrap", Method: zip.Deflate}
	h.SetMode(0o755)
	w, err := zw.CreateHeader(h)
	if err == nil {
		_, err = w.Write(exe)
	}
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		tb.Fatal(err)
	}
	return buf.Len()
}

// functionURLEvent is a Function URL GET /small event, stamped now.
func functionURLEvent(tb testing.TB) []byte {
	tb.Helper()
	raw, err := os.ReadFile("../testdata/lambda/lambda-urls-request.json")
	if err != nil {
		tb.Fatal(err)
	}
	var e map[string]any
	if err := json.Unmarshal(raw, &e); err != nil {
		tb.Fatal(err)
	}
	e["rawPath"], e["rawQueryString"], e["body"], e["isBase64Encoded"] = "/small", "", "", false
	delete(e, "cookies")
	e["headers"] = map[string]any{}
	rc := e["requestContext"].(map[string]any)
	rc["timeEpoch"] = time.Now().UnixMilli()
	h := rc["http"].(map[string]any)
	h["method"], h["path"] = "GET", "/small"
	b, err := json.Marshal(e)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// processCPU is the CPU time, in ms, the threads of rie's function process
// have run: the first field of each /proc/<pid>/task/<tid>/schedstat, in ns
// (https://docs.kernel.org/scheduler/sched-stats.html).
func processCPU(rie *emulators.RIE) (float64, error) {
	pid, err := rie.FunctionPID()
	if err != nil {
		return 0, err
	}
	tasks, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "schedstat"))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("function process %d: no schedstat (%v)", pid, err)
	}
	var ns int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			return 0, err
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return 0, fmt.Errorf("%s: %q", t, b)
		}
		v, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", t, err)
		}
		ns += v
	}
	return float64(ns) / 1e6, nil
}

// initLine is one line of GODEBUG=inittrace=1: "init <package> @<t> ms, <d> ms clock, …".
var initLine = regexp.MustCompile(`(?m)^init (\S+) @\S+ ms, ([0-9.]+) ms clock`)

// initSum adds up the package initialisation times in log, and counts them;
// fastest keeps each package's least time over the logs it has seen.
func initSum(log string, fastest map[string]float64) (ms float64, n int) {
	for _, m := range initLine.FindAllStringSubmatch(log, -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err == nil {
			ms += v
			n++
			if f, ok := fastest[m[1]]; !ok || v < f {
				fastest[m[1]] = v
			}
		}
	}
	return ms, n
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

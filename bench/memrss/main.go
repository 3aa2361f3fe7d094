// Command memrss measures the gateway's peak resident memory (VmHWM) and
// throughput in one scenario, for the GOGC table of docs/performance.md:
//
//	memrss -gateway bin/gateway -scenario stream   # an endless streamed answer read by the client for -for
//	memrss -gateway bin/gateway -scenario uploads  # 40 concurrent 10 MiB uploads to a backend that holds each 1 s
//
// The gateway runs as a process of its own with the environment of memrss
// (so GOGC and GOMEMLIMIT, set or unset, are the caller's) plus Hosts,
// ListenAddr and AsyncStore; the backend and the client run in memrss. It
// prints one line: scenario, GOGC, the gateway's idle and peak RSS in MiB,
// and the throughput (MiB/s through the gateway).
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	gateway := flag.String("gateway", "bin/gateway", "the gateway binary")
	scenario := flag.String("scenario", "stream", "stream or uploads")
	dur := flag.Duration("for", 10*time.Second, "stream, endless: how long the client reads")
	chunkSize := flag.Int("chunk", 32<<10, "stream, endless: the bytes of each write the backend flushes")
	flag.Parse()
	if err := run(*gateway, *scenario, *dur, *chunkSize); err != nil {
		fmt.Fprintln(os.Stderr, "memrss:", err)
		os.Exit(1)
	}
}

func run(gateway, scenario string, dur time.Duration, chunkSize int) error {
	chunk := bytes.Repeat([]byte{'x'}, chunkSize)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/stream", r.URL.Path == "/endless":
			w.Header().Set("Content-Type", "application/octet-stream")
			rc := http.NewResponseController(w)
			for r.Context().Err() == nil {
				if _, err := w.Write(chunk); err != nil {
					return
				}
				rc.Flush()
			}
		case strings.HasPrefix(r.URL.Path, "/upload/"):
			n, _ := io.Copy(io.Discard, r.Body)
			select { // a slow backend: every body is held while it works
			case <-time.After(time.Second):
			case <-r.Context().Done():
				return
			}
			fmt.Fprint(w, n)
		default:
			io.WriteString(w, "ok")
		}
	}))
	defer backend.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	ln.Close()
	store, err := os.MkdirTemp("", "memrss")
	if err != nil {
		return err
	}
	defer os.RemoveAll(store)
	cmd := exec.Command(gateway)
	cmd.Env = append(os.Environ(), "Hosts="+backend.URL, "ListenAddr="+addr, "AsyncStore=file:"+store,
		`Routes=[{"prefix":"/stream","stream":true}]`)
	cmd.Stdout = io.Discard
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	base := "http://" + addr
	for i := 0; ; i++ {
		resp, err := http.Get(base + "/_gateway/health")
		if err == nil {
			resp.Body.Close()
			break
		}
		if i == 200 {
			return fmt.Errorf("the gateway did not start: %v\n%s", err, stderr.Bytes())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if resp, err := http.Get(base + "/warm"); err != nil {
		return err
	} else {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	pid := cmd.Process.Pid
	idle, err := statusKB(pid, "VmHWM")
	if err != nil {
		return err
	}

	var bytesMoved int64
	start := time.Now()
	switch scenario {
	case "stream", "endless":
		path := "/" + scenario
		ctx, cancel := context.WithTimeout(context.Background(), dur)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", base+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		if resp.StatusCode != 200 {
			return fmt.Errorf("stream: %d", resp.StatusCode)
		}
		bytesMoved, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	case "uploads":
		const n, size = 40, 10 << 20
		payload := make([]byte, size)
		client := &http.Client{Timeout: 120 * time.Second, Transport: &http.Transport{MaxConnsPerHost: n, MaxIdleConnsPerHost: n}}
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() {
				resp, err := client.Post(base+"/upload/"+strconv.Itoa(i), "application/octet-stream", bytes.NewReader(payload))
				if err != nil {
					errs <- err
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(body) != strconv.Itoa(size) {
					errs <- fmt.Errorf("upload %d: %d %q", i, resp.StatusCode, body)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			return err
		}
		bytesMoved = n * size
	default:
		return fmt.Errorf("scenario %q: want stream, endless or uploads", scenario)
	}
	took := time.Since(start)
	peak, err := statusKB(pid, "VmHWM")
	if err != nil {
		return err
	}
	gogc, ok := os.LookupEnv("GOGC")
	if !ok {
		gogc = "unset"
	}
	fmt.Printf("%s GOGC=%s idle=%dMiB peak=%dMiB throughput=%.0fMiB/s load=%s\n", scenario, gogc, idle>>10, peak>>10,
		float64(bytesMoved)/(1<<20)/took.Seconds(), loadavg())
	return nil
}

// statusKB reads a field of /proc/<pid>/status, in KiB.
func statusKB(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.Fields(string(b) + " ?")[0]
}

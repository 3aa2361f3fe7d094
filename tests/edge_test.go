package tests

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"fngateway/internal/testutil"
)

// TestSlowUploadsBounded: a buffered upload that trickles past its TTL is
// answered 408 RequestTimeout at the TTL, with the connection closed, while
// thirty other slow uploads do not hold up a normal request.
func TestSlowUploadsBounded(t *testing.T) {
	t.Parallel()
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	}))
	defer backend.Close()
	gw := StartGateway(t, map[string]string{"Hosts": backend.URL})
	addr := strings.TrimPrefix(gw.URL, "http://")

	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stop); wg.Wait() }()
	// The slow uploads' TTL: until it, none is answered, and the normal
	// requests must be answered meanwhile. loadMargin: five requests on a
	// loaded machine (beside another make test, 5 s did not suffice).
	const ttl = loadMargin
	var answered atomic.Int32 // slow uploads answered so far
	// slowUpload sends a 100-byte body one byte every 500 ms (49.5 s in
	// all, past the TTL) and returns the answer and when it came.
	slowUpload := func() (*http.Response, []byte, time.Duration, error) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return nil, nil, 0, err
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(ttl + 2*loadMargin)) // past the latest answer within() accepts
		start := time.Now()
		if _, err := io.WriteString(conn, "POST /upload HTTP/1.1\r\nHost: gw\r\nContent-Length: 100\r\nS7PTTL: "+strconv.Itoa(int(ttl/time.Second))+"\r\n\r\nx"); err != nil {
			return nil, nil, 0, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			testutil.Trickle(conn, 500*time.Millisecond, 99, stop)
		}()
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		answered.Add(1)
		if err != nil {
			return nil, nil, time.Since(start), err
		}
		body, _ := io.ReadAll(resp.Body)
		took := time.Since(start)
		// The server closes the connection after the 408.
		// (EOF, or a reset when the server closed with bytes unread.)
		if _, err := br.ReadByte(); err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
			return resp, body, took, fmt.Errorf("connection still open after the 408 (read: %v)", err)
		}
		return resp, body, took, nil
	}

	type result struct {
		resp *http.Response
		body []byte
		took time.Duration
		err  error
	}
	results := make(chan result, 31)
	for range 31 {
		go func() {
			resp, body, took, err := slowUpload()
			results <- result{resp, body, took, err}
		}()
	}
	// Meanwhile normal requests are answered: not queued behind the slow
	// uploads, which are all still open (their TTL has not run out). How
	// fast they are is BenchmarkLatencyDuringSlowUploads's figure
	// (tests/bench), not a bound here.
	for i := range 5 {
		resp, body, took := Do(t, "GET", gw.URL+"/normal", nil, "")
		if resp.StatusCode != 200 || string(body) != "ok" {
			t.Errorf("normal request %d during 31 slow uploads: %d %q after %v; want 200 ok", i, resp.StatusCode, body, took)
		}
		if n := answered.Load(); n != 0 {
			t.Errorf("normal request %d answered after %v, when %d slow uploads had been answered (at their %v TTL); want it answered while all are open", i, took, n, ttl)
		}
	}
	for range 31 {
		r := <-results
		if r.err != nil {
			t.Errorf("slow upload: %v", r.err)
			continue
		}
		var doc errorDoc
		json.Unmarshal(r.body, &doc)
		if r.resp.StatusCode != 408 || doc.Error.Code != "RequestTimeout" || r.resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("slow upload: %d %s; want 408 RequestTimeout as JSON", r.resp.StatusCode, r.body)
		}
		if !within(r.took, ttl, 50*time.Millisecond, loadMargin) {
			t.Errorf("slow upload answered after %v; want after %v, the TTL", r.took, ttl)
		}
	}
}

// procStatusKB reads a field such as VmHWM (peak resident set) or VmRSS
// of process pid, in KiB.
func procStatusKB(tb testing.TB, pid int, field string) int64 {
	tb.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatalf("reading the gateway's memory: %v", err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				tb.Fatalf("%s line %q: %v", field, line, err)
			}
			return n
		}
	}
	tb.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// TestBufferedBodyBudget: 40 concurrent 10 MiB uploads to a slow backend
// all arrive whole, and the gateway's peak resident memory stays under
// 300 MiB above idle: buffered bodies share the MaxBufferedBytes budget
// (128 MiB) and the rest stream.
func TestBufferedBodyBudget(t *testing.T) {
	t.Parallel()
	const n, size = 40, 10 << 20
	payload := make([]byte, size)
	rand.Read(payload)
	sum := sha256.Sum256(payload)
	want := fmt.Sprintf("%d:%s", size, hex.EncodeToString(sum[:]))
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		got, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		select { // a slow backend: every body is held while it works
		case <-time.After(time.Second):
		case <-r.Context().Done():
			return
		}
		fmt.Fprintf(w, "%d:%s", got, hex.EncodeToString(h.Sum(nil)))
	}))
	defer backend.Close()

	gw := startBinary(t, productionGateway(t), map[string]string{"Hosts": backend.URL, "AsyncStore": "file:" + t.TempDir()})
	pid := gw.cmd.Process.Pid
	if resp, _, _ := Do(t, "GET", gw.URL+"/warm", nil, ""); resp.StatusCode != 200 {
		t.Fatalf("warm-up: %d", resp.StatusCode)
	}
	idle := procStatusKB(t, pid, "VmHWM")

	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxConnsPerHost: n, MaxIdleConnsPerHost: n}}
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(context.Background(), "PUT", gw.URL+"/upload/"+strconv.Itoa(i), bytes.NewReader(payload))
			resp, err := client.Do(req)
			if err != nil {
				errs <- err.Error()
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(body) != want {
				errs <- fmt.Sprintf("upload %d: %d %q; want 200 %s", i, resp.StatusCode, body, want)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	peak := procStatusKB(t, pid, "VmHWM")
	grew := (peak - idle) / 1024
	t.Logf("gateway peak RSS: idle %d MiB, peak %d MiB, grew %d MiB for %d concurrent %d MiB uploads", idle/1024, peak/1024, grew, n, size>>20)
	if grew >= 300 {
		t.Errorf("peak RSS grew by %d MiB; want under 300 MiB", grew)
	}
}

// TestPublicBaseURL: status and result URIs use PublicBaseURL whatever the
// client's Host and X-Forwarded-Host say; without it they use the Host,
// never X-Forwarded-Host. The signed result URL works on the gateway's own
// address once the front door has stripped the base path.
func TestPublicBaseURL(t *testing.T) {
	t.Parallel()
	backend := newSlowBackend(t, time.Second)
	const public = "http://public.example/gw"
	for _, tt := range []struct {
		name, public, wantPrefix string
	}{
		{"with PublicBaseURL", public, public + "/"},
		{"without", "", "http://attacker.example/"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := asyncEnv(backend.URL, t.TempDir())
			if tt.public != "" {
				env["PublicBaseURL"] = tt.public
				env["AsyncInlineResultBytes"] = "1" // answered 303 to its signed URL
			}
			gw := StartGateway(t, env)
			req, _ := http.NewRequestWithContext(context.Background(), "POST", gw.URL+"/reports", strings.NewReader("payload-pub"))
			req.Host = "attacker.example"
			req.Header.Set("X-Forwarded-Host", "evil.example")
			req.Header.Set("S7PAsyncMode", "true")
			req.Header.Set("X-UserProfile", "u1")
			resp, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 202 {
				t.Fatalf("status %d %s; want 202", resp.StatusCode, body)
			}
			var acc acceptedDoc
			if err := json.Unmarshal(body, &acc); err != nil {
				t.Fatal(err)
			}
			for name, u := range map[string]string{"Location": resp.Header.Get("Location"), "x-Data-Blob-URI": resp.Header.Get("X-Data-Blob-Uri"),
				"x-Header-Blob-URI": resp.Header.Get("X-Header-Blob-Uri"), "statusUri": acc.StatusURI, "dataBlobUri": acc.DataBlobURI, "headerBlobUri": acc.HeaderBlobURI} {
				if !strings.HasPrefix(u, tt.wantPrefix) || strings.Contains(u, "evil.example") {
					t.Errorf("%s = %q; want it under %s", name, u, tt.wantPrefix)
				}
			}
			if tt.public == "" {
				return
			}
			// The front door maps <public>/<path> to the gateway's /<path>.
			direct := func(u string) string { return gw.URL + strings.TrimPrefix(u, public) }
			within := time.Second + loadMargin // the backend's delay
			deadline := time.Now().Add(within)
			var loc string
			for loc == "" {
				if time.Now().After(deadline) {
					t.Fatalf("the request did not finish within %v", within)
				}
				resp, _, _ := Do(t, "GET", direct(acc.StatusURI), nil, "")
				switch resp.StatusCode {
				case 303:
					loc = resp.Header.Get("Location")
				case 200, 202:
					time.Sleep(100 * time.Millisecond) // polling a status URI
				default:
					t.Fatalf("status URI: %d", resp.StatusCode)
				}
			}
			if !strings.HasPrefix(loc, public+"/_gateway/blobs/") {
				t.Fatalf("303 Location %q; want a signed URL under %s", loc, public)
			}
			for _, u := range []string{loc, acc.DataBlobURI} {
				resp, data, _ := Do(t, "GET", direct(u), nil, "")
				if resp.StatusCode != 200 || string(data) != "report for /reports: payload-pub" {
					t.Errorf("signed URL %s through the gateway's own address: %d %q", u, resp.StatusCode, data)
				}
			}
		})
	}
}

package tests

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fngateway/internal/testutil"
)

// deadAddr returns the URL of a loopback port that refuses connections.
func deadAddr(tb testing.TB) string {
	tb.Helper()
	return "http://" + testutil.RefusedAddr(tb)
}

// TestTTLCancelsSlowBackend: a 5 s backend under a 1 s TTL. The client gets
// 504 TTLExpired at about 1 s, and the backend sees its request cancelled
// at about 1 s.
func TestTTLCancelsSlowBackend(t *testing.T) {
	t.Parallel()
	cancelled := make(chan time.Time, 1)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(5 * time.Second):
			fmt.Fprint(w, "too late")
		case <-r.Context().Done():
			cancelled <- time.Now()
		}
	}))
	defer backend.Close()
	gw := StartGateway(t, map[string]string{"Hosts": backend.URL, "DefaultTTLSecs": "1"})

	sent := time.Now()
	resp, body, took := Do(t, "GET", gw.URL+"/slow", nil, "")
	if resp.StatusCode != 504 {
		t.Fatalf("status = %d; want 504 (body %s)", resp.StatusCode, body)
	}
	d := decodeError(t, resp, body)
	if d.Error.Code != "TTLExpired" || len(d.Error.Attempts) != 1 || d.Error.Attempts[0].Outcome != "timeout" {
		t.Errorf("error = %+v; want TTLExpired after one timed-out attempt", d.Error)
	}
	// The backend would answer at 5 s (a 200): the 504 shows the TTL cut it.
	if !within(took, time.Second, 50*time.Millisecond, loadMargin) {
		t.Errorf("504 after %v; want after the 1 s TTL", took)
	}
	select {
	case at := <-cancelled:
		// Counted from the client's send, which the TTL's start (the
		// gateway's arrival) follows: the backend's own start comes
		// later still, by however long the gateway took to reach it.
		if c := at.Sub(sent); !within(c, time.Second, 50*time.Millisecond, loadMargin) {
			t.Errorf("backend saw cancellation %v after the request was sent; want after the 1 s TTL", c)
		}
	case <-time.After(loadMargin):
		t.Fatal("the backend never saw its request cancelled")
	}
	if got := resp.Header.Get("X-Attempts"); got != "1" {
		t.Errorf("x-Attempts = %q; want 1", got)
	}
	line := gw.WaitLog(t, loadMargin, func(m map[string]any) bool { return m["msg"] == "request" && m["path"] == "/slow" })
	if line["deadline"] != "ttl" || line["code"] != "TTLExpired" || line["status"] != float64(504) || line["attempts"] != float64(1) {
		t.Errorf("log line = %v; want deadline ttl, code TTLExpired, status 504, attempts 1", line)
	}
}

// TestFailover: the first host refuses connections; the second answers.
func TestFailover(t *testing.T) {
	t.Parallel()
	var seen sync.Map
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store("key", r.Header.Get("Idempotency-Key"))
		seen.Store("xfh", r.Header.Get("X-Forwarded-Host"))
		seen.Store("s7p", r.Header.Get("S7PTTL"))
		seen.Store("timeout", r.Header.Get("X-Envoy-Expected-Rq-Timeout-Ms"))
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "hello %s", body)
	}))
	defer backend.Close()
	gw := StartGateway(t, map[string]string{"Hosts": deadAddr(t) + "," + backend.URL, "Timeout": "4000"})

	resp, body, _ := Do(t, "POST", gw.URL+"/api", map[string]string{"S7PTTL": "10"}, "world")
	if resp.StatusCode != 200 || string(body) != "hello world" {
		t.Fatalf("got %d %q; want 200 \"hello world\"", resp.StatusCode, body)
	}
	if got := resp.Header.Get("X-Attempts"); got != "2" {
		t.Errorf("x-Attempts = %q; want 2", got)
	}
	if k, _ := seen.Load("key"); k == "" {
		t.Error("the backend got no Idempotency-Key")
	}
	if h, _ := seen.Load("xfh"); h != strings.TrimPrefix(gw.URL, "http://") {
		t.Errorf("X-Forwarded-Host = %q; want %q", h, strings.TrimPrefix(gw.URL, "http://"))
	}
	if s, _ := seen.Load("s7p"); s != "" {
		t.Errorf("S7PTTL reached the backend: %q", s)
	}
	ms, _ := seen.Load("timeout")
	if n, err := strconv.Atoi(ms.(string)); err != nil || n <= 3000 || n > 4000 {
		t.Errorf("x-envoy-expected-rq-timeout-ms = %q; want the Timeout's 4000 less the time used", ms)
	}
}

// TestStreamOutlivesTTL: headers come in time, so the body may stream on
// after the TTL.
func TestStreamOutlivesTTL(t *testing.T) {
	t.Parallel()
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		for i := range 6 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(300 * time.Millisecond) // the backend's own pace
		}
	}))
	defer backend.Close()
	gw := StartGateway(t, map[string]string{"Hosts": backend.URL,
		"Routes": `[{"prefix":"/events","ttlSecs":1,"stream":true,"idleTimeoutMs":3000}]`})

	resp, body, took := Do(t, "GET", gw.URL+"/events", nil, "")
	if resp.StatusCode != 200 {
		t.Fatalf("status = %d; want 200", resp.StatusCode)
	}
	if got := strings.Count(string(body), "data: "); got != 6 {
		t.Errorf("events = %d; want 6 (body %q)", got, body)
	}
	if took < 1500*time.Millisecond {
		t.Errorf("stream took %v; the backend needs 1.8 s", took)
	}
}

// TestStreamFlushesChunks: each chunk reaches the client as it is sent,
// not when the response ends.
func TestStreamFlushesChunks(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		fmt.Fprint(w, "first\n")
		w.(http.Flusher).Flush()
		<-release
		fmt.Fprint(w, "second\n")
	}))
	defer backend.Close()
	defer close(release)
	gw := StartGateway(t, map[string]string{"Hosts": backend.URL})
	resp, err := http.Get(gw.URL + "/chunks")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("first line = %q, %v; want it before the response ends", line, err)
	}
}

// TestStreamIdleCut: a stream silent for longer than the route's idle-gap
// limit is aborted: the client sees the transfer break, never a second
// status, and the cut is counted and logged.
func TestStreamIdleCut(t *testing.T) {
	t.Parallel()
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		fmt.Fprint(w, "partial")
		w.(http.Flusher).Flush()
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	}))
	defer backend.Close()
	gw := StartGateway(t, map[string]string{"Hosts": backend.URL,
		"Routes": `[{"prefix":"/gappy","idleTimeoutMs":300}]`})

	start := time.Now()
	resp, err := http.Get(gw.URL + "/gappy")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if resp.StatusCode != 200 || string(body) != "partial" {
		t.Errorf("got %d %q; want 200 \"partial\"", resp.StatusCode, body)
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("read error = %v; want the transfer to break (unexpected EOF)", err)
	}
	if !within(took, 300*time.Millisecond, 50*time.Millisecond, loadMargin) {
		t.Errorf("cut after %v; want after the 300 ms idle timeout", took)
	}
	_, stats, _ := Do(t, "GET", gw.URL+"/_gateway/stats", nil, "")
	if !strings.Contains(string(stats), `"stream_idle_cut":1`) {
		t.Errorf("stats = %s; want stream_idle_cut 1", stats)
	}
	gw.WaitLog(t, loadMargin, func(m map[string]any) bool { return m["code"] == "StreamCut" && m["deadline"] == "idle" })
}

// TestStatusTable walks the table of docs/deadlines.md#status-codes on the real binary.
func TestStatusTable(t *testing.T) {
	t.Parallel()
	var calls sync.Map
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := calls.LoadOrStore(r.URL.Path, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		switch {
		case strings.HasPrefix(r.URL.Path, "/busy"):
			w.Header().Set("X-Backend", "busy")
			w.WriteHeader(503)
			fmt.Fprint(w, "backend busy")
		case strings.HasPrefix(r.URL.Path, "/hang"):
			select {
			case <-time.After(10 * time.Second):
			case <-r.Context().Done():
			}
		default:
			fmt.Fprint(w, "ok")
		}
	}))
	defer backend.Close()
	gw := StartGateway(t, map[string]string{"Hosts": backend.URL + "," + backend.URL, "RetryBackoffMs": "1"})
	dead := StartGateway(t, map[string]string{"Hosts": deadAddr(t)})
	limited := StartGateway(t, map[string]string{"Hosts": backend.URL, "FunctionTimeoutSecs": "2", "FunctionLimitMarginMs": "500"})

	tests := []struct {
		name     string
		base     string
		path     string
		hdr      map[string]string
		status   int
		code     string
		attempts string
	}{
		{"S7PTTL unparseable", gw.URL, "/ok", map[string]string{"S7PTTL": "12abc"}, 400, "InvalidTTL", "0"},
		{"S7PTTL empty", gw.URL, "/ok", map[string]string{"S7PTTL": ""}, 400, "InvalidTTL", "0"},
		{"S7PTTL overflow", gw.URL, "/ok", map[string]string{"S7PTTL": "1e30"}, 400, "InvalidTTL", "0"},
		{"S7PTimeout not positive", gw.URL, "/ok", map[string]string{"S7PTimeout": "0"}, 400, "InvalidTimeout", "0"},
		{"S7PTimeout unparseable", gw.URL, "/ok", map[string]string{"S7PTimeout": "soon"}, 400, "InvalidTimeout", "0"},
		{"TTL over before any attempt", gw.URL, "/ok", map[string]string{"S7PTTL": "0"}, 412, "TTLExpired", "0"},
		{"TTL in the past (ISO)", gw.URL, "/ok", map[string]string{"S7PTTL": "2024-12-31T23:59:59Z"}, 412, "TTLExpired", "0"},
		{"TTL ran out after an attempt", gw.URL, "/hang1", map[string]string{"S7PTTL": "3"}, 504, "TTLExpired", "1"},
		{"attempts exhausted by Timeout", gw.URL, "/hang2", map[string]string{"S7PTimeout": "200"}, 504, "AttemptTimeout", "2"},
		{"last answered 503: passed through", gw.URL, "/busy", nil, 503, "", "2"},
		{"connection level: 502", dead.URL, "/any", nil, 502, "BackendUnavailable", "1"},
		{"execution limit near: 504 FunctionLimit", limited.URL, "/hang3", map[string]string{"S7PTTL": "10"}, 504, "FunctionLimit", "1"},
		{"success, absolute TTL", gw.URL, "/ok", map[string]string{"S7PTTL": fmt.Sprintf("+%d", time.Now().Unix()+60)}, 200, "", "1"},
		{"S7PTTL absolute beyond ten years", gw.URL, "/ok", map[string]string{"S7PTTL": "+99999999999"}, 400, "InvalidTTL", "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body, _ := Do(t, "GET", tt.base+tt.path, tt.hdr, "")
			if resp.StatusCode != tt.status {
				t.Fatalf("status = %d; want %d (body %s)", resp.StatusCode, tt.status, body)
			}
			if got := resp.Header.Get("X-Attempts"); got != tt.attempts {
				t.Errorf("x-Attempts = %q; want %q", got, tt.attempts)
			}
			if tt.code == "" {
				if resp.Header.Get("X-Gateway-Error") != "" {
					t.Errorf("a passed-through answer carries x-Gateway-Error %q", resp.Header.Get("X-Gateway-Error"))
				}
				return
			}
			d := decodeError(t, resp, body)
			if d.Error.Code != tt.code || d.Error.Message == "" {
				t.Errorf("error = %+v; want code %s and a message", d.Error, tt.code)
			}
		})
	}
	// The passed-through 503 kept the backend's headers and body.
	resp, body, _ := Do(t, "GET", gw.URL+"/busy2", nil, "")
	if resp.Header.Get("X-Backend") != "busy" || string(body) != "backend busy" {
		t.Errorf("passed-through 503 lost the backend's headers or body: %v %q", resp.Header, body)
	}
	// Of the requests to /ok, only the one with a valid, live TTL reached
	// the backend: rejected and expired ones never do.
	if n, ok := calls.Load("/ok"); !ok || n.(*atomic.Int64).Load() != 1 {
		var got int64
		if ok {
			got = n.(*atomic.Int64).Load()
		}
		t.Errorf("backend calls for /ok = %d; want 1", got)
	}
}

// TestBadSettingStopsStartup: a setting that does not parse stops the
// process with one line naming it, its value and what is expected.
func TestBadSettingStopsStartup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  []string
		want string
	}{
		{"missing Hosts", nil, "setting Hosts="},
		{"bad Timeout", []string{"Hosts=http://a:1", "Timeout=abc"}, `setting Timeout="abc": want a positive whole number of milliseconds`},
		{"negative TTL", []string{"Hosts=http://a:1", "DefaultTTLSecs=-3"}, `setting DefaultTTLSecs="-3"`},
		{"bad Routes", []string{"Hosts=http://a:1", `Routes=[{"prefix":"/a","timeout":1}]`}, "setting Routes="},
		{"budgets that cannot nest", []string{"Hosts=http://a:1", "FunctionTimeoutSecs=10", "Timeout=60000"}, "setting Timeout=\"60000\": want at most 9000 ms"},
		{"bad host", []string{"Hosts=backend:80"}, "setting Hosts="},
		{"azure store without an account", []string{"Hosts=http://a:1", "AsyncModeEnabled=true", "AsyncStore=azure"}, "setting AzureWebJobsStorage="},
		{"unknown store", []string{"Hosts=http://a:1", "AsyncStore=redis://x"}, "setting AsyncStore=\"redis://x\""},
		{"bad profiles", []string{"Hosts=http://a:1", "UserProfiles=[{\"userId\":\"\"}]"}, "setting UserProfiles="},
		{"both spellings disagree", []string{"Hosts=http://a:1", "HOSTS=http://b:1"}, "setting Hosts="},
		{"zero MaxContinuations", []string{"Hosts=http://a:1", "MaxContinuations=0"}, `setting MaxContinuations="0": want a positive whole number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(binary)
			cmd.Env = append(baseEnv(), tt.env...)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() == 0 {
				t.Fatalf("exit = %v; want a non-zero exit (output %q)", err, out)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tt.want) {
				t.Errorf("output = %q; want one line containing %q", out, tt.want)
			}
		})
	}
}

func TestHealth(t *testing.T) {
	t.Parallel()
	gw := StartGateway(t, map[string]string{"Hosts": deadAddr(t)})
	resp, body, _ := Do(t, "GET", gw.URL+"/_gateway/health", nil, "")
	if resp.StatusCode != 200 || !strings.Contains(string(body), "ok") {
		t.Errorf("health = %d %s; want 200 ok", resp.StatusCode, body)
	}
}

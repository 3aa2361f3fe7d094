package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestAsyncDeclined: a request that asked for async (S7PAsyncMode: true)
// and is served in line says why, in x-Async-Declined and its log line's
// asyncDeclined (docs/async-api.md#when-a-request-goes-async); one that did not ask says nothing.
func TestAsyncDeclined(t *testing.T) {
	t.Parallel()
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Async-Declined", "from-the-backend") // never passed for the gateway's
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(backend.Close)
	env := asyncEnv(backend.URL, t.TempDir())
	env["Routes"] = `[{"prefix":"/inline","async":false}]`
	on := StartGateway(t, env)
	off := StartGateway(t, map[string]string{"Hosts": backend.URL, "UserProfiles": asyncProfile})
	tests := []struct {
		name string
		gw   *Gateway
		path string
		hdr  map[string]string
		want string
	}{
		{"async off globally", off, "/x", map[string]string{"S7PAsyncMode": "true", "X-UserProfile": "u1"}, "async-disabled"},
		{"no profile", on, "/x", map[string]string{"S7PAsyncMode": "true"}, "profile-missing"},
		{"unknown profile", on, "/x", map[string]string{"S7PAsyncMode": "true", "X-UserProfile": "nobody"}, "profile-unknown"},
		{"profile's async off", on, "/x", map[string]string{"S7PAsyncMode": "true", "X-UserProfile": "sync-only"}, "profile-async-off"},
		{"route's async off", on, "/inline/x", map[string]string{"S7PAsyncMode": "true", "X-UserProfile": "u1"}, "route-async-off"},
		{"did not ask", on, "/x", map[string]string{"X-UserProfile": "nobody"}, ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := fmt.Sprintf("%s/%d", tt.path, i)
			resp, body, _ := Do(t, "GET", tt.gw.URL+path, tt.hdr, "")
			if resp.StatusCode != 200 || string(body) != "ok" {
				t.Fatalf("answer = %d %q; want the backend's 200 in line", resp.StatusCode, body)
			}
			want := tt.want
			if want == "" {
				want = "from-the-backend" // the gateway adds nothing
			}
			if got := resp.Header.Values("X-Async-Declined"); len(got) != 1 || got[0] != want {
				t.Errorf("x-Async-Declined = %q; want %q", got, want)
			}
			line := tt.gw.WaitLog(t, loadMargin, func(m map[string]any) bool { return m["msg"] == "request" && m["path"] == path })
			if got, _ := line["asyncDeclined"].(string); got != tt.want {
				t.Errorf("log line asyncDeclined = %q; want %q (line %v)", got, tt.want, line)
			}
		})
	}
}

// TestOwnEndpointLogLines: every request the gateway answers itself
// (/_gateway/: health, stats, status and operation URIs, result reads)
// has its log line, at GatewayEndpointLogLevel: debug silences them.
func TestOwnEndpointLogLines(t *testing.T) {
	t.Parallel()
	backend := newSlowBackend(t, 3*time.Second) // seconds past AsyncTriggerTimeout (300 ms)
	env := asyncEnv(backend.URL, t.TempDir())
	gw := StartGateway(t, env)
	_, acc, _ := submitAsync(t, gw.URL, "/r/own", nil)
	if _, _, err := waitResultErr(t, acc.StatusURI); err != nil {
		t.Fatal(err)
	}
	paths := []struct {
		url, path string
		status    int
	}{
		{gw.URL + "/_gateway/health", "/_gateway/health", 200},
		{gw.URL + "/_gateway/stats", "/_gateway/stats", 200},
		{gw.URL + "/_gateway/nope", "/_gateway/nope", 404},
		{acc.StatusURI, "/_gateway/async/" + acc.ID, 201},
		{acc.OperationURI, "/_gateway/async/" + acc.ID + "/operation", 200},
		{acc.DataBlobURI, strings.SplitN(strings.TrimPrefix(acc.DataBlobURI, gw.URL), "?", 2)[0], 200},
		{gw.URL + "/_gateway/async/0123456789abcdef0123456789abcdef", "/_gateway/async/0123456789abcdef0123456789abcdef", 404},
	}
	for _, p := range paths {
		resp, _, _ := Do(t, "GET", p.url, nil, "")
		if resp.StatusCode != p.status {
			t.Fatalf("GET %s = %d; want %d", p.url, resp.StatusCode, p.status)
		}
		line := gw.WaitLog(t, loadMargin, func(m map[string]any) bool {
			return m["msg"] == "request" && m["path"] == p.path && m["status"] == float64(p.status)
		})
		if line["level"] != "INFO" || line["route"] != "/_gateway/" || line["durationMs"] == nil {
			t.Errorf("log line of %s = %v; want INFO, route /_gateway/, status %d, durationMs", p.path, line, p.status)
		}
	}

	env["GatewayEndpointLogLevel"] = "debug"
	quiet := StartGateway(t, env)
	Do(t, "GET", quiet.URL+"/_gateway/stats", nil, "")
	Do(t, "GET", quiet.URL+"/x", nil, "") // a proxied request still logs: its line ends the wait
	quiet.WaitLog(t, loadMargin, func(m map[string]any) bool { return m["msg"] == "request" && m["path"] == "/x" })
	for _, m := range quiet.Logs() {
		if m["path"] == "/_gateway/stats" {
			t.Errorf("GatewayEndpointLogLevel=debug still logged %v", m)
		}
	}
}

// waitResultErr waits for the result of the async request at statusURI.
func waitResultErr(tb testing.TB, statusURI string) (*http.Response, []byte, error) {
	tb.Helper()
	resp, body, _ := waitResult(tb, statusURI, 3*time.Second+loadMargin)
	if resp.StatusCode == 202 {
		return resp, body, fmt.Errorf("still pending: %s", body)
	}
	return resp, body, nil
}

// TestAsyncEndLogLine: when an async request ends, in whichever
// invocation that is, one line says so with its id, final state, status,
// code and attempts; an attempt a DELETE cut is recorded as cancelled.
func TestAsyncEndLogLine(t *testing.T) {
	t.Parallel()
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body) // so that the server sees the connection close
		if strings.HasPrefix(r.URL.Path, "/hang") {
			<-r.Context().Done()
			return
		}
		time.Sleep(3 * time.Second) // seconds past AsyncTriggerTimeout (300 ms): the request goes async
		w.WriteHeader(500)
		fmt.Fprint(w, "broke")
	}))
	t.Cleanup(backend.Close)
	gw := StartGateway(t, asyncEnv(backend.URL, t.TempDir()))

	_, failed, _ := submitAsync(t, gw.URL, "/fail", nil)
	line := gw.WaitLog(t, 3*time.Second+loadMargin, func(m map[string]any) bool {
		return m["msg"] == "async request ended" && m["async"] == failed.ID
	})
	if line["state"] != "failed" || line["status"] != float64(500) || line["code"] != "" || line["attempts"] != float64(1) || line["level"] != "WARN" {
		t.Errorf("end line = %v; want failed, 500, no code, 1 attempt, WARN", line)
	}

	_, hung, _ := submitAsync(t, gw.URL, "/hang", nil)
	resp, body, _ := Do(t, "DELETE", hung.StatusURI, nil, "")
	if resp.StatusCode != 202 && resp.StatusCode != 200 {
		t.Fatalf("DELETE = %d %s", resp.StatusCode, body)
	}
	line = gw.WaitLog(t, loadMargin, func(m map[string]any) bool {
		return m["msg"] == "async request ended" && m["async"] == hung.ID
	})
	if line["state"] != "canceled" || line["status"] != float64(409) || line["code"] != "Canceled" || line["attempts"] != float64(1) {
		t.Errorf("end line = %v; want canceled, 409 Canceled, 1 attempt", line)
	}
	res, data, _ := waitResult(t, hung.StatusURI, loadMargin)
	d := decodeError(t, res, data)
	if res.StatusCode != 409 || len(d.Error.Attempts) != 1 || d.Error.Attempts[0].Outcome != "cancelled" {
		t.Errorf("result = %d %s; want 409 with one cancelled attempt", res.StatusCode, data)
	}
	n := 0
	for _, m := range gw.Logs() {
		if m["msg"] == "async request ended" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d end lines; want one per request (2)", n)
	}
}

// TestStartupSaysWhy: a start-up that fails names the setting and the
// limit it crossed, and leaves nothing behind (no .gateway-data).
func TestStartupSaysWhy(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Close() })
	tests := []struct {
		name string
		env  []string
		want string
	}{
		{"port in use", []string{"Hosts=http://a:1", "AsyncModeEnabled=true", "ListenAddr=" + busy.Addr().String()},
			`setting ListenAddr="` + busy.Addr().String() + `": listen tcp ` + busy.Addr().String() + `: bind: address already in use`},
		{"misspelt profile key", []string{"Hosts=http://a:1", "AsyncModeEnabled=true", `UserProfiles=[{"userId":"u1","asyncConfig":{"enabled":true}}]`},
			`setting UserProfiles=`},
		{"topic the store refuses", []string{"Hosts=http://a:1", "AsyncModeEnabled=true", `UserProfiles=[{"userId":"u1","async-config":{"enabled":true,"topic":"bad/topic"}}]`},
			`bad/topic`},
		{"TTL beyond ten years", []string{"Hosts=http://a:1", "DefaultTTLSecs=400000000"}, `want at most ten years (315360000 s)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			// A gateway that starts when it should not would serve until
			// killed: give it the load margin, then fail.
			ctx, cancel := context.WithTimeout(context.Background(), loadMargin)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary)
			cmd.Dir = dir
			cmd.Env = append(baseEnv(), append([]string{"ListenAddr=127.0.0.1:0"}, tt.env...)...)
			out, err := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("the gateway started; want it to stop at start-up (output %q)", out)
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() == 0 {
				t.Fatalf("exit = %v; want a non-zero exit (output %q)", err, out)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tt.want) {
				t.Errorf("output = %q; want one line containing %q", out, tt.want)
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Errorf("the failed start left %v behind", left)
			}
		})
	}
}

// TestTTLCapNamed: an S7PTTL more than ten years ahead is refused with a
// message naming that cap, not one asking for the form it already has.
func TestTTLCapNamed(t *testing.T) {
	t.Parallel()
	gw := StartGateway(t, map[string]string{"Hosts": deadAddr(t)})
	resp, body, _ := Do(t, "GET", gw.URL+"/x", map[string]string{"S7PTTL": "400000000"}, "")
	var doc struct {
		Error struct{ Code, Message string }
	}
	json.Unmarshal(body, &doc)
	if resp.StatusCode != 400 || doc.Error.Code != "InvalidTTL" || !strings.Contains(doc.Error.Message, "ten years") || strings.Contains(doc.Error.Message, "300 or 2.5") {
		t.Errorf("answer = %d %s; want 400 InvalidTTL naming the ten-year cap", resp.StatusCode, body)
	}
}

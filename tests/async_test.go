package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fngateway/core/async"
	"fngateway/infra/filestore"
)

const asyncProfile = `[{"userId":"u1","async-config":{"enabled":true,"containername":"u1-results","topic":"u1-status"}},` +
	`{"userId":"sync-only","async-config":{"enabled":false}}]`

// slowBackend answers after delay with a body naming the request's
// Idempotency-Key; it counts calls per key.
type slowBackend struct {
	*httptest.Server
	mu    sync.Mutex
	calls map[string]int
	total atomic.Int64
	// cancelled counts requests the backend saw cancelled (their
	// connection closed) before it answered.
	cancelled atomic.Int64
}

func newSlowBackend(tb testing.TB, delay time.Duration) *slowBackend {
	return newHeldBackend(tb, delay, nil)
}

// newHeldBackend is newSlowBackend whose requests first wait for hold
// (nil: no wait), given the request and its number among the backend's
// calls (from 1); one that returns false is not answered (its connection
// closed first). The delay runs after the hold.
func newHeldBackend(tb testing.TB, delay time.Duration, hold func(r *http.Request, call int64) bool) *slowBackend {
	b := &slowBackend{calls: map[string]int{}}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		b.mu.Lock()
		b.calls[key]++
		b.mu.Unlock()
		call := b.total.Add(1)
		body, _ := io.ReadAll(r.Body)
		if hold != nil && !hold(r, call) {
			b.cancelled.Add(1)
			return
		}
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			b.cancelled.Add(1)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("X-Report", "yes")
		w.WriteHeader(201)
		fmt.Fprintf(w, "report for %s: %s", r.URL.Path, body)
	}))
	tb.Cleanup(b.Server.Close)
	return b
}

// releases holds backend requests, by path, until the test releases
// them: a backend that answers only once the test holds the 202 for that
// request orders the two events instead of racing its delay against
// AsyncTriggerTimeout on a loaded machine.
type releases struct {
	mu sync.Mutex
	ch map[string]chan struct{}
}

func (g *releases) of(path string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ch == nil {
		g.ch = map[string]chan struct{}{}
	}
	c, ok := g.ch[path]
	if !ok {
		c = make(chan struct{})
		g.ch[path] = c
	}
	return c
}

// release lets the requests for path (held now or later) go on.
func (g *releases) release(path string) { close(g.of(path)) }

// hold is a newHeldBackend hold: it waits for the release of the
// request's path, or for its connection to close (false).
func (g *releases) hold(r *http.Request, _ int64) bool {
	select {
	case <-g.of(r.URL.Path):
		return true
	case <-r.Context().Done():
		return false
	}
}

// hangFirst is a newHeldBackend hold: the backend's first call waits until
// its connection closes and is not answered; later calls go on.
func hangFirst(r *http.Request, call int64) bool {
	if call == 1 {
		<-r.Context().Done()
		return false
	}
	return true
}

type acceptedDoc struct {
	ID            string `json:"id"`
	Status        string `json:"status"`
	StatusURI     string `json:"statusUri"`
	OperationURI  string `json:"operationUri"`
	DataBlobURI   string `json:"dataBlobUri"`
	HeaderBlobURI string `json:"headerBlobUri"`
}

func asyncEnv(hosts, dir string) map[string]string {
	return map[string]string{
		"Hosts":               hosts,
		"AsyncModeEnabled":    "true",
		"AsyncTriggerTimeout": "300",
		"UserProfiles":        asyncProfile,
		"AsyncStore":          "file:" + dir,
	}
}

func submitAsync(tb testing.TB, gwURL, path string, hdr map[string]string) (*http.Response, acceptedDoc, time.Duration) {
	tb.Helper()
	h := map[string]string{"S7PAsyncMode": "true", "X-UserProfile": "u1"}
	for k, v := range hdr {
		h[k] = v
	}
	resp, body, took := Do(tb, "POST", gwURL+path, h, "payload-123")
	if resp.StatusCode != 202 {
		tb.Fatalf("status = %d; want 202 (body %s)", resp.StatusCode, body)
	}
	var acc acceptedDoc
	if err := json.Unmarshal(body, &acc); err != nil {
		tb.Fatalf("202 body %q: %v", body, err)
	}
	return resp, acc, took
}

// waitDone polls the status URI until it answers 303 (a result larger than
// AsyncInlineResultBytes), checking the pending answers on the way, and
// returns the 303's Location.
func waitDone(tb testing.TB, statusURI string, within time.Duration) (string, []string) {
	tb.Helper()
	resp, body, states := waitResult(tb, statusURI, within)
	if resp.StatusCode != http.StatusSeeOther {
		tb.Fatalf("status URI answered %d %s once done; want 303", resp.StatusCode, body)
	}
	return resp.Header.Get("Location"), states
}

// waitResult polls the status URI until it stops answering 202, checking
// the pending answers on the way (Retry-After, Location itself, x-Attempts),
// and returns the final answer: the result itself, or a 303.
func waitResult(tb testing.TB, statusURI string, within time.Duration) (*http.Response, []byte, []string) {
	tb.Helper()
	var states []string
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		resp, body, _ := Do(tb, "GET", statusURI, nil, "")
		if resp.Header.Get("X-Attempts") == "" {
			tb.Errorf("status URI answer %d without x-Attempts", resp.StatusCode)
		}
		switch resp.StatusCode {
		case 202:
			var st struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			}
			if err := json.Unmarshal(body, &st); err != nil {
				tb.Fatalf("status body %q: %v", body, err)
			}
			if resp.Header.Get("Retry-After") == "" {
				tb.Errorf("pending status without Retry-After")
			}
			if loc := resp.Header.Get("Location"); loc != statusURI {
				tb.Errorf("pending status Location = %q; want itself, %q", loc, statusURI)
			}
			if len(states) == 0 || states[len(states)-1] != st.Status {
				states = append(states, st.Status)
			}
		default:
			return resp, body, states
		}
		time.Sleep(50 * time.Millisecond) // polling, as a client would
	}
	tb.Fatalf("not done within %v (states %v)", within, states)
	return nil, nil, nil
}

type headerBlob struct {
	Status      int                 `json:"status"`
	Headers     map[string][]string `json:"headers"`
	ID          string              `json:"id"`
	CompletedAt string              `json:"completedAt"`
	Attempts    []map[string]any    `json:"attempts"`
}

func countFiles(tb testing.TB, dir, suffix string) int {
	tb.Helper()
	n := 0
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && strings.HasSuffix(p, suffix) {
			n++
		}
		return nil
	})
	return n
}

// TestAsyncEmbedded runs the whole async flow on the local host with the
// embedded store: 202 after the trigger, status polling, 303, the blobs,
// signed URLs that refuse tampering, notifications. How soon after the
// trigger the 202 comes is BenchmarkAsyncHandoff's figure (tests/bench),
// not a bound here: a loaded machine stretches it.
func TestAsyncEmbedded(t *testing.T) {
	t.Parallel()
	// The backend holds the work until the test has the 202: the trigger
	// cannot lose a race to the backend's answer on a loaded machine.
	var held releases
	be := newHeldBackend(t, 1500*time.Millisecond, held.hold)
	dir := t.TempDir()
	gw := StartGateway(t, asyncEnv(be.URL, dir))

	resp, acc, took := submitAsync(t, gw.URL, "/reports/q3", nil)
	held.release("/reports/q3") // it answers 1.5 s later: the status URI says pending meanwhile
	const trigger = 300 * time.Millisecond
	if took < trigger || took > trigger+loadMargin {
		t.Errorf("202 after %v; want after the %v trigger (and well before the backend's 1.5 s answer plus %v)", took, trigger, loadMargin)
	}
	if acc.Status != "Accepted" || len(acc.ID) < 32 {
		t.Errorf("202 body = %+v", acc)
	}
	reqID := resp.Header.Get("X-Request-Id") // the submission's, carried by its notifications
	if reqID == "" {
		t.Error("the 202 carries no X-Request-Id")
	}
	for name, want := range map[string]string{"Location": acc.StatusURI, "X-Data-Blob-Uri": acc.DataBlobURI, "X-Header-Blob-Uri": acc.HeaderBlobURI} {
		if got := resp.Header.Get(name); got == "" || got != want {
			t.Errorf("%s = %q; want %q (as in the body)", name, got, want)
		}
	}
	if resp.Header.Get("Retry-After") == "" {
		t.Error("202 without Retry-After")
	}
	if !strings.HasPrefix(acc.StatusURI, gw.URL+"/") {
		t.Errorf("statusUri %q is not on the gateway %s", acc.StatusURI, gw.URL)
	}

	resp, data, states := waitResult(t, acc.StatusURI, 1500*time.Millisecond+loadMargin) // the backend's delay
	if len(states) == 0 {
		t.Error("the status URI never reported a pending state")
	}
	// The status URI answers the result itself: the backend's status,
	// headers and body.
	if resp.StatusCode != 201 || string(data) != "report for /reports/q3: payload-123" ||
		resp.Header.Get("X-Report") != "yes" || resp.Header.Get("Content-Type") != "text/plain" || resp.Header.Get("X-Attempts") != "1" {
		t.Errorf("status URI once done = %d %v %q; want the backend's 201 with its headers and x-Attempts 1", resp.StatusCode, resp.Header, data)
	}
	resp, data, _ = Do(t, "GET", acc.DataBlobURI, nil, "")
	if resp.StatusCode != 200 || string(data) != "report for /reports/q3: payload-123" {
		t.Errorf("data blob = %d %q", resp.StatusCode, data)
	}
	resp, hb, _ := Do(t, "GET", acc.HeaderBlobURI, nil, "")
	var h headerBlob
	if resp.StatusCode != 200 || json.Unmarshal(hb, &h) != nil {
		t.Fatalf("header blob = %d %q", resp.StatusCode, hb)
	}
	if h.Status != 201 || h.ID != acc.ID || h.CompletedAt == "" || len(h.Attempts) != 1 {
		t.Errorf("header blob = %+v", h)
	}
	if got := http.Header(h.Headers).Get("X-Report"); got != "yes" {
		t.Errorf("header blob headers = %v; want X-Report: yes", h.Headers)
	}
	if got := be.total.Load(); got != 1 {
		t.Errorf("backend calls = %d; want 1 (the in-flight attempt finishes the work)", got)
	}
	if n := countFiles(t, dir, "headers.json"); n != 1 {
		t.Errorf("header blobs on disk = %d; want 1", n)
	}

	t.Run("tampered or misused URLs are refused", func(t *testing.T) {
		u, _ := url.Parse(acc.DataBlobURI)
		q := u.Query()
		sig := q.Get("sig")
		for i := range sig {
			c := byte('A')
			if sig[i] == 'A' {
				c = 'B'
			}
			q.Set("sig", sig[:i]+string(c)+sig[i+1:])
			u.RawQuery = q.Encode()
			if resp, _, _ := Do(t, "GET", u.String(), nil, ""); resp.StatusCode != 403 {
				t.Fatalf("signature changed at %d: %d; want 403", i, resp.StatusCode)
			}
		}
		// The data URL's signature on the header blob's path.
		hu, _ := url.Parse(acc.HeaderBlobURI)
		hu.RawQuery = u.Query().Encode()
		hq := hu.Query()
		hq.Set("sig", sig)
		hu.RawQuery = hq.Encode()
		if resp, _, _ := Do(t, "GET", hu.String(), nil, ""); resp.StatusCode != 403 {
			t.Errorf("a signature used for another blob: %d; want 403", resp.StatusCode)
		}
		// Writing through a read URL.
		if resp, _, _ := Do(t, "PUT", acc.DataBlobURI, nil, "overwrite"); resp.StatusCode != 405 && resp.StatusCode != 403 {
			t.Errorf("PUT on a read URL: %d; want 403 or 405", resp.StatusCode)
		}
		// The expiry is signed: moving it, into the past or further away,
		// invalidates the URL.
		for _, se := range []string{"1", "99999999999"} {
			q := u.Query()
			q.Set("sig", sig)
			q.Set("se", se)
			u.RawQuery = q.Encode()
			if resp, _, _ := Do(t, "GET", u.String(), nil, ""); resp.StatusCode != 403 {
				t.Errorf("expiry changed to %s: %d; want 403", se, resp.StatusCode)
			}
		}
	})

	t.Run("unknown id is 404", func(t *testing.T) {
		resp, _, _ := Do(t, "GET", gw.URL+"/_gateway/async/0123456789abcdef0123456789abcdef", nil, "")
		if resp.StatusCode != 404 {
			t.Errorf("unknown id: %d; want 404", resp.StatusCode)
		}
		resp, _, _ = Do(t, "GET", gw.URL+"/_gateway/async/..%2f..%2fetc", nil, "")
		if resp.StatusCode != 404 {
			t.Errorf("malformed id: %d; want 404", resp.StatusCode)
		}
	})

	t.Run("notifications", func(t *testing.T) {
		f, err := os.Open(filepath.Join(dir, "topics", "u1-status.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var got []string
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// Decoded into a map: the field names must match exactly.
			var n map[string]string
			if err := json.Unmarshal(sc.Bytes(), &n); err != nil {
				t.Fatalf("notification %q: %v", sc.Text(), err)
			}
			if len(n) != 5 || n["Timestamp"] == "" || n["topicName"] != "u1-status" || n["requestId"] != reqID {
				t.Errorf("notification %q: want exactly RequestGuid, Status, Timestamp, topicName and requestId %q (the submission's X-Request-Id)", sc.Text(), reqID)
			}
			if n["RequestGuid"] == acc.ID {
				got = append(got, n["Status"])
			}
		}
		if len(got) == 0 || got[0] != "Queued" || got[len(got)-1] != "AsyncProcessed" {
			t.Errorf("notifications = %v; want Queued … AsyncProcessed", got)
		}
	})
}

// expiryTTL is the AsyncTTLSecs of the expiry tests: the result must be
// written and read back before it runs out (the backend answers once the
// test has the 202), and the tests wait it out (twice, with the read
// grace).
const expiryTTL = 5 * time.Second

// TestAsyncURLExpires: result URLs live as long as the request
// (AsyncTTLSecs from arrival); after that the gateway refuses them.
func TestAsyncURLExpires(t *testing.T) {
	t.Parallel()
	var held releases
	be := newHeldBackend(t, 0, held.hold)
	env := asyncEnv(be.URL, t.TempDir())
	env["AsyncTTLSecs"] = strconv.Itoa(int(expiryTTL.Seconds()))
	gw := StartGateway(t, env)
	_, acc, _ := submitAsync(t, gw.URL, "/short", nil)
	held.release("/short")
	waitResult(t, acc.StatusURI, loadMargin)
	resp, data, _ := Do(t, "GET", acc.DataBlobURI, nil, "")
	if resp.StatusCode != 200 || string(data) != "report for /short: payload-123" {
		t.Fatalf("data URL before expiry = %d %q", resp.StatusCode, data)
	}
	u, _ := url.Parse(acc.DataBlobURI)
	se, err := strconv.ParseInt(u.Query().Get("se"), 10, 64)
	if err != nil {
		t.Fatalf("data URL %q has no expiry: %v", acc.DataBlobURI, err)
	}
	if d := time.Until(time.Unix(se, 0)); d > expiryTTL+time.Second {
		t.Fatalf("data URL expires in %v; want within AsyncTTLSecs=%v of arrival", d, expiryTTL)
	}
	time.Sleep(time.Until(time.Unix(se, 0)) + 50*time.Millisecond) // until the URL's own expiry
	resp, body, _ := Do(t, "GET", acc.DataBlobURI, nil, "")
	if resp.StatusCode != 403 {
		t.Fatalf("data URL after expiry = %d %s; want 403", resp.StatusCode, body)
	}
	if d := decodeError(t, resp, body); d.Error.Code != "URLExpired" {
		t.Errorf("code = %q; want URLExpired", d.Error.Code)
	}
}

// TestAsyncAnswersInLine: an async-eligible request answered before the
// trigger is answered normally; a request not eligible at all three levels
// is never 202.
func TestAsyncAnswersInLine(t *testing.T) {
	t.Parallel()
	fast := newSlowBackend(t, 10*time.Millisecond)
	slow := newSlowBackend(t, 800*time.Millisecond)
	// A trigger far beyond the fast backend's answer, however loaded the
	// machine: the answer comes first by a margin, not by a race.
	env := asyncEnv(fast.URL, t.TempDir())
	env["AsyncTriggerTimeout"] = strconv.FormatInt(loadMargin.Milliseconds(), 10)
	gw := StartGateway(t, env)
	resp, body, _ := Do(t, "POST", gw.URL+"/x", map[string]string{"S7PAsyncMode": "true", "X-UserProfile": "u1"}, "p")
	if resp.StatusCode != 201 || !strings.Contains(string(body), "report for /x") {
		t.Errorf("fast async-eligible request = %d %q; want the answer in line", resp.StatusCode, body)
	}
	gw2 := StartGateway(t, asyncEnv(slow.URL, t.TempDir()))
	for name, hdr := range map[string]map[string]string{
		"no S7PAsyncMode":       {"X-UserProfile": "u1"},
		"profile without async": {"S7PAsyncMode": "true", "X-UserProfile": "sync-only"},
		"no profile":            {"S7PAsyncMode": "true"},
		"S7PAsyncMode not true": {"S7PAsyncMode": "yes", "X-UserProfile": "u1"},
		"unknown profile":       {"S7PAsyncMode": "true", "X-UserProfile": "nobody"},
	} {
		resp, _, _ := Do(t, "POST", gw2.URL+"/y", hdr, "p")
		if resp.StatusCode != 201 {
			t.Errorf("%s: status %d; want 201 in line", name, resp.StatusCode)
		}
	}
}

// TestAsyncIdempotentSubmission: the same Idempotency-Key with the same
// request returns the same async request without reaching the backend
// again, before and after it is done; the key reused for a different
// request (body, path, method, query) is 422 IdempotencyKeyReused and
// reaches no backend either.
func TestAsyncIdempotentSubmission(t *testing.T) {
	t.Parallel()
	// The backend holds the work until the test releases it, after the
	// resubmissions that must find it pending.
	var held releases
	be := newHeldBackend(t, 0, held.hold)
	gw := StartGateway(t, asyncEnv(be.URL, t.TempDir()))
	key := map[string]string{"Idempotency-Key": "order-77"}
	_, first, _ := submitAsync(t, gw.URL, "/job", key)
	// The attempt starts at the arrival, but on a loaded machine it may
	// reach the backend after the 202.
	waitFor(t, loadMargin, "the first attempt at the backend", func() bool { return be.total.Load() >= 1 })
	if got := be.total.Load(); got != 1 {
		t.Fatalf("backend calls after the first submission = %d; want 1", got)
	}
	_, second, took := submitAsync(t, gw.URL, "/job", key)
	if first != second {
		t.Errorf("resubmission = %+v; want the first 202's %+v", second, first)
	}
	if took > loadMargin {
		t.Errorf("resubmission answered after %v; want it answered (from the index; the backend calls below show it)", took)
	}
	if got := be.total.Load(); got != 1 {
		t.Errorf("backend calls after the resubmission = %d; want still 1", got)
	}

	reused := []struct {
		name, method, path, body string
	}{
		{"another body", "POST", "/job", "other-payload"},
		{"another path", "POST", "/other-job", "payload-123"},
		{"another query", "POST", "/job?x=1", "payload-123"},
		{"another method", "PUT", "/job", "payload-123"},
	}
	for _, tt := range reused {
		t.Run(tt.name, func(t *testing.T) {
			resp, body, _ := Do(t, tt.method, gw.URL+tt.path,
				map[string]string{"S7PAsyncMode": "true", "X-UserProfile": "u1", "Idempotency-Key": "order-77"}, tt.body)
			if resp.StatusCode != 422 {
				t.Fatalf("status = %d; want 422 (body %s)", resp.StatusCode, body)
			}
			if d := decodeError(t, resp, body); d.Error.Code != "IdempotencyKeyReused" {
				t.Errorf("code = %q; want IdempotencyKeyReused", d.Error.Code)
			}
			if strings.Contains(string(body), first.ID) || resp.Header.Get("Location") != "" || resp.Header.Get("X-Data-Blob-Uri") != "" {
				t.Errorf("the 422 leaks the first request: %v %s", resp.Header, body)
			}
		})
	}
	if got := be.total.Load(); got != 1 {
		t.Errorf("backend calls after the reused keys = %d; want still 1", got)
	}

	if resp, _, _ := Do(t, "GET", first.StatusURI, nil, ""); resp.StatusCode != 202 {
		t.Errorf("status before the backend's release = %d; want 202, the resubmissions above saw it pending", resp.StatusCode)
	}
	held.release("/job")
	waitResult(t, first.StatusURI, loadMargin)
	_, third, _ := submitAsync(t, gw.URL, "/job", key)
	if third != first {
		t.Errorf("resubmission once done = %+v; want %+v", third, first)
	}
	if got := be.total.Load(); got != 1 {
		t.Errorf("backend calls at the end = %d; want 1", got)
	}
}

// TestAsyncSurvivesSIGKILL: the gateway is killed mid-continuation; a new
// process on the same store finishes it, and exactly one result exists.
func TestAsyncSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	// The first call (the in-flight attempt) hangs until its connection
	// closes, so the kill always finds the work unfinished; the resend
	// answers.
	be := newHeldBackend(t, 0, hangFirst)
	dir := t.TempDir()
	env := asyncEnv(be.URL, dir)
	// One attempt's window outlasts the wait before the kill.
	env["AsyncTimeout"] = strconv.FormatInt((2 * loadMargin).Milliseconds(), 10)
	env["FunctionLimitMarginMs"] = "500"
	gw := StartGateway(t, env)
	_, acc, _ := submitAsync(t, gw.URL, "/crash", map[string]string{"Idempotency-Key": "crash-key"})
	// Wait until the in-flight attempt is at the backend, then kill. It
	// starts at the arrival, but may reach the backend after the 202.
	waitFor(t, loadMargin, "the in-flight attempt at the backend", func() bool { return be.total.Load() >= 1 })
	if resp, body, _ := Do(t, "GET", acc.StatusURI, nil, ""); resp.StatusCode != 202 {
		t.Fatalf("status before the kill = %d %s; want 202, the attempt is held", resp.StatusCode, body)
	}
	gw.Kill()
	if be.total.Load() != 1 {
		t.Fatalf("backend calls before the kill = %d; want 1", be.total.Load())
	}

	gw2 := StartGateway(t, env)
	status := strings.Replace(acc.StatusURI, gw.URL, gw2.URL, 1)
	// The killed claim and its delayed message outlive the kill by at most
	// one lease; a message received while the claim still lives comes back
	// when it ends, rounded up to a whole second (what queues take); then
	// one attempt, which the backend answers at once.
	within := async.DefaultLease + time.Second + loadMargin
	resp, data, _ := waitResult(t, status, within)
	if resp.StatusCode != 201 || string(data) != "report for /crash: payload-123" {
		t.Errorf("result = %d %q", resp.StatusCode, data)
	}
	if n := countFiles(t, dir, "headers.json"); n != 1 {
		t.Errorf("header blobs = %d; want exactly 1", n)
	}
	be.mu.Lock()
	defer be.mu.Unlock()
	if be.calls["crash-key"] < 2 {
		t.Errorf("calls with the client's key = %d; want the resend to carry the same Idempotency-Key", be.calls["crash-key"])
	}
}

// deleteOnce sends one DELETE to a status URI and reads the answer; err is
// the transport's (the process killed under it).
func deleteOnce(status string) (int, []byte, error) {
	req, err := http.NewRequest("DELETE", status, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// TestAsyncStatusExpires: once the request's expiry plus its read grace
// (here AsyncTTLSecs=expiryTTL, so a grace of as long) has passed, the status URI answers
// 410 Expired, a JSON error, and no longer points at the result.
func TestAsyncStatusExpires(t *testing.T) {
	t.Parallel()
	var held releases
	be := newHeldBackend(t, 0, held.hold)
	env := asyncEnv(be.URL, t.TempDir())
	env["AsyncTTLSecs"] = strconv.Itoa(int(expiryTTL.Seconds()))
	gw := StartGateway(t, env)
	sent := time.Now()
	_, acc, _ := submitAsync(t, gw.URL, "/short", nil)
	held.release("/short")
	if resp, body, _ := waitResult(t, acc.StatusURI, loadMargin); resp.StatusCode != 201 {
		t.Fatalf("status URI once done = %d %s; want the backend's 201 before the expiry", resp.StatusCode, body)
	}
	// The read ends at twice the TTL after arrival (the grace is the TTL
	// when shorter than 5 min). A poll sent 3 s after that (for the
	// gateway's clock) must be 410; when it is answered, on a loaded
	// machine, does not matter.
	readEnd := 2 * expiryTTL
	deadline := sent.Add(readEnd + 3*time.Second)
	for {
		polled := time.Now()
		resp, body, _ := Do(t, "GET", acc.StatusURI, nil, "")
		if resp.StatusCode == 201 {
			if polled.After(deadline) {
				t.Fatalf("still the result for a poll sent %v after the submission; want 410 after %v", polled.Sub(sent), readEnd)
			}
			time.Sleep(50 * time.Millisecond) // polling, as a client would
			continue
		}
		if at := time.Since(sent); resp.StatusCode != 410 || at < readEnd {
			t.Fatalf("status URI answered %d %s after %v; want the result until %v after arrival, then 410", resp.StatusCode, body, at, readEnd)
		}
		if d := decodeError(t, resp, body); d.Error.Code != "Expired" {
			t.Errorf("code = %q; want Expired", d.Error.Code)
		}
		if loc := resp.Header.Get("Location"); loc != "" {
			t.Errorf("410 with Location %q; want nothing signed", loc)
		}
		break
	}
	// It stays gone, and so does its operation URI.
	if resp, _, _ := Do(t, "GET", acc.StatusURI, nil, ""); resp.StatusCode != 410 {
		t.Errorf("second poll = %d; want 410", resp.StatusCode)
	}
	resp, body, _ := Do(t, "GET", acc.OperationURI, nil, "")
	if resp.StatusCode != 410 || decodeError(t, resp, body).Error.Code != "Expired" {
		t.Errorf("operation URI after the read grace = %d %s; want 410 Expired", resp.StatusCode, body)
	}
}

// TestAsyncCorruptRecord: a record that cannot be decoded is terminal: its
// queue message is settled and logged once, and the status URI answers
// 500 CorruptRecord on every poll instead of 503 forever.
func TestAsyncCorruptRecord(t *testing.T) {
	t.Parallel()
	var held releases
	be := newHeldBackend(t, 0, held.hold)
	dir := t.TempDir()
	env := asyncEnv(be.URL, dir)
	gw := StartGateway(t, env)
	_, acc, _ := submitAsync(t, gw.URL, "/corrupt", nil)
	held.release("/corrupt")
	waitResult(t, acc.StatusURI, loadMargin)
	gw.Kill()

	// While no gateway runs: damage the record and queue a continuation
	// for it, as a redelivery would.
	fs, err := filestore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key := "gateway/records/" + acc.ID + ".json"
	_, version, err := fs.Get(ctx, key)
	if err != nil {
		t.Fatalf("the record: %v", err)
	}
	if _, err := fs.Put(ctx, key, []byte(`{"v":1,"id":"`+acc.ID+`","state":`), version); err != nil {
		t.Fatal(err)
	}
	queued := func() map[string]bool {
		names, _ := filepath.Glob(filepath.Join(dir, "queue", "*.msg"))
		m := map[string]bool{}
		for _, n := range names {
			m[n] = true
		}
		return m
	}
	earlier := queued() // the in-flight claim's delayed message may wait there
	if err := fs.Enqueue(ctx, []byte(`{"v":1,"id":"`+acc.ID+`"}`), 0); err != nil {
		t.Fatal(err)
	}
	var ours string
	for n := range queued() {
		if !earlier[n] {
			ours = n
		}
	}
	if ours == "" {
		t.Fatal("the enqueued message is not in the queue directory")
	}

	gw2 := StartGateway(t, env)
	mentions := func() int {
		n := 0
		for _, l := range gw2.logs.Lines() {
			if strings.Contains(l, acc.ID) && strings.Contains(l, "cannot be decoded") {
				n++
			}
		}
		return n
	}
	gw2.WaitLog(t, loadMargin, func(m map[string]any) bool {
		e, _ := m["err"].(string)
		return strings.Contains(e, acc.ID) && strings.Contains(e, "cannot be decoded")
	})
	deadline := time.Now().Add(loadMargin) // the worker polls every 100 ms
	for queued()[ours] {
		if time.Now().After(deadline) {
			t.Fatalf("the continuation message was not settled within %v", loadMargin)
		}
		time.Sleep(50 * time.Millisecond) // polling with a deadline
	}
	status := strings.Replace(acc.StatusURI, gw.URL, gw2.URL, 1)
	for range 3 {
		resp, body, _ := Do(t, "GET", status, nil, "")
		if resp.StatusCode != 500 {
			t.Fatalf("status URI = %d %s; want 500 CorruptRecord", resp.StatusCode, body)
		}
		if d := decodeError(t, resp, body); d.Error.Code != "CorruptRecord" {
			t.Errorf("code = %q; want CorruptRecord", d.Error.Code)
		}
	}
	if n := mentions(); n != 1 {
		t.Errorf("the corrupt record was logged %d times by the worker; want once", n)
	}
}

// TestAsyncBadSettingsStopStartup: a profile topic the async store cannot
// accept, and a route TTL that rounds to zero, stop the start-up with one
// line naming the setting, instead of losing every notification or
// silently inheriting the default TTL.
func TestAsyncBadSettingsStopStartup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  []string
		want string
	}{
		{"topic the file store refuses", []string{"AsyncModeEnabled=true",
			`UserProfiles=[{"userId":"u1","async-config":{"enabled":true,"topic":"bad/topic"}}]`},
			`setting UserProfiles="profile \"u1\" async-config.topic \"bad/topic\"": want a topic name the async store accepts`},
		{"route ttlSecs rounding to zero", []string{`Routes=[{"prefix":"/a","ttlSecs":1e-10}]`},
			`setting Routes=`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A gateway that accepts the setting would run for ever.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary)
			cmd.Env = append(baseEnv(), "Hosts=http://127.0.0.1:1", "AsyncStore=file:"+t.TempDir(), "ListenAddr=127.0.0.1:0")
			cmd.Env = append(cmd.Env, tt.env...)
			out, err := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("the gateway started with the bad setting and ran for 20 s (output %q)", out)
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() == 0 {
				t.Fatalf("exit = %v; want a non-zero exit (output %q)", err, out)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tt.want) {
				t.Errorf("output = %q; want one line containing %q", out, tt.want)
			}
			if tt.name == "route ttlSecs rounding to zero" && !strings.Contains(lines[0], "rounds to zero") {
				t.Errorf("output = %q; want it to say the ttlSecs rounds to zero", lines[0])
			}
		})
	}
}

// TestAsyncSIGKILLCancelProperty: 30 requests with random backend times,
// about half of them cancelled (DELETE on the status URI) at random points
// before, across and after a SIGKILL at a random moment, the rest left
// alone; a new process on the same store finishes them all. Whatever the
// queue redelivers, every request has exactly one result: the backend's
// answer, or, for a request whose DELETE was accepted while it was pending,
// the cancellation (or the answer that won the race). The seed is logged.
func TestAsyncSIGKILLCancelProperty(t *testing.T) {
	t.Parallel()
	const n = 30
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	// Each request's backend time starts once the test holds its 202: a
	// request answered before AsyncTriggerTimeout would be no 202 at all.
	var held releases
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
		body, _ := io.ReadAll(r.Body)
		if !held.hold(r, 0) {
			return
		}
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(201)
		fmt.Fprintf(w, "report for %s: %s", r.URL.Path, body)
	}))
	t.Cleanup(be.Close)
	dir := t.TempDir()
	env := asyncEnv(be.URL, dir)
	var (
		mu   sync.Mutex
		gwOK = sync.NewCond(&mu)
		gw   = StartGateway(t, env)
		up   = true
	)
	firstURL := gw.URL
	base := func() string { // the running gateway's URL, waiting through its restart
		mu.Lock()
		defer mu.Unlock()
		for !up {
			gwOK.Wait()
		}
		return gw.URL
	}
	type request struct {
		path     string
		acc      acceptedDoc
		cancelAt time.Duration // after the start; zero: never cancelled
		deleted  int           // the DELETE's status: 202 pending, 200 finished
		cutOff   bool          // a DELETE was cut off by the kill, taken or not
	}
	reqs := make([]*request, n)
	for i := range reqs {
		reqs[i] = &request{path: fmt.Sprintf("/prop/%d?ms=%d", i, 300+rng.IntN(2500))}
		if rng.IntN(2) == 0 {
			reqs[i].cancelAt = time.Duration(rng.IntN(4000)) * time.Millisecond
		}
	}
	killAt := time.Duration(800+rng.IntN(1500)) * time.Millisecond
	start := time.Now()
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Go(func() {
			_, r.acc, _ = submitAsync(t, base(), r.path, map[string]string{"Idempotency-Key": fmt.Sprintf("prop-%d", i)})
			path, _, _ := strings.Cut(r.path, "?")
			held.release(path)
		})
	}
	wg.Wait()
	for _, r := range reqs {
		if r.cancelAt == 0 {
			continue
		}
		wg.Go(func() {
			time.Sleep(time.Until(start.Add(r.cancelAt))) // the random point
			// A DELETE the kill cuts off may or may not have been
			// taken: like any client, send it again to the new process
			// (DELETE is idempotent), and accept either ending.
			deadline := time.Now().Add(loadMargin)
			for {
				status := strings.Replace(r.acc.StatusURI, firstURL, base(), 1)
				code, body, err := deleteOnce(status)
				if err != nil && time.Now().Before(deadline) {
					r.cutOff = true
					time.Sleep(10 * time.Millisecond) // the process is being replaced
					continue
				}
				if err != nil {
					t.Errorf("DELETE %s: %v", r.path, err)
					return
				}
				if code != 202 && code != 200 {
					t.Errorf("DELETE %s = %d %s; want 202 or 200", r.path, code, body)
				}
				r.deleted = code
				return
			}
		})
	}
	time.Sleep(time.Until(start.Add(killAt))) // the random kill
	mu.Lock()
	up = false
	gw.Kill()
	mu.Unlock()
	gw2 := StartGateway(t, env)
	mu.Lock()
	gw, up = gw2, true
	gwOK.Broadcast()
	mu.Unlock()
	wg.Wait()
	t.Logf("killed %v after the start; %d requests", killAt, n)

	for _, r := range reqs {
		status := strings.Replace(r.acc.StatusURI, firstURL, gw2.URL, 1)
		resp, body, _ := waitResult(t, status, 90*time.Second)
		path, _, _ := strings.Cut(r.path, "?")
		answered := resp.StatusCode == 201 && string(body) == "report for "+path+": payload-123"
		cancelled := resp.StatusCode == 409 && strings.Contains(string(body), `"code":"Canceled"`)
		switch {
		case (r.deleted == 202 || r.cutOff) && !answered && !cancelled:
			t.Errorf("%s (DELETE accepted or cut off at %v): %d %s; want the cancellation or the answer", r.path, r.cancelAt, resp.StatusCode, body)
		case r.deleted != 202 && !r.cutOff && !answered:
			t.Errorf("%s (DELETE %d at %v): %d %s; want the backend's answer", r.path, r.deleted, r.cancelAt, resp.StatusCode, body)
		}
		if c := countFiles(t, filepath.Join(dir, "objects"), r.acc.ID+"/headers.json"); c != 1 {
			t.Errorf("%s: %d header blobs; want exactly 1", r.path, c)
		}
	}
	if c := countFiles(t, dir, "headers.json"); c != n {
		t.Errorf("header blobs = %d; want %d", c, n)
	}
}

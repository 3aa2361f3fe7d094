package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// writeSettingsDoc replaces the settings document at path in one rename, so
// the gateway's poll never reads half of it.
func writeSettingsDoc(tb testing.TB, path, doc string) {
	tb.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(doc), 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		tb.Fatal(err)
	}
}

// settingsView is GET /_gateway/settings.
type settingsView struct {
	Settings map[string]struct {
		Value  string `json:"value"`
		From   string `json:"from"`
		Reload string `json:"reload"`
	} `json:"settings"`
	Pending map[string]string `json:"pending"`
	Source  *struct {
		Name        string `json:"name"`
		Version     string `json:"version"`
		LastRefresh string `json:"lastRefresh"`
		LastError   string `json:"lastError"`
		Failed      int64  `json:"settings_refresh_failed"`
		Rejected    int64  `json:"settings_rejected"`
	} `json:"source"`
}

func getSettingsView(tb testing.TB, g *Gateway) (settingsView, string) {
	tb.Helper()
	resp, body, _ := Do(tb, "GET", g.URL+"/_gateway/settings", nil, "")
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET /_gateway/settings: %d %s", resp.StatusCode, body)
	}
	var v settingsView
	if err := json.Unmarshal(body, &v); err != nil {
		tb.Fatalf("GET /_gateway/settings: %v\n%s", err, body)
	}
	return v, string(body)
}

// budgetBackend answers its name and the budget the gateway gave the
// attempt (x-envoy-expected-rq-timeout-ms), which the TTL in force bounds.
func budgetBackend(tb testing.TB, name string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s", name, r.Header.Get("X-Envoy-Expected-Rq-Timeout-Ms"))
	}))
	tb.Cleanup(s.Close)
	return s
}

// TestSettingsReloadWarm is issue 31's acceptance: under a steady stream of
// requests the settings source (file:) changes DefaultTTLSecs and Routes;
// no request fails; each request is served wholly by the old settings or
// wholly by the new (the route and the TTL change together); every request
// that starts once the reload is logged has the new ones. A bad document
// then changes nothing and is reported, line by line and in the settings
// view; a COLD change is reported pending and not applied.
func TestSettingsReloadWarm(t *testing.T) {
	t.Parallel()
	a, b := budgetBackend(t, "A"), budgetBackend(t, "B")
	path := filepath.Join(t.TempDir(), "settings.json")
	writeSettingsDoc(t, path, `{"Timeout": 1200000}`)
	const interval = time.Second
	g := StartGateway(t, map[string]string{"Hosts": a.URL, "SettingsSource": "file:" + path,
		"SettingsRefreshSecs": strconv.Itoa(int(interval / time.Second))})

	type result struct {
		start   time.Time
		status  int
		backend string
		budget  int64
		err     error
	}
	var (
		mu      sync.Mutex
		results []result
		stop    = make(chan struct{})
		wg      sync.WaitGroup
	)
	count := func(after time.Time) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, r := range results {
			if r.start.After(after) {
				n++
			}
		}
		return n
	}
	client := &http.Client{Timeout: loadMargin}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r := result{start: time.Now()}
				resp, err := client.Get(g.URL + "/r/x")
				if err == nil {
					var body []byte
					body, err = io.ReadAll(resp.Body)
					resp.Body.Close()
					r.status = resp.StatusCode
					name, ms, _ := strings.Cut(string(body), " ")
					r.backend = name
					r.budget, _ = strconv.ParseInt(ms, 10, 64)
				}
				r.err = err
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
			}
		}()
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	waitCount := func(after time.Time, n int) {
		t.Helper()
		deadline := time.Now().Add(loadMargin)
		for count(after) < n {
			if time.Now().After(deadline) {
				t.Fatalf("only %d requests in %v; want %d", count(after), loadMargin, n)
			}
			time.Sleep(10 * time.Millisecond) // polling the stream's progress, bounded above
		}
	}
	reloadedAfter := func(n int) func(map[string]any) bool {
		return func(m map[string]any) bool { return m["msg"] == "settings reloaded" && len(reloads(g)) >= n }
	}
	waitCount(time.Time{}, 100)

	// The change: a shorter TTL and a route to another backend.
	good := fmt.Sprintf(`{"DefaultTTLSecs": 60, "Routes": [{"prefix": "/r", "hosts": [%q]}]}`, b.URL)
	changeAt := time.Now()
	writeSettingsDoc(t, path, good)
	line := g.WaitLog(t, interval+loadMargin, reloadedAfter(1))
	seenAt := time.Now()
	changed := fmt.Sprint(line["changed"])
	if !strings.Contains(changed, "DefaultTTLSecs") || !strings.Contains(changed, "Routes") || strings.Contains(changed, "Timeout") {
		t.Errorf("reload line %v: changed %s; want DefaultTTLSecs and Routes only", line, changed)
	}
	if v, _ := line["version"].(string); v == "" {
		t.Errorf("reload line %v: no version", line)
	}
	if strings.Contains(fmt.Sprint(line), b.URL) {
		t.Errorf("reload line %v carries a value; want the names only", line)
	}
	waitCount(seenAt, 200)

	// A bad document: refused whole, one line per bad setting.
	writeSettingsDoc(t, path, fmt.Sprintf(`{"DefaultTTLSecs": -5, "Timeout": "soon", "Routes": [{"prefix": "/r", "hosts": [%q]}]}`, a.URL))
	rejected := func(setting string) func(map[string]any) bool {
		return func(m map[string]any) bool {
			return m["msg"] == "settings document rejected; the settings in force stay" && m["setting"] == setting
		}
	}
	ttlLine := g.WaitLog(t, interval+loadMargin, rejected("DefaultTTLSecs"))
	g.WaitLog(t, loadMargin, rejected("Timeout"))
	rejectedAt := time.Now()
	if ttlLine["value"] != "-5" {
		t.Errorf("rejection line %v: want the value -5", ttlLine)
	}
	v, _ := getSettingsView(t, g)
	if v.Source == nil || v.Source.Rejected != 1 || !strings.Contains(v.Source.LastError, "DefaultTTLSecs") {
		t.Errorf("settings view after a bad document: source %+v; want settings_rejected 1 and the error", v.Source)
	}
	if s := v.Settings["DefaultTTLSecs"]; s.Value != "60" || !strings.HasPrefix(s.From, "source ") || s.Reload != "WARM" {
		t.Errorf("DefaultTTLSecs in force after a bad document: %+v; want 60 from the source, WARM", s)
	}
	waitCount(rejectedAt, 100)

	// A COLD change: reported pending, not applied.
	writeSettingsDoc(t, path, strings.Replace(good, `{`, `{"ListenAddr": "127.0.0.1:1", "MaxBufferedBytes": 1048576, `, 1))
	g.WaitLog(t, interval+loadMargin, func(m map[string]any) bool {
		return m["msg"] == "settings need a restart to take effect (COLD); not applied"
	})
	v, _ = getSettingsView(t, g)
	if v.Pending["ListenAddr"] != "127.0.0.1:1" || v.Pending["MaxBufferedBytes"] != "1048576" {
		t.Errorf("pending %v; want ListenAddr and MaxBufferedBytes", v.Pending)
	}
	if s := v.Settings["ListenAddr"]; s.Value != "127.0.0.1:0" || s.From != "environment" || s.Reload != "COLD" {
		t.Errorf("ListenAddr in force %+v; want the environment's, COLD", s)
	}
	if s := v.Settings["DefaultTTLSecs"]; s.Value != "60" {
		t.Errorf("DefaultTTLSecs %+v after a COLD change; want 60 still", s)
	}
	coldAt := time.Now()
	waitCount(coldAt, 50)
	close(stop)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	if len(results) < 400 {
		t.Errorf("%d requests; want hundreds", len(results))
	}
	var old, new int
	for _, r := range results {
		if r.err != nil || r.status != http.StatusOK {
			t.Fatalf("a request started at %s failed across the swaps: status %d, err %v", r.start.Format(time.RFC3339Nano), r.status, r.err)
		}
		isOld := r.backend == "A" && r.budget > 60000
		isNew := r.backend == "B" && r.budget <= 60000 && r.budget > 0
		switch {
		case !isOld && !isNew:
			t.Fatalf("request at %s: backend %s, budget %d ms: half of a swap; want A with the 300 s TTL or B with the 60 s one",
				r.start.Format(time.RFC3339Nano), r.backend, r.budget)
		case isOld && r.start.After(seenAt):
			t.Fatalf("request at %s, after the reload was logged: the old settings (A, %d ms)", r.start.Format(time.RFC3339Nano), r.budget)
		case isNew && r.start.Before(changeAt):
			t.Fatalf("request at %s, before the change: the new settings", r.start.Format(time.RFC3339Nano))
		case isOld:
			old++
		default:
			new++
		}
	}
	t.Logf("%d requests: %d with the old settings, %d with the new; the reload logged %v after the change", len(results), old, new, seenAt.Sub(changeAt))
}

// reloads returns the gateway's "settings reloaded" lines.
func reloads(g *Gateway) []map[string]any {
	var out []map[string]any
	for _, m := range g.Logs() {
		if m["msg"] == "settings reloaded" {
			out = append(out, m)
		}
	}
	return out
}

// TestSettingsViewNoSecret: GET /_gateway/settings shows every setting,
// never the value of one that carries a credential, and neither it nor the
// log quotes one in an error. An unreachable source with
// SettingsSourceOptional=true starts the gateway on the environment's
// settings.
func TestSettingsViewNoSecret(t *testing.T) {
	t.Parallel()
	a := budgetBackend(t, "A")
	const key = "c2VjcmV0LWFjY291bnQta2V5LW5ldmVyLXNob3du"
	const sig = "c2FzLXNpZ25hdHVyZS1uZXZlci1zaG93bg"
	// The settings that carry a credential: the storage connection string,
	// and a settings source whose URL carries a SAS (unreachable here, so
	// its error, which quotes the URL, is in the view too).
	g := StartGateway(t, map[string]string{"Hosts": a.URL,
		"AzureWebJobsStorage":    "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" + key + ";EndpointSuffix=core.windows.net",
		"SettingsSource":         "http://127.0.0.1:1/acct/settings/gateway.json?sv=2022-11-02&sp=r&sig=" + sig,
		"SettingsSourceOptional": "true"})
	v, body := getSettingsView(t, g)
	for _, secret := range []string{key, "AccountKey", sig} {
		if strings.Contains(body, secret) {
			t.Errorf("the settings view shows a secret (%s):\n%s", secret, body)
		}
		for _, l := range g.logs.Lines() {
			if strings.Contains(l, secret) {
				t.Errorf("a log line shows a secret (%s): %s", secret, l)
			}
		}
	}
	if v.Source == nil || v.Source.LastError == "" || v.Source.Failed != 1 {
		t.Errorf("an unreachable optional source: %+v; want its error and settings_refresh_failed 1", v.Source)
	}
	if s := v.Settings["AzureWebJobsStorage"]; s.Value == "" || s.From != "environment" || s.Reload != "COLD" {
		t.Errorf("AzureWebJobsStorage in the view: %+v; want it shown as set, from the environment, COLD", s)
	}
	if s := v.Settings["Hosts"]; s.Value != a.URL || s.From != "environment" || s.Reload != "WARM" {
		t.Errorf("Hosts in the view: %+v; want %s from the environment, WARM", s, a.URL)
	}
	if s := v.Settings["DefaultTTLSecs"]; s.Value != "300" || s.From != "default" {
		t.Errorf("DefaultTTLSecs in the view: %+v; want the default 300", s)
	}
}

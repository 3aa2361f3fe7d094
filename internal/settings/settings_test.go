package settings

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestEverySettingHasAClass: every setting of Settings is WARM or
// COLD, and the table names no setting that does not exist.
func TestEverySettingHasAClass(t *testing.T) {
	names := map[string]bool{SourceSetting: true, RefreshSetting: true, OptionalSetting: true, PrefixSetting: true, LabelSetting: true}
	for _, n := range Names() {
		names[n] = true
		if c, ok := Classes[n]; !ok || (c != Warm && c != Cold) {
			t.Errorf("setting %s has no Reload class: add it to Classes (internal/settings/reload_class.go), Warm if a reload may change it between requests, Cold if it binds the process", n)
		}
	}
	for n := range Classes {
		if !names[n] {
			t.Errorf("Classes names %s, which is no setting", n)
		}
	}
}

func TestParseDocument(t *testing.T) {
	got, err := ParseDocument([]byte(`{"DefaultTTLSecs": 2.5, "AsyncModeEnabled": true, "Hosts": "http://a", "Routes": [{"prefix": "/a"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"DefaultTTLSecs": "2.5", "AsyncModeEnabled": "true", "Hosts": "http://a", "Routes": `[{"prefix": "/a"}]`}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q; want %q", k, got[k], v)
		}
	}
	for doc, wantErr := range map[string]string{
		`[]`:                            "want a JSON object",
		`{"Nope": 1}`:                   `unknown setting "Nope"`,
		`{"Timeout": null}`:             "Timeout: want a value",
		`{"Timeout": 1, "Timeout": 2}`:  "Timeout appears twice",
		`{"Hosts": ["http://a"]}`:       "only Routes and UserProfiles",
		`{"Timeout": {"a": 1}}`:         "not an object",
		`{"SettingsSource": "file:/x"}`: "environment",
		`{"Timeout": 1} {"Timeout": 2}`: "found more after it",
		`{"Timeout": 1`:                 "settings document",
		`{"Timeout": 1}` + strings.Repeat(" ", maxDocument): "at most",
	} {
		if _, err := ParseDocument([]byte(doc)); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("ParseDocument(%.40q): %v; want an error containing %q", doc, err, wantErr)
		}
	}
}

func FuzzParseDocument(f *testing.F) {
	f.Add([]byte(`{"DefaultTTLSecs": 60, "Routes": [{"prefix": "/r"}]}`))
	f.Add([]byte(`{"Hosts": "http://a,http://b", "AsyncModeEnabled": false}`))
	f.Add([]byte(`{"x": null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		vals, err := ParseDocument(b)
		if err != nil {
			return
		}
		for k := range vals {
			if _, ok := Classes[k]; !ok {
				t.Fatalf("accepted unknown setting %q", k)
			}
		}
		// What a document sets is decoded by the start-up's rules, never
		// panicking on hostile text.
		r := &Reloader{Env: func(string) (string, bool) { return "", false }}
		r.Load(vals)
	})
}

// env is an environment for tests.
func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestDecodeAsStartUp: a document's values are held against exactly the
// start-up's rules: every setting that does not parse is reported, and the
// nesting checks (Validate) and memory bounds (CheckMemory) apply.
func TestDecodeAsStartUp(t *testing.T) {
	r := &Reloader{Env: env(map[string]string{"Hosts": "http://a"}), Rules: Rules{HostLimit: 60e9, MemBound: 1 << 20, MemSource: "test"}}
	if _, _, errs := r.Load(map[string]string{"DefaultTTLSecs": "-1", "Timeout": "x"}); len(errs) != 2 {
		t.Errorf("two bad settings: %v; want two errors", errs)
	}
	if _, _, errs := r.Load(map[string]string{"Timeout": "120000"}); len(errs) != 1 || !strings.Contains(errs[0].Error(), "execution limit") {
		t.Errorf("Timeout beyond the host limit: %v; want the start-up's nesting error", errs)
	}
	if _, _, errs := r.Load(map[string]string{"MaxRetryBodyBytes": "2097152"}); len(errs) != 1 || !strings.Contains(errs[0].Error(), "MaxRetryBodyBytes") {
		t.Errorf("MaxRetryBodyBytes beyond the memory: %v; want the start-up's memory error", errs)
	}
	if _, _, errs := r.Load(map[string]string{"Hosts": ""}); len(errs) != 1 || !strings.Contains(errs[0].Error(), "required") {
		t.Errorf("Hosts emptied: %v; want required", errs)
	}
	r.Env = env(map[string]string{"Hosts": "http://a", "HOSTS": "http://b"})
	if _, _, errs := r.Load(nil); len(errs) != 1 || !strings.Contains(errs[0].Error(), "HOSTS is also set") {
		t.Errorf("Hosts and HOSTS differ: %v; want one value", errs)
	}
}

// failing is a source that cannot be read.
type failing struct{}

func (failing) String() string { return "test:failing" }
func (failing) Read(context.Context, string) (*Document, error) {
	return nil, errors.New("connection refused")
}

// TestStartUnreachable: a source that cannot be read stops the start-up,
// naming it, unless SettingsSourceOptional; then the environment's settings
// are in force, the failure logged and counted.
func TestStartUnreachable(t *testing.T) {
	r := &Reloader{Source: failing{}, Env: env(map[string]string{"Hosts": "http://a"})}
	if _, _, err := r.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "SettingsSource") || !strings.Contains(err.Error(), "test:failing") {
		t.Errorf("unreachable source at start-up: %v; want an error naming SettingsSource and the source", err)
	}
	var logs bytes.Buffer
	r = &Reloader{Source: failing{}, Optional: true, Env: env(map[string]string{"Hosts": "http://a"}), Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
	s, _, err := r.Start(context.Background())
	if err != nil || s.Hosts.String() != "http://a" {
		t.Fatalf("optional source: %v, %v; want the environment's settings", s, err)
	}
	if !strings.Contains(logs.String(), "starting on the environment") || r.Counters()["settings_refresh_failed"] != 1 {
		t.Errorf("optional source: log %q, counters %v; want it logged and counted", logs.String(), r.Counters())
	}
	// Later failures keep the settings in force, logged and counted.
	r.Refresh(context.Background())
	if r.Settings() != s || r.Counters()["settings_refresh_failed"] != 2 || r.View().Source.LastError == "" {
		t.Errorf("a failed refresh: counters %v, view %+v; want the settings kept and the failure counted", r.Counters(), r.View().Source)
	}
}

// TestRefreshFile: a document that changes is applied (WARM) or held
// pending (COLD); one that does not parse or validate changes nothing; an
// unchanged file is not read again.
func TestRefreshFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.json")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"DefaultTTLSecs": 10}`)
	var applied []*Settings
	r := &Reloader{Source: &fileSource{path: path}, Env: env(map[string]string{"Hosts": "http://a", "ListenAddr": "127.0.0.1:1"}),
		Apply: func(s *Settings) error { applied = append(applied, s); return nil }}
	s, _, err := r.Start(context.Background())
	if err != nil || s.DefaultTTLSecs.D().Seconds() != 10 {
		t.Fatalf("start: %v, %v", s, err)
	}
	r.Refresh(context.Background())
	if len(applied) != 0 {
		t.Errorf("an unchanged document applied %d times", len(applied))
	}
	write(`{"DefaultTTLSecs": 20, "ListenAddr": "127.0.0.1:2"}`)
	r.Refresh(context.Background())
	if len(applied) != 1 || applied[0].DefaultTTLSecs.D().Seconds() != 20 || applied[0].ListenAddr != "127.0.0.1:1" {
		t.Fatalf("a WARM and a COLD change: applied %v; want the TTL only", applied)
	}
	if v := r.View(); v.Pending["ListenAddr"] != "127.0.0.1:2" || v.Settings["ListenAddr"].Value != "127.0.0.1:1" {
		t.Errorf("view: pending %v, ListenAddr %+v; want the COLD change pending", v.Pending, v.Settings["ListenAddr"])
	}
	write(`{"DefaultTTLSecs": 0}`)
	r.Refresh(context.Background())
	write(`{"DefaultTTLSecs": 30, "Bogus": 1}`)
	r.Refresh(context.Background())
	if len(applied) != 1 || r.Settings().DefaultTTLSecs.D().Seconds() != 20 || r.Counters()["settings_rejected"] != 2 {
		t.Errorf("two bad documents: applied %d, TTL %v, counters %v; want nothing changed, two rejections", len(applied), r.Settings().DefaultTTLSecs.D(), r.Counters())
	}
}

// TestViewNoSecret: the view shows that a secret setting is set, never its
// value, and the source without its secrets.
func TestViewNoSecret(t *testing.T) {
	const secret = "SECRETVALUE"
	r := &Reloader{Env: env(map[string]string{"Hosts": "http://a", "AzureWebJobsStorage": "AccountName=a;AccountKey=" + secret})}
	if _, _, err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.Source = &fileSource{path: "/x"}
	r.pending = map[string]string{"AzureWebJobsStorage": "AccountKey=" + secret}
	var b bytes.Buffer
	for _, v := range []any{r.View()} {
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(strings.TrimSpace(toJSON(t, v)), "\n", ""), " ", ""))
	}
	if strings.Contains(b.String(), secret) {
		t.Errorf("view shows a secret: %s", b.String())
	}
	for spec, hidden := range map[string]string{
		"Endpoint=https://x.azconfig.io;Id=abc;Secret=" + secret:                   secret,
		"https://a.blob.core.windows.net/c/s.json?sv=2020&sig=" + secret:           secret,
		"DefaultEndpointsProtocol=https;AccountName=a;AccountKey=" + secret + ";x": secret,
	} {
		if got := Redact(spec); strings.Contains(got, hidden) {
			t.Errorf("Redact(%q) = %q", spec, got)
		}
	}
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAppConfigAgent reads settings from a stand-in for the AppConfig Agent
// Lambda extension (no emulator of it runs here) that checks the request is
// the documented one: GET on localhost at the extension's port, path
// /applications/<app>/environments/<env>/configurations/<profile>. A body
// whose Configuration-Version is the one in force is not applied again.
func TestAppConfigAgent(t *testing.T) {
	var mu sync.Mutex
	doc, version, reads := `{"DefaultTTLSecs": 60}`, "1", 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		reads++
		if r.Method != http.MethodGet || r.URL.Path != "/applications/gw/environments/prod/configurations/settings" {
			t.Errorf("agent request %s %s; want GET /applications/gw/environments/prod/configurations/settings", r.Method, r.URL.Path)
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		if h, _, _ := strings.Cut(r.Host, ":"); h != "localhost" {
			t.Errorf("agent request to host %q; want localhost", r.Host)
		}
		w.Header().Set("Configuration-Version", version)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, doc)
	}))
	defer srv.Close()
	_, port, _ := strings.Cut(strings.TrimPrefix(srv.URL, "http://"), ":")
	e := env(map[string]string{"Hosts": "http://a", "AWS_APPCONFIG_EXTENSION_HTTP_PORT": port})
	src, err := Open("appconfig:gw/prod/settings", e)
	if err != nil {
		t.Fatal(err)
	}
	var applied []*Settings
	r := &Reloader{Source: src, Env: e, Apply: func(s *Settings) error { applied = append(applied, s); return nil }}
	s, _, err := r.Start(context.Background())
	if err != nil || s.DefaultTTLSecs.D().Seconds() != 60 {
		t.Fatalf("start: %v, %v; want the agent's 60 s TTL", s, err)
	}
	r.Refresh(context.Background())
	if len(applied) != 0 || reads != 2 {
		t.Errorf("an unchanged version: applied %d, reads %d; want none applied, one read per poll", len(applied), reads)
	}
	mu.Lock()
	doc, version = `{"DefaultTTLSecs": 30}`, "2"
	mu.Unlock()
	r.Refresh(context.Background())
	if len(applied) != 1 || applied[0].DefaultTTLSecs.D().Seconds() != 30 || r.View().Source.Version != "2" {
		t.Errorf("version 2: applied %v, view %+v; want the 30 s TTL, version 2", applied, r.View().Source)
	}
	for _, bad := range []string{"appconfig:gw/prod", "appconfig:gw//x", "appconfig:a/b/c/d"} {
		if _, err := Open(bad, e); err == nil {
			t.Errorf("Open(%q): no error", bad)
		}
	}
}

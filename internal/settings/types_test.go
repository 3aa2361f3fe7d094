package settings

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"fngateway/core"
	"fngateway/internal/testutil"
)

func TestDecoders(t *testing.T) {
	tests := []struct {
		name    string
		decode  func(string) error
		in      string
		wantErr string
	}{
		{"Seconds ok", new(Seconds).Decode, "2.5", ""},
		{"Seconds zero", new(Seconds).Decode, "0", "positive number of seconds"},
		{"Seconds junk", new(Seconds).Decode, "5m", "positive number of seconds"},
		{"Seconds empty", new(Seconds).Decode, "", "positive number of seconds"},
		{"Millis ok", new(Millis).Decode, "1200000", ""},
		{"Millis negative", new(Millis).Decode, "-5", "positive whole number of milliseconds"},
		{"Millis decimal", new(Millis).Decode, "1.5", "positive whole number of milliseconds"},
		{"Count ok", new(Count).Decode, "3", ""},
		{"Count zero", new(Count).Decode, "0", "positive whole number"},
		{"Bool ok", new(Bool).Decode, "TRUE", ""},
		{"Bool junk", new(Bool).Decode, "yes", "true or false"},
		{"InvokeMode buffered", new(InvokeMode).Decode, "BUFFERED", ""},
		{"InvokeMode stream", new(InvokeMode).Decode, "RESPONSE_STREAM", ""},
		{"InvokeMode lower case", new(InvokeMode).Decode, "buffered", "BUFFERED or RESPONSE_STREAM"},
		{"Hosts ok", new(core.HostList).Decode, "http://a:1, https://b/x", ""},
		{"Hosts empty", new(core.HostList).Decode, " , ", "one or more"},
		{"Hosts empty element", new(core.HostList).Decode, "http://a:1,,http://b", "no element empty"},
		{"Hosts trailing comma", new(core.HostList).Decode, "http://a:1,", "no element empty"},
		{"Routes prefix under /_gateway/", new(Routes).Decode, `[{"prefix":"/_gateway/x"}]`, "outside /_gateway/"},
		{"Routes prefix /_gateway", new(Routes).Decode, `[{"prefix":"/_gateway"}]`, "outside /_gateway/"},
		{"Routes prefix /_gatewayx is a path of its own", new(Routes).Decode, `[{"prefix":"/_gatewayx"}]`, ""},
		{"Routes prefix with ..", new(Routes).Decode, `[{"prefix":"/a/../b"}]`, "without a .. segment"},
		{"Routes prefix with encoded ..", new(Routes).Decode, `[{"prefix":"/a/%2e%2e/b"}]`, "without a .. segment"},
		{"Routes maxAttempts 100", new(Routes).Decode, `[{"prefix":"/a","maxAttempts":100}]`, ""},
		{"Routes maxAttempts 101", new(Routes).Decode, `[{"prefix":"/a","maxAttempts":101}]`, "from 1 to 100"},
		{"Profiles /dev/zero", new(Profiles).Decode, `file:/dev/zero`, "not a regular file"},
		{"Hosts no scheme", new(core.HostList).Decode, "backend:8080", "http(s)://"},
		{"Hosts ftp", new(core.HostList).Decode, "ftp://a", "http(s)://"},
		{"Hosts userinfo", new(core.HostList).Decode, "http://u:p@a", "http(s)://"},
		{"Routes ok", new(Routes).Decode, `[{"prefix":"/a","timeoutMs":5}]`, ""},
		{"Routes unknown key", new(Routes).Decode, `[{"prefix":"/a","timeout":5}]`, "unknown field"},
		{"Routes duplicate prefix", new(Routes).Decode, `[{"prefix":"/a"},{"prefix":"/a"}]`, "appears twice"},
		{"Routes prefix without slash", new(Routes).Decode, `[{"prefix":"a"}]`, "starting with /"},
		{"Routes zero timeout", new(Routes).Decode, `[{"prefix":"/a","timeoutMs":0}]`, "timeoutMs"},
		{"Routes negative ttl", new(Routes).Decode, `[{"prefix":"/a","ttlSecs":-1}]`, "ttlSecs"},
		{"Routes ttl rounding to zero", new(Routes).Decode, `[{"prefix":"/a","ttlSecs":1e-10}]`, "ttlSecs 1e-10 rounds to zero"},
		{"Routes smallest ttl", new(Routes).Decode, `[{"prefix":"/a","ttlSecs":1e-9}]`, ""},
		{"Routes empty hosts", new(Routes).Decode, `[{"prefix":"/a","hosts":[]}]`, "at least one"},
		{"Routes bad host", new(Routes).Decode, `[{"prefix":"/a","hosts":["nope"]}]`, "hosts"},
		{"Routes not an array", new(Routes).Decode, `{"prefix":"/a"}`, "JSON array"},
		{"LoadBalanceMode latency", new(core.LoadBalance).Decode, "Latency", ""},
		{"LoadBalanceMode junk", new(core.LoadBalance).Decode, "fastest", "priority, latency, roundrobin or random"},
		{"RetryOnStatusCodes ok", new(StatusCodes).Decode, "429, 500,503", ""},
		{"RetryOnStatusCodes 2xx", new(StatusCodes).Decode, "429,200", "status 200: want statuses from 400 to 599"},
		{"RetryOnStatusCodes junk", new(StatusCodes).Decode, "429,,503", "comma-separated HTTP statuses"},
		{"Hosts labelled", new(core.HostList).Decode, "primary=http://a:1,http://b", ""},
		{"Hosts bad label", new(core.HostList).Decode, "pri mary=http://a:1", "host label"},
		{"Routes balancing keys", new(Routes).Decode, `[{"prefix":"/a","loadBalance":"roundrobin","retryOn":[500,503],"stripPrefix":true,"hosts":["x=http://a"]}]`, ""},
		{"Routes loadBalance junk", new(Routes).Decode, `[{"prefix":"/a","loadBalance":"fast"}]`, "loadBalance \"fast\": want priority"},
		{"Routes retryOn 204", new(Routes).Decode, `[{"prefix":"/a","retryOn":[204]}]`, "retryOn: status 204"},
		{"Routes retryOn empty", new(Routes).Decode, `[{"prefix":"/a","retryOn":[]}]`, "retryOn: want at least one"},
		{"Routes trailing data", new(Routes).Decode, `[] []`, "more after"},
		{"Profiles ok", new(Profiles).Decode, `[{"userId":"u1","async-config":{"enabled":true,"containername":"res-u1","topic":"t"}},{"userId":"u2"}]`, ""},
		{"Profiles unknown key", new(Profiles).Decode, `[{"userId":"u1","asyncConfig":{"enabled":true}}]`, `profile "u1": unknown key "asyncConfig"; want userId and async-config`},
		{"Profiles seed-proxy key", new(Profiles).Decode, `[{"userId":"u2","S7PPriorityKey":"x"}]`, `unknown key "S7PPriorityKey"`},
		{"Profiles unknown async key", new(Profiles).Decode, `[{"userId":"u1","async-config":{"enable":true}}]`, `profile "u1": unknown key async-config."enable"; want enabled, containername and topic`},
		{"Profiles unknown key without id", new(Profiles).Decode, `[{"userid":"u1"}]`, `profile 0: unknown key "userid"`},
		{"Seconds beyond the cap", new(Seconds).Decode, "400000000", "want at most ten years (315360000 s)"},
		{"Seconds far beyond the cap", new(Seconds).Decode, strings.Repeat("9", 400), "want at most ten years"},
		{"Millis beyond the cap", new(Millis).Decode, "400000000000", "want at most ten years (315360000000 ms)"},
		{"Millis far beyond the cap", new(Millis).Decode, strings.Repeat("9", 40), "want at most ten years"},
		{"Routes ttl beyond the cap", new(Routes).Decode, `[{"prefix":"/a","ttlSecs":400000000}]`, "ttlSecs: want at most ten years (315360000 s)"},
		{"Routes timeout beyond the cap", new(Routes).Decode, `[{"prefix":"/a","timeoutMs":400000000000}]`, "timeoutMs: want at most ten years (315360000000 ms)"},
		{"Profiles no id", new(Profiles).Decode, `[{"async-config":{}}]`, "userId"},
		{"Profiles bad container", new(Profiles).Decode, `[{"userId":"u","async-config":{"containername":"Bad_Name"}}]`, "containername"},
		// Issue 34: the state container, and the Azure host's own.
		{"Profiles state container", new(Profiles).Decode, `[{"userId":"u","async-config":{"containername":"gateway"}}]`, `profile "u": async-config.containername "gateway" is reserved (the gateway's state`},
		{"Profiles Functions host container", new(Profiles).Decode, `[{"userId":"u","async-config":{"containername":"azure-webjobs-secrets"}}]`, `"azure-webjobs-secrets" is reserved`},
		{"Profiles deployment container", new(Profiles).Decode, `[{"userId":"u","async-config":{"containername":"app-package"}}]`, `"app-package" is reserved`},
		{"Profiles default result container", new(Profiles).Decode, `[{"userId":"u","async-config":{"containername":"gateway-results"}}]`, ""},
		{"Profiles missing file", new(Profiles).Decode, `file:/nonexistent/profiles.json`, "readable JSON file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.decode(tt.in)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Decode(%q): %v", tt.in, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Decode(%q) = %v; want an error containing %q", tt.in, err, tt.wantErr)
			}
		})
	}
}

func defaults(t testing.TB) *Settings {
	t.Helper()
	s := &Settings{
		DefaultTTLSecs: Seconds(300 * time.Second), Timeout: Millis(1200 * time.Second),
		RetryBackoffMs: Millis(25 * time.Millisecond), MaxRetryBodyBytes: 10 << 20,
		FunctionLimitMarginMs: Millis(time.Second), AsyncTriggerTimeout: Millis(10 * time.Second),
		AsyncTimeout: Millis(1800 * time.Second), AsyncTTLSecs: Seconds(86400 * time.Second),
		AsyncStore: "file:.gateway-data", ListenAddr: "127.0.0.1:8080",
	}
	if err := s.Hosts.Decode("http://a:1,http://b:2"); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestValidate(t *testing.T) {
	none := func(string) bool { return false }
	all := func(string) bool { return true }
	tests := []struct {
		name     string
		edit     func(*Settings)
		limit    time.Duration
		explicit func(string) bool
		wantName string // the setting the error names, or "" for none
	}{
		{"defaults, no limit", func(*Settings) {}, 0, none, ""},
		{"defaults under Azure's 230 s cap are bounded at run time", func(*Settings) {}, 230 * time.Second, none, ""},
		{"explicit Timeout beyond the limit", func(s *Settings) {}, 230 * time.Second, all, "Timeout"},
		{"explicit Timeout inside the limit", func(s *Settings) { s.Timeout = Millis(200 * time.Second) }, 230 * time.Second, all, ""},
		{"route timeout beyond the limit", func(s *Settings) {
			s.Timeout = Millis(time.Second)
			s.Routes = Routes{{Prefix: "/r", Timeout: 300 * time.Second}}
		}, 230 * time.Second, all, "Routes"},
		{"margin eats the limit", func(s *Settings) { s.FunctionLimitMarginMs = Millis(5 * time.Second) }, 5 * time.Second, none, "FunctionLimitMarginMs"},
		{"async trigger beyond the limit", func(s *Settings) {
			s.Timeout = Millis(time.Second)
			s.AsyncModeEnabled = true
			s.AsyncTriggerTimeout = Millis(300 * time.Second)
		}, 230 * time.Second, all, "AsyncTriggerTimeout"},
		{"async TTL shorter than trigger", func(s *Settings) {
			s.AsyncModeEnabled = true
			s.AsyncTTLSecs = Seconds(time.Second)
		}, 0, none, "AsyncTTLSecs"},
		{"bad store", func(s *Settings) { s.AsyncStore = "redis://x" }, 0, none, "AsyncStore"},
		{"file store without dir", func(s *Settings) { s.AsyncStore = "file:" }, 0, none, "AsyncStore"},
		{"no hosts", func(s *Settings) { s.Hosts = nil }, 0, none, "Hosts"},
		{"MaxAttempts at the bound", func(s *Settings) { s.MaxAttempts = 100 }, 0, none, ""},
		{"MaxAttempts beyond the bound", func(s *Settings) { s.MaxAttempts = 100000000000 }, 0, none, "MaxAttempts"},
		{"per-profile continuations up to the total", func(s *Settings) { s.MaxContinuationsPerProfile = s.MaxContinuations }, 0, none, ""},
		{"per-profile continuations above the total", func(s *Settings) {
			s.MaxContinuations = 4
			s.MaxContinuationsPerProfile = 5
		}, 0, none, "MaxContinuationsPerProfile"},
		{"inline result at its bound", func(s *Settings) { s.AsyncInlineResultBytes = MaxAsyncInlineResultBytes }, 0, none, ""},
		{"inline result beyond Lambda's answer", func(s *Settings) { s.AsyncInlineResultBytes = MaxAsyncInlineResultBytes + 1 }, 0, none, "AsyncInlineResultBytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := defaults(t)
			tt.edit(s)
			err := s.Validate(tt.limit, tt.explicit)
			if tt.wantName == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var se *core.SettingError
			if !errors.As(err, &se) || se.Name != tt.wantName {
				t.Fatalf("Validate = %v; want a core.SettingError naming %s", err, tt.wantName)
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "setting "+tt.wantName) {
				t.Errorf("message %q: want one line starting with %q", msg, "setting "+tt.wantName)
			}
		})
	}
}

func TestRouter(t *testing.T) {
	s := defaults(t)
	if err := s.Routes.Decode(`[{"prefix":"/api","hosts":["http://api:1"],"ttlSecs":2,"maxAttempts":3},
		{"prefix":"/api/slow","timeoutMs":500,"idleTimeoutMs":100,"stream":true}]`); err != nil {
		t.Fatal(err)
	}
	s.MaxAttempts = 4
	rt := s.Router()
	tests := []struct {
		path               string
		prefix             string
		hosts              string
		ttl, timeout, idle time.Duration
		firstByte          time.Duration
		maxAttempts        int
	}{
		{"/other", "/", "http://a:1,http://b:2", 300 * time.Second, 1200 * time.Second, 0, 0, 4},
		{"/api/x", "/api", "http://api:1", 2 * time.Second, 1200 * time.Second, 0, 0, 3},
		{"/api/slow/y", "/api/slow", "http://a:1,http://b:2", 300 * time.Second, 500 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond, 4}, // Prefixes match by path segment: /api takes /api and /api/…, never /apis.
		{"/api", "/api", "http://api:1", 2 * time.Second, 1200 * time.Second, 0, 0, 3},
		{"/apis", "/", "http://a:1,http://b:2", 300 * time.Second, 1200 * time.Second, 0, 0, 4},
		{"/api/slowest", "/api", "http://api:1", 2 * time.Second, 1200 * time.Second, 0, 0, 3},
		{"/api/slow", "/api/slow", "http://a:1,http://b:2", 300 * time.Second, 500 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond, 4},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			r := rt.Match(tt.path)
			if byFor := s.RouteFor(tt.path); byFor.Prefix != r.Prefix {
				t.Errorf("RouteFor(%q) = prefix %q; Match says %q", tt.path, byFor.Prefix, r.Prefix)
			}
			if r.Prefix != tt.prefix || r.Hosts.String() != tt.hosts || r.TTL != tt.ttl || r.Timeout != tt.timeout ||
				r.IdleTimeout != tt.idle || r.FirstByteTimeout != tt.firstByte || r.MaxAttempts != tt.maxAttempts {
				t.Errorf("Match(%q) = %+v (hosts %s)", tt.path, *r, r.Hosts)
			}
		})
	}
}

// TestDefaultSettings: the defaults come from the struct tags and are the
// contract's.
func TestDefaultSettings(t *testing.T) {
	s := DefaultSettings()
	checks := []struct {
		name      string
		got, want any
	}{
		{"DefaultTTLSecs", s.DefaultTTLSecs.D(), 300 * time.Second},
		{"Timeout", s.Timeout.D(), 1200 * time.Second},
		{"RetryBackoffMs", s.RetryBackoffMs.D(), 25 * time.Millisecond},
		{"MaxRetryBodyBytes", s.MaxRetryBodyBytes, Count(10485760)},
		{"MaxBufferedBytes", s.MaxBufferedBytes, Count(134217728)},
		{"AsyncInlineResultBytes", s.AsyncInlineResultBytes, Count(1048576)},
		{"ClientBodyTimeoutMs", s.ClientBodyTimeoutMs.D(), 30 * time.Second},
		{"FunctionLimitMarginMs", s.FunctionLimitMarginMs.D(), time.Second},
		{"AsyncTriggerTimeout", s.AsyncTriggerTimeout.D(), 10 * time.Second},
		{"AsyncTimeout", s.AsyncTimeout.D(), 1800 * time.Second},
		{"AsyncTTLSecs", s.AsyncTTLSecs.D(), 86400 * time.Second},
		{"AsyncStore", s.AsyncStore, "file:.gateway-data"},
		{"ListenAddr", s.ListenAddr, "127.0.0.1:8080"},
		{"PublicBaseURL", s.PublicBaseURL, BaseURL("")},
		{"Hosts", len(s.Hosts), 0},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v; want %v", c.name, c.got, c.want)
		}
	}
}

func TestBaseURLDecode(t *testing.T) {
	for in, want := range map[string]string{
		"https://api.example.com":     "https://api.example.com",
		"https://api.example.com/gw/": "https://api.example.com/gw",
		" http://127.0.0.1:8080/x ":   "http://127.0.0.1:8080/x",
	} {
		var b BaseURL
		if err := b.Decode(in); err != nil || string(b) != want {
			t.Errorf("Decode(%q) = %q, %v; want %q", in, b, err, want)
		}
	}
	for _, in := range []string{"", "api.example.com", "ftp://x", "https://", "https://u:p@x", "https://x/?a=1", "https://x/#f", "/gw"} {
		var b BaseURL
		if err := b.Decode(in); err == nil {
			t.Errorf("Decode(%q) = %q; want an error", in, b)
		}
	}
}

// TestContinuationsPerProfileSetting: MaxContinuationsPerProfile defaults
// to half of MaxContinuations, rounded up; IdempotencyScopeHeaders to
// Authorization, and a bad list names the setting's expectation.
func TestContinuationsPerProfileSetting(t *testing.T) {
	s := defaults(t)
	if got := s.ContinuationsPerProfile(); got != 8 {
		t.Errorf("default ContinuationsPerProfile = %d; want 8 (half of 16)", got)
	}
	s.MaxContinuations = 5
	if got := s.ContinuationsPerProfile(); got != 3 {
		t.Errorf("ContinuationsPerProfile with MaxContinuations=5 = %d; want 3", got)
	}
	s.MaxContinuationsPerProfile = 1
	if got := s.ContinuationsPerProfile(); got != 1 {
		t.Errorf("ContinuationsPerProfile set to 1 = %d", got)
	}
	if got := strings.Join(DefaultSettings().IdempotencyScopeHeaders, ","); got != "Authorization" {
		t.Errorf("default IdempotencyScopeHeaders = %q; want Authorization", got)
	}
	var h HeaderNames
	for _, bad := range []string{"", "a,,b", "a b"} {
		if err := h.Decode(bad); err == nil || !strings.Contains(err.Error(), "header names") {
			t.Errorf("Decode(%q) = %v; want an error saying header names are expected", bad, err)
		}
	}
	var c Count
	if c.Decode("0") == nil {
		t.Error("MaxContinuationsPerProfile=0 accepted; want a positive count")
	}
}

func TestParseHeaderNames(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{"Authorization", "Authorization", false},
		{" authorization , x-api-key", "Authorization,X-Api-Key", false},
		{"", "", true},
		{"Authorization,", "", true},
		{"Bad Name", "", true},
		{"a:b", "", true},
		{strings.Repeat("a", 257), "", true},
	}
	for _, tt := range tests {
		got, err := ParseHeaderNames(tt.in)
		if (err != nil) != tt.wantErr || strings.Join(got, ",") != tt.want {
			t.Errorf("ParseHeaderNames(%.20q) = %v, %v; want %q, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

// FuzzParseHeaderNames: whatever is accepted round-trips: joined with
// commas it parses to the same names, each a token.
func FuzzParseHeaderNames(f *testing.F) {
	f.Add("Authorization")
	f.Add(" a , b-c,X_Y ")
	f.Add(",")
	f.Fuzz(func(t *testing.T, s string) {
		names, err := ParseHeaderNames(s)
		if err != nil {
			return
		}
		again, err := ParseHeaderNames(strings.Join(names, ","))
		if err != nil || strings.Join(again, ",") != strings.Join(names, ",") {
			t.Fatalf("%q parsed to %q, which parses to %q, %v", s, names, again, err)
		}
		for _, n := range names {
			if !core.IsToken(n) || http.CanonicalHeaderKey(n) != n {
				t.Fatalf("%q gave name %q", s, n)
			}
		}
	})
}

// TestIdempotencyScopeHeadersNotAScope: IdempotencyScopeHeaders refuses a
// header whose value differs on every request of one caller, or that the
// gateway removes, naming every one of them; a SigV4 X-Amz-Date in the
// scope made every request another caller's. Before, they were taken.
func TestIdempotencyScopeHeadersNotAScope(t *testing.T) {
	tests := []struct {
		in        string
		wantNames []string // "" wantNames: accepted
	}{
		{"Authorization", nil},
		{"Authorization,X-Api-Key", nil},
		{"X-Amz-Date", []string{"X-Amz-Date"}},
		{"authorization, x-amz-date, date, X-AMZ-CONTENT-SHA256", []string{"X-Amz-Date", "Date", "X-Amz-Content-Sha256"}},
		{"X-Amz-Security-Token", []string{"X-Amz-Security-Token"}},
		{"x-functions-key", []string{"X-Functions-Key"}},
		{"traceparent,X-Ms-Date", []string{"Traceparent", "X-Ms-Date"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var h HeaderNames
			err := h.Decode(tt.in)
			if len(tt.wantNames) == 0 {
				if err != nil {
					t.Fatalf("Decode(%q) = %v; want accepted", tt.in, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Decode(%q) accepted %v; want refused", tt.in, h)
			}
			for _, n := range tt.wantNames {
				if !strings.Contains(err.Error(), n+" (") {
					t.Errorf("error %q does not name %s", err, n)
				}
			}
		})
	}
}

// TestCheckMemory: the body budgets are held against the soft memory limit;
// a MaxBufferedBytes left at its default fits under half of it, one given
// beyond it is an error naming the setting, its value and the limit.
func TestCheckMemory(t *testing.T) {
	const limit = 1 << 30
	none := func(string) bool { return false }
	given := func(names ...string) func(string) bool {
		return func(n string) bool { return slices.Contains(names, n) }
	}
	for _, tt := range []struct {
		name              string
		buffered, retry   Count
		explicit          func(string) bool
		limit             int64
		wantBuffered      Count
		wantErr, wantName string
	}{
		{"defaults within 1 GiB", 128 << 20, 10 << 20, none, limit, 128 << 20, "", ""},
		{"default lowered on a small host", 128 << 20, 10 << 20, none, 100 << 20, 50 << 20, "", ""},
		{"given within the limit", 900 << 20, 10 << 20, given("MaxBufferedBytes"), limit, 900 << 20, "", ""},
		{"given at the limit", limit, 10 << 20, given("MaxBufferedBytes"), limit, limit, "", ""},
		{"given beyond the limit", limit + 1, 10 << 20, given("MaxBufferedBytes"), limit, 0,
			`setting MaxBufferedBytes="1073741825": want at most 1073741824 bytes, the soft limit (src)`, "MaxBufferedBytes"},
		{"given beyond the limit, not memory", 64 << 30, 10 << 20, given("MaxBufferedBytes"), limit, 0, "", "MaxBufferedBytes"},
		{"retry body beyond the limit", 1 << 20, limit + 1, given("MaxBufferedBytes", "MaxRetryBodyBytes"), limit, 0, "", "MaxRetryBodyBytes"},
		{"unknown memory checks nothing", 64 << 30, 64 << 30, none, 0, 64 << 30, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := DefaultSettings()
			s.MaxBufferedBytes, s.MaxRetryBodyBytes = tt.buffered, tt.retry
			err := s.CheckMemory(tt.limit, "the soft limit (src)", tt.explicit)
			switch {
			case tt.wantName == "" && err != nil:
				t.Fatalf("CheckMemory = %v; want nil", err)
			case tt.wantName != "" && (err == nil || !strings.HasPrefix(err.Error(), "setting "+tt.wantName+"=") || !strings.Contains(err.Error(), "(src)")):
				t.Fatalf("CheckMemory = %v; want a one-line error naming %s and the limit's source", err, tt.wantName)
			case tt.wantErr != "" && err.Error() != tt.wantErr:
				t.Fatalf("CheckMemory = %q; want %q", err, tt.wantErr)
			}
			if err == nil && s.MaxBufferedBytes != tt.wantBuffered {
				t.Errorf("MaxBufferedBytes = %d; want %d", s.MaxBufferedBytes, tt.wantBuffered)
			}
		})
	}
}

func TestProfilesFileBounded(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok.json")
	os.WriteFile(ok, []byte(`[{"userId":"u1"}]`), 0o600)
	big := filepath.Join(dir, "big.json")
	os.WriteFile(big, []byte(`[{"userId":"u1","pad":"`+strings.Repeat("x", MaxProfilesFileBytes)+`"}]`), 0o600)
	fifo := filepath.Join(dir, "dir")
	os.Mkdir(fifo, 0o700)
	for _, tt := range []struct{ in, wantErr string }{
		{"file:" + ok, ""},
		{"file:" + big, "larger than 1048576 bytes"},
		{"file:/dev/zero", "not a regular file"},
		{"file:" + fifo, "not a regular file"},
	} {
		var p Profiles
		err := p.Decode(tt.in)
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("Decode(%q) = %v; want error containing %q", tt.in, err, tt.wantErr)
		}
	}
}

func TestValidateRetryBudget(t *testing.T) {
	s := DefaultSettings()
	s.Hosts = testutil.Hosts(t, "h")
	if err := s.Validate(0, func(string) bool { return false }); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if s.RetryBudgetPercent != 20 || s.RetryBudgetMinConcurrency != 3 {
		t.Errorf("defaults %d%%, %d; want 20%%, 3", s.RetryBudgetPercent, s.RetryBudgetMinConcurrency)
	}
	s.RetryBudgetPercent = 101
	if err := s.Validate(0, func(string) bool { return false }); err == nil || !strings.Contains(err.Error(), "RetryBudgetPercent") {
		t.Errorf("RetryBudgetPercent 101: err %v; want one naming it", err)
	}
}

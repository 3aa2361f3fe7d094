package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"fngateway/core"
	"fngateway/internal/settings"
	"fngateway/internal/testutil"
)

// noDNSTransport is the gateway's transport with a resolver that fails at
// once, without sending a query: a name's resolution fails here as it would
// for a name no server knows, and no test traffic leaves loopback.
func noDNSTransport() *http.Transport {
	tr := core.NewTransport()
	d := &net.Dialer{Timeout: 30 * time.Second, Resolver: &net.Resolver{PreferGo: true,
		Dial: func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("no resolver in this test")
		}}}
	tr.DialContext = d.DialContext
	return tr
}

// logLine is the per-request line as the tests read it.
type logLine struct {
	Level         string
	Msg           string
	Status        int
	Code          string
	RequestID     string `json:"requestId"`
	Upstream      []core.Attempt
	InFlightHost  string `json:"inFlightHost"`
	InFlightPhase string `json:"inFlightPhase"`
}

// serveLogged runs r through a handler over settings s and returns the
// answer and the one request line it logged.
func serveLogged(t *testing.T, s *settings.Settings, r *http.Request) (*httptest.ResponseRecorder, logLine) {
	t.Helper()
	var buf bytes.Buffer
	h := &Handler{Settings: s, Forwarder: &core.Forwarder{Transport: noDNSTransport()}, Stats: &core.Stats{},
		Logger: newLogger(&buf)}
	h.Init()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	var line logLine
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("log %q: %v", buf.String(), err)
	}
	return rec, line
}

func newLogger(buf *bytes.Buffer) *slog.Logger { return slog.New(NewJSONLogHandler(buf)) }

// TestLineNamesEveryAttempt: the per-request line names, for every
// attempt, its host, outcome, cause and phase; a 504 names the attempt it
// cut and its phase; a gateway-made 5xx is a WARN line. The error
// document's attempts say the same.
func TestLineNamesEveryAttempt(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer plain.Close()
	reset := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.(*net.TCPConn).SetLinger(0) // an RST, not a FIN
			c.Close()
		}
	}))
	defer reset.Close()
	held := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer held.Close()
	refused := testutil.RefusedAddr(t)
	hostOf := func(u string) string { return strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://") }

	tests := []struct {
		name    string
		hosts   string
		timeout string // S7PTimeout, if any
		status  int
		code    string
		want    []core.Attempt // host, outcome, cause and phase
		flight  string         // inFlightHost/inFlightPhase, for a 504
	}{
		{"dns then refused", "http://no-such-host.invalid:9000,http://" + refused, "", 502, "BackendUnavailable",
			[]core.Attempt{{Host: "no-such-host.invalid:9000", Outcome: core.OutcomeConnectError, Failure: core.FailureDNS, Phase: core.PhaseConnect},
				{Host: refused, Outcome: core.OutcomeConnectError, Failure: core.FailureRefused, Phase: core.PhaseConnect}}, ""},
		{"tls to a plain port", "https://" + hostOf(plain.URL), "", 502, "BackendUnavailable",
			[]core.Attempt{{Host: hostOf(plain.URL), Outcome: core.OutcomeConnectError, Failure: core.FailureTLS, Phase: core.PhaseConnect}}, ""},
		{"reset after the request", reset.URL, "", 502, "BackendUnavailable",
			[]core.Attempt{{Host: hostOf(reset.URL), Outcome: core.OutcomeConnectError, Failure: core.FailureReset, Phase: core.PhaseHeaders}}, ""},
		{"timeout waiting for headers", held.URL, "300", 504, "AttemptTimeout",
			[]core.Attempt{{Host: hostOf(held.URL), Outcome: core.OutcomeTimeout, Failure: core.FailureTimeout, Phase: core.PhaseHeaders}},
			hostOf(held.URL) + "/headers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testSettings(t, tt.hosts)
			s.MaxAttempts = settings.Count(len(tt.want))
			s.AsyncModeEnabled = false
			r := httptest.NewRequest("GET", "http://gw/x", nil)
			if tt.timeout != "" {
				r.Header.Set("S7PTimeout", tt.timeout)
			}
			rec, line := serveLogged(t, s, r)
			if rec.Code != tt.status || line.Status != tt.status || line.Code != tt.code {
				t.Fatalf("answer %d, line %d %q; want %d %s (body %s)", rec.Code, line.Status, line.Code, tt.status, tt.code, rec.Body)
			}
			if line.Level != "WARN" {
				t.Errorf("level %s; want WARN for a gateway-made %d", line.Level, tt.status)
			}
			var doc struct {
				Error struct{ Attempts []core.Attempt }
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
				t.Fatalf("body %s: %v", rec.Body, err)
			}
			for what, got := range map[string][]core.Attempt{"line's upstream": line.Upstream, "error document's attempts": doc.Error.Attempts} {
				if len(got) != len(tt.want) {
					t.Fatalf("%s = %+v; want %d attempts", what, got, len(tt.want))
				}
				for i, w := range tt.want {
					g := got[i]
					if g.Host != w.Host || g.Outcome != w.Outcome || g.Failure != w.Failure || g.Phase != w.Phase {
						t.Errorf("%s[%d] = %s %s cause %q phase %q; want %s %s cause %q phase %q", what, i,
							g.Host, g.Outcome, g.Failure, g.Phase, w.Host, w.Outcome, w.Failure, w.Phase)
					}
				}
			}
			if got := line.InFlightHost + "/" + line.InFlightPhase; tt.flight != "" && got != tt.flight {
				t.Errorf("in flight = %s; want %s", got, tt.flight)
			} else if tt.flight == "" && got != "/" {
				t.Errorf("in flight = %s on a %d; want none", got, tt.status)
			}
		})
	}
}

// TestPassedThroughIsInfo: a backend's own 503, passed through, is the
// backend's answer, not the gateway's error: an INFO line naming the host
// that answered.
func TestPassedThroughIsInfo(t *testing.T) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }))
	defer be.Close()
	s := testSettings(t, be.URL)
	s.AsyncModeEnabled = false
	rec, line := serveLogged(t, s, httptest.NewRequest("GET", "http://gw/x", nil))
	if rec.Code != 503 || line.Level != "INFO" || len(line.Upstream) != 1 || line.Upstream[0].Status != 503 || line.Upstream[0].Failure != "" {
		t.Errorf("answer %d, line %+v; want a 503 passed through, an INFO line whose upstream is one 503 without cause", rec.Code, line)
	}
}

var hexID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// TestRequestID: the request id is a trusted proxy's X-Request-Id when it
// is well formed, else a new one; the backend receives it, the client gets
// it back and the line carries it.
func TestRequestID(t *testing.T) {
	var seen []string
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header["X-Request-Id"]
		w.Header().Set("X-Request-Id", "the-backends-own")
	}))
	defer be.Close()
	tests := []struct {
		name    string
		trusted bool
		sent    []string
		want    string // "" for a new one
	}{
		{"none sent", false, nil, ""},
		{"a client's own is not believed", false, []string{"client-chosen"}, ""},
		{"a trusted proxy's is kept", true, []string{"proxy-1234:abcd"}, "proxy-1234:abcd"},
		{"a trusted proxy's malformed one is replaced", true, []string{"has space"}, ""},
		{"a trusted proxy's repeated one is replaced", true, []string{"a", "b"}, ""},
		{"a trusted proxy's overlong one is replaced", true, []string{strings.Repeat("a", core.MaxRequestID+1)}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testSettings(t, be.URL)
			s.AsyncModeEnabled = false
			if tt.trusted {
				if err := s.TrustedProxies.Decode("192.0.2.0/24"); err != nil { // httptest.NewRequest's RemoteAddr
					t.Fatal(err)
				}
			}
			r := httptest.NewRequest("GET", "http://gw/x", nil)
			r.Header["X-Request-Id"] = tt.sent
			seen = nil
			rec, line := serveLogged(t, s, r)
			got := rec.Header().Get("X-Request-Id")
			if tt.want != "" && got != tt.want || tt.want == "" && !hexID.MatchString(got) {
				t.Fatalf("answer's X-Request-Id = %q; want %q (or a new 32-hex id)", got, tt.want)
			}
			if len(seen) != 1 || seen[0] != got {
				t.Errorf("backend saw X-Request-Id %q; want [%s]", seen, got)
			}
			if line.RequestID != got {
				t.Errorf("line's requestId = %q; want %s", line.RequestID, got)
			}
		})
	}
}

// FuzzParseRequestID: an accepted id is what was given, at most
// MaxRequestID bytes of the allowed set, and a valid header value.
func FuzzParseRequestID(f *testing.F) {
	for _, s := range []string{"", "abc", "0123456789abcdef0123456789abcdef", "a b", "x\r\ny", "Root=1-abc", strings.Repeat("z", 200), "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, ok := core.ParseRequestID(s)
		if !ok {
			if id != "" {
				t.Fatalf("refused %q but returned %q", s, id)
			}
			return
		}
		if id != s || len(id) == 0 || len(id) > core.MaxRequestID {
			t.Fatalf("ParseRequestID(%q) = %q", s, id)
		}
		for i := 0; i < len(id); i++ {
			if c := id[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\\' || c == ',' || c == ';' {
				t.Fatalf("accepted %q with byte %q", s, c)
			}
		}
	})
}

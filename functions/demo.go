package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"fngateway/internal/settings"
)

// demoSet is the three built-in backends of --demo: fast, slow and flaky.
type demoSet struct {
	fast, slow, flaky *http.Server
	addrs             map[string]string
}

// startDemo starts the demo backends on loopback ports.
func startDemo(ctx context.Context) (*demoSet, error) {
	var flakyCount atomic.Int64
	handlers := map[string]http.HandlerFunc{
		"fast": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, "{\"backend\":\"fast\",\"path\":%q,\"idempotencyKey\":%q,\"expectedTimeoutMs\":%q}\n",
				r.URL.Path, r.Header.Get("Idempotency-Key"), r.Header.Get("X-Envoy-Expected-Rq-Timeout-Ms"))
		},
		"slow": func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-time.After(3 * time.Second):
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, "{\"backend\":\"slow\",\"tookMs\":3000}\n")
			case <-r.Context().Done():
				fmt.Fprintf(os.Stderr, "demo slow backend: request cancelled by the gateway after its deadline\n")
			}
		},
		"flaky": func(w http.ResponseWriter, r *http.Request) {
			if flakyCount.Add(1)%2 == 1 {
				w.Header().Set("Retry-After", "0")
				http.Error(w, "flaky backend: try again", http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, "{\"backend\":\"flaky\"}\n")
		},
	}
	d := &demoSet{addrs: map[string]string{}}
	for name, h := range handlers {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			d.Close()
			return nil, err
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln)
		d.addrs[name] = "http://" + ln.Addr().String()
		switch name {
		case "fast":
			d.fast = srv
		case "slow":
			d.slow = srv
		case "flaky":
			d.flaky = srv
		}
	}
	return d, nil
}

// under lays the demo's settings, which point at the demo backends, under
// env: a setting the user gave (under its name or in upper case) wins.
// Nothing is written to the process's environment.
func (d *demoSet) under(env func(string) (string, bool)) func(string) (string, bool) {
	def := map[string]string{
		"Hosts": d.addrs["fast"],
		"Routes": fmt.Sprintf(`[{"prefix":"/slow","hosts":[%q],"ttlSecs":2},`+
			`{"prefix":"/flaky","hosts":[%q,%q]}]`, d.addrs["slow"], d.addrs["flaky"], d.addrs["fast"]),
		"AsyncModeEnabled":    "true",
		"AsyncTriggerTimeout": "1000",
		"UserProfiles":        `[{"userId":"demo","async-config":{"enabled":true,"containername":"demo-results","topic":"demo-status"}}]`,
	}
	given := settings.EnvLookup(env)
	return func(name string) (string, bool) {
		if v, ok := env(name); ok {
			return v, true
		}
		if v, ok := def[name]; ok {
			if _, set := given(name); !set {
				return v, true
			}
		}
		return "", false
	}
}

func (d *demoSet) printHelp(w io.Writer, gw string) {
	fmt.Fprintf(w, `
Gateway demo on http://%[1]s  (backends: fast %[2]s, slow %[3]s (3 s), flaky %[4]s (503 every other call))

  # a retry: the flaky host answers 503, the gateway moves on to the next host (see x-Attempts)
  curl -si http://%[1]s/flaky/hello

  # a TTL expiry: /slow has a 2 s TTL, its backend needs 3 s -> 504 TTLExpired at 2 s, backend cancelled
  curl -si http://%[1]s/slow/report

  # an override header: give this request 5 s instead -> 200
  curl -si -H 'S7PTTL: 5' http://%[1]s/slow/report

  # an async hand-off: 202 after 1 s, then follow Location
  curl -si -H 'S7PAsyncMode: true' -H 'X-UserProfile: demo' http://%[1]s/slow/report

  # counters per timeout source
  curl -s http://%[1]s/_gateway/stats

`, gw, d.addrs["fast"], d.addrs["slow"], d.addrs["flaky"])
}

// Close stops the demo backends.
func (d *demoSet) Close() {
	for _, s := range []*http.Server{d.fast, d.slow, d.flaky} {
		if s != nil {
			s.Close()
		}
	}
}

package core

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// latencyBackends starts one real backend per delay, each answering 200
// after its delay, and returns them as hosts with the counters of the
// requests each received.
func latencyBackends(tb testing.TB, delays ...time.Duration) (HostList, []*atomic.Int64) {
	tb.Helper()
	var hosts HostList
	var counts []*atomic.Int64
	for _, d := range delays {
		n := new(atomic.Int64)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			if d > 0 {
				time.Sleep(d) // the backend's own latency, what the mode measures
			}
			io.WriteString(w, "ok")
		}))
		tb.Cleanup(srv.Close)
		u, err := url.Parse(srv.URL)
		if err != nil {
			tb.Fatal(err)
		}
		hosts = append(hosts, u)
		counts = append(counts, n)
	}
	return hosts, counts
}

// spread sends n requests, eight at a time, to route through f and
// returns how many each backend received.
func spread(tb testing.TB, f *Forwarder, route *Route, counts []*atomic.Int64, n int) []int64 {
	tb.Helper()
	var wg sync.WaitGroup
	jobs := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			for range jobs {
				now := time.Now()
				req := &Request{Method: "GET", Path: "/", Header: http.Header{}, Route: route,
					Budget: Budget{Arrival: now, TTL: now.Add(time.Minute), Timeout: 30 * time.Second}}
				res, err := f.Forward(context.Background(), req)
				if err != nil {
					tb.Errorf("Forward: %v", err)
					continue
				}
				io.Copy(io.Discard, res.Response.Body)
				res.Response.Body.Close()
				if res.Response.StatusCode != 200 {
					tb.Errorf("status %d; want 200", res.Response.StatusCode)
				}
			}
		})
	}
	for range n {
		jobs <- struct{}{}
	}
	close(jobs)
	wg.Wait()
	out := make([]int64, len(counts))
	for i, c := range counts {
		out[i] = c.Load()
	}
	return out
}

// TestLoadBalanceSpread: 1000 requests over three real backends of
// different latencies, in each mode: priority sends all to the first,
// round robin splits them evenly (within ±5 %), latency sends most to the
// fastest, random roughly evenly.
func TestLoadBalanceSpread(t *testing.T) {
	const n = 1000
	for _, tt := range []struct {
		mode  LoadBalance
		check func(t *testing.T, got []int64)
	}{
		{BalancePriority, func(t *testing.T, got []int64) {
			if got[0] != n {
				t.Errorf("spread %v; want all %d on the first host", got, n)
			}
		}},
		{BalanceRoundRobin, func(t *testing.T, got []int64) {
			for i, c := range got {
				if c < n/3*95/100 || c > n/3*105/100 {
					t.Errorf("host %d got %d of %d (spread %v); want %d ± 5 %%", i, c, n, got, n/3)
				}
			}
		}},
		{BalanceLatency, func(t *testing.T, got []int64) {
			// The slower hosts are measured, and tried again whenever the
			// fastest one's average is above theirs.
			if got[0] < 2*n/3 {
				t.Errorf("the fastest host got %d of %d (spread %v); want most (at least two thirds)", got[0], n, got)
			}
		}},
		{BalanceRandom, func(t *testing.T, got []int64) {
			// Binomial(1000, 1/3): a standard deviation of 15; ±100 is
			// more than six.
			for i, c := range got {
				if c < n/3-100 || c > n/3+100 {
					t.Errorf("host %d got %d of %d (spread %v); want about %d", i, c, n, got, n/3)
				}
			}
		}},
	} {
		t.Run(tt.mode.String(), func(t *testing.T) {
			// The latency mode's hosts differ by more than a loaded
			// machine adds to an answer (its scheduling delays reached
			// 20 ms in a -race run beside other work); the other modes
			// count requests only.
			step := 20 * time.Millisecond
			if tt.mode == BalanceLatency {
				step = 250 * time.Millisecond
			}
			hosts, counts := latencyBackends(t, 0, step, 2*step)
			f := &Forwarder{Transport: NewTransport(), Balancer: &Balancer{}, Ejector: &Ejector{}, Stats: &Stats{}}
			route := &Route{Prefix: "/", Hosts: hosts, MaxAttempts: 3, LoadBalance: tt.mode, EjectAfterFailures: 5}
			got := spread(t, f, route, counts, n)
			var sum int64
			for _, c := range got {
				sum += c
			}
			if sum != n {
				t.Fatalf("backends saw %d requests (%v); want %d, one attempt each", sum, got, n)
			}
			tt.check(t, got)
		})
	}
}

// TestLoadBalanceSkipsEjected: in every mode an ejected host is tried only
// after the hosts in service, so a request spends no attempt on it while
// another host answers.
func TestLoadBalanceSkipsEjected(t *testing.T) {
	for _, mode := range []LoadBalance{BalancePriority, BalanceLatency, BalanceRoundRobin, BalanceRandom} {
		t.Run(mode.String(), func(t *testing.T) {
			hosts, counts := latencyBackends(t, 0, 0, 0)
			f := &Forwarder{Transport: NewTransport(), Balancer: &Balancer{}, Ejector: &Ejector{}, Stats: &Stats{}}
			route := &Route{Prefix: "/", Hosts: hosts, MaxAttempts: 3, LoadBalance: mode, EjectAfterFailures: 1, EjectFor: time.Hour}
			// Eject the second host as its failures would.
			if !f.Ejector.record(route, hosts[1], &Attempt{Outcome: OutcomeConnectError}, time.Now()) {
				t.Fatal("the host was not ejected")
			}
			got := spread(t, f, route, counts, 60)
			if got[1] != 0 {
				t.Errorf("spread %v; want nothing on the ejected host while the others answer", got)
			}
		})
	}
}

// TestRetryOn: a route's retryOn decides which answers move on to the
// next host: by default a 500 goes to the client, with retryOn [500] the
// next host answers, and a 503 outside the list goes to the client at
// once.
func TestRetryOn(t *testing.T) {
	for _, tt := range []struct {
		name     string
		retryOn  []int
		first    int
		status   int
		attempts int
	}{
		{"default 500 answered", nil, 500, 500, 1},
		{"default 503 retried", nil, 503, 200, 2},
		{"retryOn 500", []int{500}, 500, 200, 2},
		{"retryOn 500 503 answered", []int{500}, 503, 503, 1},
		{"retryOn 404", []int{404, 503}, 404, 200, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(tt.first) }))
			defer bad.Close()
			good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
			defer good.Close()
			hosts := HostList{mustURL(t, bad.URL), mustURL(t, good.URL)}
			f := &Forwarder{Transport: NewTransport(), Stats: &Stats{}}
			now := time.Now()
			req := &Request{Method: "GET", Path: "/", Header: http.Header{},
				Route:  &Route{Hosts: hosts, MaxAttempts: 2, RetryOn: tt.retryOn},
				Budget: Budget{Arrival: now, TTL: now.Add(time.Minute), Timeout: 10 * time.Second}}
			res, err := f.Forward(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			res.Response.Body.Close()
			if res.Response.StatusCode != tt.status || len(res.Attempts) != tt.attempts {
				t.Errorf("status %d after %d attempts; want %d after %d", res.Response.StatusCode, len(res.Attempts), tt.status, tt.attempts)
			}
			if want := HostLabelWant(tt.attempts); res.Backend != want {
				t.Errorf("Backend = %q; want %q (the position of the host that answered)", res.Backend, want)
			}
		})
	}
}

// HostLabelWant is the label of the host that answers after attempts
// attempts of TestRetryOn: its position.
func HostLabelWant(attempts int) string { return positionLabel(attempts - 1) }

func mustURL(tb testing.TB, s string) *url.URL {
	tb.Helper()
	u, err := url.Parse(s)
	if err != nil {
		tb.Fatal(err)
	}
	return u
}

// TestHostLabels: a labelled host is named by its label, any other by its
// position, never by its URL.
func TestHostLabels(t *testing.T) {
	var hl HostList
	if err := hl.Decode("primary=http://a:1/x, http://b:2,eu-west.2=https://c"); err != nil {
		t.Fatal(err)
	}
	r := &Route{Hosts: hl}
	for i, want := range []string{"primary", "1", "eu-west.2"} {
		if got := r.HostLabel(hl[i]); got != want {
			t.Errorf("HostLabel(%d) = %q; want %q", i, got, want)
		}
	}
	if got, want := baseURLOf(hl[0]), "http://a:1/x"; got != want {
		t.Errorf("baseURLOf = %q; want %q", got, want)
	}
	if got, want := hl.String(), "primary=http://a:1/x,http://b:2,eu-west.2=https://c"; got != want {
		t.Errorf("String = %q; want %q", got, want)
	}
	for _, bad := range []string{"=http://a", "bad label=http://a", "x#y=http://a"} {
		if err := new(HostList).Decode(bad); err == nil {
			t.Errorf("Decode(%q) = nil; want an error naming the label", bad)
		}
	}
}

// TestTargetPath: stripPrefix removes the route's prefix by whole
// segments before the path is confined.
func TestTargetPath(t *testing.T) {
	r := &Route{Prefix: "/api/v1", StripPrefix: true}
	for _, tt := range []struct {
		in, want string
		err      bool
	}{
		{"/api/v1/users", "/users", false},
		{"/api/v1", "", false},
		{"/api/v1/", "/", false},
		{"/%61pi/v1/x%2Fy", "/x%2Fy", false},
		{"/api/v1/..%2f..%2fadmin", "", true},
		{"/api/v1/../x", "", true},
		{"/api%2Fv1/x", "", true}, // does not spell the prefix segment by segment
	} {
		got, err := r.TargetPath(tt.in)
		if (err != nil) != tt.err || !tt.err && got.escaped != tt.want {
			t.Errorf("TargetPath(%q) = %q, %v; want %q (error %v)", tt.in, got.escaped, err, tt.want, tt.err)
		}
	}
	keep := &Route{Prefix: "/api/v1"}
	if got, _ := keep.TargetPath("/api/v1/users"); got.escaped != "/api/v1/users" {
		t.Errorf("without stripPrefix: %q; want the path unchanged", got.escaped)
	}
}

// FuzzTargetPath: with the prefix stripped, any accepted path, joined to
// the host's base path, stays under that base (FuzzConfinePath's corpus
// and property, behind the prefix).
func FuzzTargetPath(f *testing.F) {
	for _, s := range []string{"/a/b", "/../x", "/..%2fadmin", "/%2e%2e/x", "/..%5cx", `/a\..`, "/a%2Fb", "/...", "/..;x/y", "/%252e%252e/"} {
		f.Add(s)
		f.Add("/p/q" + s)
		f.Add("/p%2Fq" + s)
	}
	host := &url.URL{Scheme: "http", Host: "b", Path: "/api"}
	r := &Route{Prefix: "/p/q", StripPrefix: true}
	f.Fuzz(func(t *testing.T, p string) {
		tg, err := r.TargetPath(p)
		if err != nil {
			return
		}
		u := joinURL(host, tg.escaped, tg.decoded, "")
		segs := strings.Split(strings.ReplaceAll(u.Path, `\`, "/"), "/")
		for i, seg := range segs {
			segs[i], _, _ = strings.Cut(seg, ";")
		}
		if clean := path.Clean(strings.Join(segs, "/")); clean != "/api" && !strings.HasPrefix(clean, "/api/") {
			t.Fatalf("path %q reaches %q (%q) above the base /api", p, u.EscapedPath(), clean)
		}
	})
}

// TestStripPrefixForward: a stripPrefix route's backend sees the path
// without the prefix, under its own base path.
func TestStripPrefixForward(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.URL.EscapedPath() }))
	defer srv.Close()
	f := &Forwarder{Transport: NewTransport(), Stats: &Stats{}}
	now := time.Now()
	req := &Request{Method: "GET", Path: "/svc/a%2Fb/c", Header: http.Header{},
		Route:  &Route{Prefix: "/svc", StripPrefix: true, Hosts: HostList{mustURL(t, srv.URL+"/base")}, MaxAttempts: 1},
		Budget: Budget{Arrival: now, TTL: now.Add(time.Minute), Timeout: 10 * time.Second}}
	res, err := f.Forward(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	res.Response.Body.Close()
	if p := <-got; p != "/base/a%2Fb/c" {
		t.Errorf("backend path %q; want /base/a%%2Fb/c", p)
	}
}

// TestThrottled: when every attempt answers 429 or 503 with a
// Retry-After and the attempts (or the time for the next wait) run out,
// the Result says the shortest Retry-After; one answer without one is
// enough to say nothing.
func TestThrottled(t *testing.T) {
	for _, tt := range []struct {
		name    string
		answers []string // status:retry-after
		ttl     time.Duration
		want    time.Duration
	}{
		{"all throttled", []string{"429:2", "503:1"}, time.Minute, time.Second},
		{"wait beyond the TTL", []string{"429:5", "503:1"}, 2 * time.Second, 5 * time.Second},
		{"one without Retry-After", []string{"429:1", "503:"}, time.Minute, 0},
		{"one 502", []string{"429:1", "502:1"}, time.Minute, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var hosts HostList
			for _, a := range tt.answers {
				status, ra, _ := strings.Cut(a, ":")
				code := map[string]int{"429": 429, "503": 503, "502": 502}[status]
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if ra != "" {
						w.Header().Set("Retry-After", ra)
					}
					w.WriteHeader(code)
				}))
				defer srv.Close()
				hosts = append(hosts, mustURL(t, srv.URL))
			}
			f := &Forwarder{Transport: NewTransport(), Stats: &Stats{}}
			now := time.Now()
			req := &Request{Method: "GET", Path: "/", Header: http.Header{},
				Route:  &Route{Hosts: hosts, MaxAttempts: 2},
				Budget: Budget{Arrival: now, TTL: now.Add(tt.ttl), Timeout: 10 * time.Second}}
			res, err := f.Forward(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			res.Response.Body.Close()
			if res.Throttled != tt.want {
				t.Errorf("Throttled = %v after %d attempts; want %v", res.Throttled, len(res.Attempts), tt.want)
			}
		})
	}
}

// BenchmarkBalancerOrder: the per-request cost of each mode's ordering of
// three hosts (priority returns the configured list itself).
func BenchmarkBalancerOrder(b *testing.B) {
	hosts := HostList{mustURL(b, "http://a:1"), mustURL(b, "http://b:2"), mustURL(b, "http://c:3")}
	for _, mode := range []LoadBalance{BalancePriority, BalanceLatency, BalanceRoundRobin, BalanceRandom} {
		b.Run(mode.String(), func(b *testing.B) {
			bal := &Balancer{}
			route := &Route{Prefix: "/", Hosts: hosts, LoadBalance: mode}
			for i, h := range hosts {
				bal.observe(route, h, time.Duration(i+1)*time.Millisecond)
			}
			b.ReportAllocs()
			for b.Loop() {
				bal.order(route)
			}
		})
	}
}

// TestBalancerOrderAllocs: ordering a route's hosts allocates nothing once
// each order has been made (the orders are kept per route), in every mode.
func TestBalancerOrderAllocs(t *testing.T) {
	hosts := HostList{mustURL(t, "http://a:1"), mustURL(t, "http://b:2"), mustURL(t, "http://c:3")}
	for _, mode := range []LoadBalance{BalancePriority, BalanceLatency, BalanceRoundRobin, BalanceRandom} {
		t.Run(mode.String(), func(t *testing.T) {
			bal := &Balancer{}
			route := &Route{Prefix: "/", Hosts: hosts, LoadBalance: mode}
			for i, h := range hosts {
				bal.observe(route, h, time.Duration(i+1)*time.Millisecond)
			}
			for range 1000 { // every order of three hosts: six at most
				bal.order(route)
			}
			if got := testing.AllocsPerRun(1000, func() { bal.order(route) }); got != 0 {
				t.Errorf("order allocates %v times a request; want 0", got)
			}
		})
	}
}

// TestBalancerOrderReload: a route whose hosts a reload replaced is
// ordered over its new hosts, never over the orders kept of the old ones.
func TestBalancerOrderReload(t *testing.T) {
	for _, mode := range []LoadBalance{BalanceLatency, BalanceRoundRobin, BalanceRandom} {
		t.Run(mode.String(), func(t *testing.T) {
			bal := &Balancer{}
			old := &Route{Prefix: "/", LoadBalance: mode,
				Hosts: HostList{mustURL(t, "http://a:1"), mustURL(t, "http://b:2"), mustURL(t, "http://c:3")}}
			for range 100 {
				bal.order(old)
			}
			cur := &Route{Prefix: "/", LoadBalance: mode,
				Hosts: HostList{mustURL(t, "http://x:1"), mustURL(t, "http://y:2"), mustURL(t, "http://z:3")}}
			for range 100 {
				got := bal.order(cur)
				seen := map[*url.URL]bool{}
				for _, h := range got {
					seen[h] = true
				}
				if len(got) != 3 || !seen[cur.Hosts[0]] || !seen[cur.Hosts[1]] || !seen[cur.Hosts[2]] {
					t.Fatalf("order = %v; want the new hosts %v, each once", got, cur.Hosts)
				}
			}
		})
	}
}

// TestBalancerOrderSame: the orders kept are the orders made: round-robin
// still starts each request at the next host, and latency still puts the
// fastest first, whatever was kept before.
func TestBalancerOrderSame(t *testing.T) {
	hosts := HostList{mustURL(t, "http://a:1"), mustURL(t, "http://b:2"), mustURL(t, "http://c:3")}
	bal := &Balancer{}
	rr := &Route{Prefix: "/rr", Hosts: hosts, LoadBalance: BalanceRoundRobin}
	for i := range 9 {
		if got, want := bal.order(rr)[0], hosts[i%3]; got != want {
			t.Fatalf("request %d starts at %v; want %v", i, got, want)
		}
	}
	lat := &Route{Prefix: "/lat", Hosts: hosts, LoadBalance: BalanceLatency}
	for _, fastest := range []int{2, 0, 1} {
		for i, h := range hosts {
			d := 50 * time.Millisecond
			if i == fastest {
				d = time.Millisecond
			}
			for range 50 { // enough samples to move every average
				bal.observe(lat, h, d)
			}
		}
		// One of any latencyProbeEvery requests may be a probe; the
		// others put the fastest first.
		firsts := 0
		for range latencyProbeEvery {
			if bal.order(lat)[0] == hosts[fastest] {
				firsts++
			}
		}
		if firsts < latencyProbeEvery-1 {
			t.Errorf("fastest host %d first in %d of %d orders; want all but the probe", fastest, firsts, latencyProbeEvery)
		}
	}
}

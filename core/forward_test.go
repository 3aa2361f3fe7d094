package core

import (
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"fngateway/internal/testutil"
)

// stubRT is a RoundTripper whose behaviour is a function of the host and
// the request; it records every request it saw.
type stubRT struct {
	mu   sync.Mutex
	seen []*http.Request
	fn   func(host string, r *http.Request) (*http.Response, error)
}

func (s *stubRT) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.seen = append(s.seen, r)
	s.mu.Unlock()
	return s.fn(r.URL.Host, r)
}

func (s *stubRT) hosts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.seen {
		out = append(out, r.URL.Host)
	}
	return out
}

func answer(status int, body string, hdr ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(hdr); i += 2 {
		h.Set(hdr[i], hdr[i+1])
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body))}
}

func refused() error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: &net.OpError{Err: syscall.ECONNREFUSED}}
}

// hang waits for the attempt's context to end.
func hang(_ string, r *http.Request) (*http.Response, error) {
	<-r.Context().Done()
	return nil, r.Context().Err()
}

type fwdCase struct {
	name        string
	method      string
	clientKey   bool
	hosts       []string
	maxAttempts int
	ttl         time.Duration
	timeout     time.Duration
	limit       time.Duration // from arrival; 0: none
	backoff     time.Duration
	rt          func(host string, r *http.Request) (*http.Response, error)

	wantStatus   int    // a passed-through answer, or 0
	wantReason   Reason // a gateway error, or ReasonNone
	wantHTTP     int    // the gateway error's status
	wantHosts    string // hosts tried, comma-separated
	wantElapsed  time.Duration
	wantOutcomes string
}

func TestForward(t *testing.T) {
	okAt := func(good string) func(string, *http.Request) (*http.Response, error) {
		return func(h string, r *http.Request) (*http.Response, error) {
			if h == good {
				return answer(200, "ok"), nil
			}
			return answer(503, "busy"), nil
		}
	}
	tests := []fwdCase{
		{name: "first host answers", hosts: []string{"a", "b"}, ttl: 10 * time.Second, timeout: time.Second,
			rt: okAt("a"), wantStatus: 200, wantHosts: "a", wantOutcomes: "status"},
		{name: "503 moves to the next host", hosts: []string{"a", "b"}, ttl: 10 * time.Second, timeout: time.Second,
			rt: okAt("b"), wantStatus: 200, wantHosts: "a,b", wantOutcomes: "status,status"},
		{name: "all 503: the last answer passes through", hosts: []string{"a", "b"}, ttl: 10 * time.Second, timeout: time.Second,
			rt: okAt("none"), wantStatus: 503, wantHosts: "a,b", wantOutcomes: "status,status"},
		{name: "500 is not retried", hosts: []string{"a", "b"}, ttl: 10 * time.Second, timeout: time.Second,
			rt:         func(string, *http.Request) (*http.Response, error) { return answer(500, "boom"), nil },
			wantStatus: 500, wantHosts: "a", wantOutcomes: "status"},
		{name: "refused then healthy", hosts: []string{"a", "b"}, ttl: 10 * time.Second, timeout: time.Second,
			rt: func(h string, r *http.Request) (*http.Response, error) {
				if h == "a" {
					return nil, refused()
				}
				return answer(200, "ok"), nil
			}, wantStatus: 200, wantHosts: "a,b", wantOutcomes: "connect-error,status"},
		{name: "all refused: 502", hosts: []string{"a", "b"}, ttl: 10 * time.Second, timeout: time.Second,
			rt:         func(string, *http.Request) (*http.Response, error) { return nil, refused() },
			wantReason: ReasonBackendUnavailable, wantHTTP: 502, wantHosts: "a,b", wantOutcomes: "connect-error,connect-error"},
		{name: "per-try timeouts exhaust attempts: 504 AttemptTimeout", hosts: []string{"a", "b"}, ttl: 10 * time.Second, timeout: time.Second,
			rt: hang, wantReason: ReasonAttemptTimeout, wantHTTP: 504, wantHosts: "a,b", wantElapsed: 2 * time.Second,
			wantOutcomes: "timeout,timeout"},
		{name: "TTL fires during an attempt: 504 TTLExpired", hosts: []string{"a"}, ttl: time.Second, timeout: 5 * time.Second,
			rt: hang, wantReason: ReasonTTLExpired, wantHTTP: 504, wantHosts: "a", wantElapsed: time.Second, wantOutcomes: "timeout"},
		{name: "TTL shortens the last attempt (Envoy case)", hosts: []string{"a"}, maxAttempts: 5, ttl: 2 * time.Second, timeout: 800 * time.Millisecond,
			rt: hang, wantReason: ReasonTTLExpired, wantHTTP: 504, wantHosts: "a,a,a", wantElapsed: 2 * time.Second,
			wantOutcomes: "timeout,timeout,timeout"},
		{name: "execution limit cuts the attempt", hosts: []string{"a", "b"}, ttl: 10 * time.Second, timeout: 5 * time.Second, limit: 3 * time.Second,
			rt: hang, wantReason: ReasonFunctionLimit, wantHTTP: 504, wantHosts: "a", wantElapsed: 3 * time.Second, wantOutcomes: "function-limit"},
		{name: "MaxAttempts cycles through hosts", hosts: []string{"a", "b"}, maxAttempts: 3, ttl: 10 * time.Second, timeout: time.Second,
			rt: okAt("none"), wantStatus: 503, wantHosts: "a,b,a", wantOutcomes: "status,status,status"},
		{name: "MaxAttempts 1 means no retry", hosts: []string{"a", "b"}, maxAttempts: 1, ttl: 10 * time.Second, timeout: time.Second,
			rt: okAt("b"), wantStatus: 503, wantHosts: "a", wantOutcomes: "status"},
		{name: "POST timeout without client key is not retried", method: "POST", hosts: []string{"a", "b"}, ttl: 10 * time.Second, timeout: time.Second,
			rt: hang, wantReason: ReasonAttemptTimeout, wantHTTP: 504, wantHosts: "a", wantElapsed: time.Second, wantOutcomes: "timeout"},
		{name: "POST timeout with client key is retried", method: "POST", clientKey: true, hosts: []string{"a", "b"}, ttl: 10 * time.Second, timeout: time.Second,
			rt: hang, wantReason: ReasonAttemptTimeout, wantHTTP: 504, wantHosts: "a,b", wantElapsed: 2 * time.Second, wantOutcomes: "timeout,timeout"},
		{name: "POST 503 is always retried", method: "POST", hosts: []string{"a", "b"}, ttl: 10 * time.Second, timeout: time.Second,
			rt: okAt("b"), wantStatus: 200, wantHosts: "a,b", wantOutcomes: "status,status"},
		{name: "POST 502 without key is not retried", method: "POST", hosts: []string{"a", "b"}, ttl: 10 * time.Second, timeout: time.Second,
			rt:         func(string, *http.Request) (*http.Response, error) { return answer(502, "bad"), nil },
			wantStatus: 502, wantHosts: "a", wantOutcomes: "status"},
		{name: "POST refused is always retried", method: "POST", hosts: []string{"a", "b"}, ttl: 10 * time.Second, timeout: time.Second,
			rt: func(h string, r *http.Request) (*http.Response, error) {
				if h == "a" {
					return nil, refused()
				}
				return answer(201, "made"), nil
			}, wantStatus: 201, wantHosts: "a,b", wantOutcomes: "connect-error,status"},
		{name: "PATCH lost response without key is not retried", method: "PATCH", hosts: []string{"a", "b"}, ttl: 10 * time.Second, timeout: time.Second,
			rt:         func(string, *http.Request) (*http.Response, error) { return nil, io.ErrUnexpectedEOF },
			wantReason: ReasonBackendUnavailable, wantHTTP: 502, wantHosts: "a", wantOutcomes: "connect-error"},
		{name: "Retry-After is honoured when longer than the backoff", hosts: []string{"a", "b"}, ttl: 10 * time.Second, timeout: time.Second,
			rt: func(h string, r *http.Request) (*http.Response, error) {
				if h == "a" {
					return answer(429, "slow down", "Retry-After", "2"), nil
				}
				return answer(200, "ok"), nil
			}, wantStatus: 200, wantHosts: "a,b", wantElapsed: 2 * time.Second, wantOutcomes: "status,status"},
		{name: "a wait past the TTL is not started", hosts: []string{"a", "b"}, ttl: 3 * time.Second, timeout: time.Second,
			rt: func(h string, r *http.Request) (*http.Response, error) {
				return answer(503, "later", "Retry-After", "5"), nil
			}, wantStatus: 503, wantHosts: "a", wantElapsed: 0, wantOutcomes: "status"},
		{name: "backoff never exceeds its cap", hosts: []string{"a"}, maxAttempts: 4, ttl: 10 * time.Second, timeout: time.Second, backoff: 100 * time.Millisecond,
			rt: okAt("none"), wantStatus: 503, wantHosts: "a,a,a,a", wantOutcomes: "status,status,status,status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				runForwardCase(t, tt)
			})
		})
	}
}

func runForwardCase(t *testing.T, tt fwdCase) {
	stub := &stubRT{fn: tt.rt}
	stats := &Stats{}
	f := &Forwarder{Transport: stub, BackoffBase: tt.backoff, Stats: stats}
	hosts := testutil.Hosts(t, tt.hosts...)
	route := &Route{Prefix: "/", Hosts: hosts, MaxAttempts: tt.maxAttempts}
	if route.MaxAttempts == 0 {
		route.MaxAttempts = len(hosts)
	}
	now := time.Now()
	b := Budget{Arrival: now, TTL: now.Add(tt.ttl), Timeout: tt.timeout}
	if tt.limit > 0 {
		b.Limit = now.Add(tt.limit)
	}
	method := tt.method
	if method == "" {
		method = "GET"
	}
	req := &Request{Method: method, Path: "/x", Header: http.Header{}, Route: route, Budget: b,
		IdempotencyKey: "k1", ClientKey: tt.clientKey}
	if method == "POST" || method == "PATCH" {
		req.Body = []byte("payload")
	}
	res, err := f.Forward(context.Background(), req)
	elapsed := time.Since(now)
	var attempts []Attempt
	if tt.wantReason != ReasonNone {
		var ge *Error
		if !errors.As(err, &ge) {
			t.Fatalf("Forward = %v, %v; want *Error %v", res, err, tt.wantReason.Code())
		}
		if ge.Reason != tt.wantReason {
			t.Errorf("reason = %v; want %v", ge.Reason.Code(), tt.wantReason.Code())
		}
		if got := ge.HTTPStatus(); got != tt.wantHTTP {
			t.Errorf("HTTP status = %d; want %d", got, tt.wantHTTP)
		}
		attempts = ge.Attempts
	} else {
		if err != nil {
			t.Fatalf("Forward: %v", err)
		}
		if res.Response.StatusCode != tt.wantStatus {
			t.Errorf("status = %d; want %d", res.Response.StatusCode, tt.wantStatus)
		}
		io.Copy(io.Discard, res.Response.Body)
		res.Response.Body.Close()
		attempts = res.Attempts
	}
	if got := strings.Join(stub.hosts(), ","); got != tt.wantHosts {
		t.Errorf("hosts tried = %s; want %s", got, tt.wantHosts)
	}
	var outcomes []string
	for _, a := range attempts {
		outcomes = append(outcomes, string(a.Outcome))
	}
	if got := strings.Join(outcomes, ","); got != tt.wantOutcomes {
		t.Errorf("outcomes = %s; want %s", got, tt.wantOutcomes)
	}
	if tt.backoff == 0 && elapsed != tt.wantElapsed {
		t.Errorf("elapsed = %v; want %v", elapsed, tt.wantElapsed)
	}
	if tt.backoff > 0 {
		// Three waits, each at most its cap: 100 ms, 200 ms, 400 ms.
		if max := 700 * time.Millisecond; elapsed > max {
			t.Errorf("elapsed = %v; want at most %v of backoff", elapsed, max)
		}
	}
	if got, want := stats.Attempts.Load(), int64(len(strings.Split(tt.wantHosts, ","))); got != want {
		t.Errorf("stats.Attempts = %d; want %d", got, want)
	}
}

// TestForwardCancelsUpstream checks that a fired deadline cancels the
// upstream request's context (the transport then closes the connection).
func TestForwardCancelsUpstream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var cancelledAt time.Duration
		start := time.Now()
		stub := &stubRT{fn: func(_ string, r *http.Request) (*http.Response, error) {
			<-r.Context().Done()
			cancelledAt = time.Since(start)
			return nil, r.Context().Err()
		}}
		f := &Forwarder{Transport: stub}
		req := &Request{Method: "GET", Path: "/", Header: http.Header{},
			Route:  &Route{Hosts: testutil.Hosts(t, "a"), MaxAttempts: 1},
			Budget: Budget{Arrival: start, TTL: start.Add(time.Second), Timeout: time.Minute}}
		_, err := f.Forward(context.Background(), req)
		if ReasonOf(err) != ReasonTTLExpired {
			t.Fatalf("err = %v; want TTLExpired", err)
		}
		if cancelledAt != time.Second {
			t.Errorf("upstream cancelled at %v; want 1s", cancelledAt)
		}
	})
}

func TestForwardExpiredBeforeAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		stub := &stubRT{fn: hang}
		f := &Forwarder{Transport: stub}
		req := &Request{Method: "GET", Path: "/", Header: http.Header{},
			Route:  &Route{Hosts: testutil.Hosts(t, "a"), MaxAttempts: 1},
			Budget: Budget{Arrival: now, TTL: now, Timeout: time.Second}}
		_, err := f.Forward(context.Background(), req)
		var ge *Error
		if !errors.As(err, &ge) || ge.Reason != ReasonTTLExpired || ge.HTTPStatus() != 412 {
			t.Fatalf("err = %v; want 412 TTLExpired", err)
		}
		if len(stub.hosts()) != 0 {
			t.Errorf("a backend was tried: %v", stub.hosts())
		}
	})
}

func TestForwardClientGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		stub := &stubRT{fn: hang}
		f := &Forwarder{Transport: stub, Stats: &Stats{}}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(300*time.Millisecond, cancel)
		req := &Request{Method: "GET", Path: "/", Header: http.Header{},
			Route:  &Route{Hosts: testutil.Hosts(t, "a", "b"), MaxAttempts: 2},
			Budget: Budget{Arrival: now, TTL: now.Add(10 * time.Second), Timeout: time.Second}}
		_, err := f.Forward(ctx, req)
		if ReasonOf(err) != ReasonClientGone {
			t.Fatalf("err = %v; want ClientGone", err)
		}
		if got := stub.hosts(); len(got) != 1 {
			t.Errorf("hosts tried = %v; a gone client must not be retried", got)
		}
		if f.Stats.Retries.Load() != 0 || f.Stats.AttemptTimeoutPerTry.Load() != 0 {
			t.Errorf("a gone client was counted as an upstream failure: %v", f.Stats.Snapshot())
		}
		if got := f.Stats.EndClientGone.Load(); got != 1 {
			t.Errorf("end_client_gone = %d; want 1", got)
		}
		// The attempt the caller cut (a client gone, an async DELETE) is
		// recorded as cancelled, not as the backend's connection failure.
		var ge *Error
		if !errors.As(err, &ge) || len(ge.Attempts) != 1 || ge.Attempts[0].Outcome != OutcomeCancelled {
			t.Errorf("attempts = %+v; want one %q", ge, OutcomeCancelled)
		}
	})
}

// TestForwardStream: a response whose headers arrive in time streams past
// the TTL; an idle gap longer than the route's limit cuts it. Only the
// backend's silence counts: a reader that pauses between reads (a relay
// writing to a slow client) takes as long as it likes while the backend
// always has data ready.
func TestForwardStream(t *testing.T) {
	const ready = 0
	tests := []struct {
		name    string
		gaps    []time.Duration // the backend's, before each chunk once the previous one is taken
		pause   time.Duration   // the reader's, before each read after the first
		idle    time.Duration
		wantCut error
		wantN   int
		wantAt  time.Duration // when the body ends, from the headers
	}{
		{"outlives the TTL", []time.Duration{500 * time.Millisecond, 900 * time.Millisecond, 900 * time.Millisecond}, 0, time.Second, nil, 3, 2300 * time.Millisecond},
		{"cut by the idle gap", []time.Duration{100 * time.Millisecond, 1500 * time.Millisecond}, 0, time.Second, ErrIdleTimeout, 1, 1100 * time.Millisecond},
		{"cut before the first byte", []time.Duration{1500 * time.Millisecond}, 0, time.Second, ErrIdleTimeout, 0, time.Second},
		{"no idle limit", []time.Duration{5 * time.Second}, 0, 0, nil, 1, 5 * time.Second},
		{"a slow reader is not backend silence", []time.Duration{ready, ready, ready, ready, ready}, 2 * time.Second, time.Second, nil, 5, 10 * time.Second},
		{"backend silence past the reader's pause is cut", []time.Duration{ready, 3500 * time.Millisecond}, 2 * time.Second, time.Second, ErrIdleTimeout, 1, 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				stub := &stubRT{fn: func(_ string, r *http.Request) (*http.Response, error) {
					pr, pw := io.Pipe()
					go func() {
						for _, g := range tt.gaps {
							select {
							case <-time.After(g):
							case <-r.Context().Done():
								pw.CloseWithError(r.Context().Err())
								return
							}
							pw.Write([]byte("chunk"))
						}
						pw.Close()
					}()
					go func() { <-r.Context().Done(); pw.CloseWithError(context.Cause(r.Context())) }()
					return &http.Response{StatusCode: 200, Header: http.Header{}, Body: pr, ContentLength: -1}, nil
				}}
				stats := &Stats{}
				f := &Forwarder{Transport: stub, Stats: stats}
				req := &Request{Method: "GET", Path: "/", Header: http.Header{},
					Route:  &Route{Hosts: testutil.Hosts(t, "a"), MaxAttempts: 1, IdleTimeout: tt.idle, FirstByteTimeout: tt.idle},
					Budget: Budget{Arrival: start, TTL: start.Add(time.Second), Timeout: time.Second}}
				res, err := f.Forward(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				headers := time.Now()
				var data []byte
				var rerr error
				buf := make([]byte, 64)
				for {
					if len(data) > 0 {
						time.Sleep(tt.pause)
					}
					n, err := res.Response.Body.Read(buf)
					data = append(data, buf[:n]...)
					if err != nil {
						if err != io.EOF {
							rerr = err
						}
						break
					}
				}
				at := time.Since(headers)
				cut := StreamCut(res.Response.Body)
				res.Response.Body.Close()
				if got := strings.Count(string(data), "chunk"); got != tt.wantN {
					t.Errorf("chunks = %d; want %d", got, tt.wantN)
				}
				if at != tt.wantAt {
					t.Errorf("body ended after %v; want %v", at, tt.wantAt)
				}
				if !errors.Is(cut, tt.wantCut) || (tt.wantCut == nil) != (rerr == nil) {
					t.Errorf("cut = %v, read err = %v; want cut %v", cut, rerr, tt.wantCut)
				}
				wantCuts := int64(0)
				if tt.wantCut != nil {
					wantCuts = 1
				}
				if got := stats.StreamIdleCut.Load(); got != wantCuts {
					t.Errorf("StreamIdleCut = %d; want %d", got, wantCuts)
				}
			})
		})
	}
}

func TestOutgoingHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		stub := &stubRT{fn: func(string, *http.Request) (*http.Response, error) { return answer(200, "ok"), nil }}
		f := &Forwarder{Transport: stub}
		in := http.Header{}
		in.Set("S7PTTL", "5")
		in.Set("s7pAsyncMode", "true")
		in.Set("Connection", "close, X-Private")
		in.Set("X-Private", "secret")
		in.Set("Keep-Alive", "timeout=5")
		in.Set("Upgrade", "h2c")
		in.Set("X-Forwarded-For", "10.1.1.1")
		in.Set("Content-Type", "application/grpc+proto")
		in.Set("X-Custom", "kept")
		req := &Request{Method: "POST", Path: "/svc/Method", RawQuery: "a=1", Header: in, Body: []byte("abc"),
			Host: "gw.example", RemoteAddr: "192.0.2.7:5555", Proto: "https", IdempotencyKey: "key-1",
			Route:  &Route{Hosts: HostList{{Scheme: "http", Host: "backend:9000", Path: "/base"}}, MaxAttempts: 1},
			Budget: Budget{Arrival: now, TTL: now.Add(2 * time.Second), Timeout: 1500 * time.Millisecond}}
		res, err := f.Forward(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		res.Response.Body.Close()
		got := stub.seen[0]
		checks := []struct{ name, got, want string }{
			{"URL", got.URL.String(), "http://backend:9000/base/svc/Method?a=1"},
			{"Host", got.Host, "backend:9000"},
			{"X-Forwarded-For", got.Header.Get("X-Forwarded-For"), "10.1.1.1, 192.0.2.7"},
			{"X-Forwarded-Proto", got.Header.Get("X-Forwarded-Proto"), "https"},
			{"X-Forwarded-Host", got.Header.Get("X-Forwarded-Host"), "gw.example"},
			{"Idempotency-Key", got.Header.Get("Idempotency-Key"), "key-1"},
			{"x-envoy-expected-rq-timeout-ms", got.Header.Get("X-Envoy-Expected-Rq-Timeout-Ms"), "1500"},
			{"grpc-timeout", got.Header.Get("Grpc-Timeout"), "1500000u"},
			{"S7PTTL", got.Header.Get("S7PTTL"), ""},
			{"S7PAsyncMode", got.Header.Get("S7PAsyncMode"), ""},
			{"Connection", got.Header.Get("Connection"), ""},
			{"X-Private (named by Connection)", got.Header.Get("X-Private"), ""},
			{"Keep-Alive", got.Header.Get("Keep-Alive"), ""},
			{"Upgrade", got.Header.Get("Upgrade"), ""},
			{"X-Custom", got.Header.Get("X-Custom"), "kept"},
			{"Via", got.Header.Get("Via"), "1.1 fngateway"},
		}
		for _, c := range checks {
			if c.got != c.want {
				t.Errorf("%s = %q; want %q", c.name, c.got, c.want)
			}
		}
		if in.Get("S7PTTL") != "5" || in.Get("X-Private") != "secret" {
			t.Error("Forward modified the client's headers")
		}
		body, _ := io.ReadAll(got.Body)
		if string(body) != "abc" {
			t.Errorf("body = %q; want abc", body)
		}
	})
}

// TestOutgoingURLStaysOnHost: no accepted path can steer the request
// elsewhere.
func TestOutgoingURLStaysOnHost(t *testing.T) {
	host := &url.URL{Scheme: "http", Host: "backend:9000"}
	for _, p := range []string{"//evil.example/x", "/@evil.example", "/..//evil", "http://evil.example/", "/%2F%2Fevil.example"} {
		decoded, err := ConfinePath(p)
		if err != nil {
			continue // refused: InvalidPath
		}
		req := &Request{Method: "GET", Path: p, Header: http.Header{}}
		out := buildOutgoing(context.Background(), req, decoded, host, time.Second)
		if out.URL.Host != "backend:9000" || out.Host != "backend:9000" {
			t.Errorf("path %q went to %q (Host %q)", p, out.URL.Host, out.Host)
		}
	}
}

// TestConfinePath: a .. segment, plain or percent-encoded, with either
// separator, is refused; everything else is accepted.
func TestConfinePath(t *testing.T) {
	refused := []string{
		"/../x", "/..", "/a/../../admin", "/..%2fadmin/secret", "/..%2Fadmin", "/%2e%2e/x", "/%2E%2E/x", "/.%2e/x",
		"/%2e./x", "/..%5cadmin", "/a%5c..%5cb", `/a\..\b`, "/..;jsessionid=1/admin", "/a/%2e%2e", "x/y", "*",
		"/%zz", "/a%2", "/%2e%2e%2f",
	}
	for _, p := range refused {
		if d, err := ConfinePath(p); !errors.Is(err, errInvalidPath) {
			t.Errorf("ConfinePath(%q) = %q, %v; want errInvalidPath", p, d, err)
		}
	}
	accepted := map[string]string{
		"":             "",
		"/":            "/",
		"/a/b":         "/a/b",
		"/a%2Fb":       "/a/b",
		"/...":         "/...",
		"/a..b/..c":    "/a..b/..c",
		"/.well-known": "/.well-known",
		"/./x":         "/./x",
		"/a%3Bb":       "/a;b",
		"/%2e%2e%2e":   "/...",
	}
	for p, want := range accepted {
		if d, err := ConfinePath(p); err != nil || d != want {
			t.Errorf("ConfinePath(%q) = %q, %v; want %q", p, d, err, want)
		}
	}
}

// TestOutgoingPathKeepsEscaping: the backend gets the client's path
// under the base path with its escaping as sent.
func TestOutgoingPathKeepsEscaping(t *testing.T) {
	host := &url.URL{Scheme: "http", Host: "b", Path: "/api"}
	for in, want := range map[string]string{
		"/a%2Fb":                 "/api/a%2Fb",
		"/a%3Bb":                 "/api/a%3Bb",
		"/x%40y%2Bz%7Ew%2Cv%3Du": "/api/x%40y%2Bz%7Ew%2Cv%3Du",
		"/a;b,c=d@e+f~g":         "/api/a;b,c=d@e+f~g",
		"/it's(a)*!":             "/api/it's(a)*!",
		"/plain/path":            "/api/plain/path",
		"/sp%20ace":              "/api/sp%20ace",
		"/%E2%82%AC":             "/api/%E2%82%AC",
	} {
		decoded, err := ConfinePath(in)
		if err != nil {
			t.Fatalf("ConfinePath(%q): %v", in, err)
		}
		out := buildOutgoing(context.Background(), &Request{Method: "GET", Path: in, Header: http.Header{}}, decoded, host, time.Second)
		if got := out.URL.RequestURI(); got != want {
			t.Errorf("path %q reached the backend as %q; want %q", in, got, want)
		}
	}
}

// TestForwardInvalidPath: a refused path never reaches a backend.
func TestForwardInvalidPath(t *testing.T) {
	stub := &stubRT{fn: func(string, *http.Request) (*http.Response, error) { return answer(200, "ok"), nil }}
	f := &Forwarder{Transport: stub, Stats: &Stats{}}
	now := time.Now()
	req := &Request{Method: "GET", Path: "/..%2fadmin/secret", Header: http.Header{},
		Route:  &Route{Hosts: testutil.Hosts(t, "a"), MaxAttempts: 1},
		Budget: Budget{Arrival: now, TTL: now.Add(time.Minute), Timeout: time.Second}}
	_, err := f.Forward(context.Background(), req)
	var ge *Error
	if !errors.As(err, &ge) || ge.Reason != ReasonInvalidPath || ge.HTTPStatus() != 400 || ge.Reason.Code() != "InvalidPath" {
		t.Fatalf("err = %v; want 400 InvalidPath", err)
	}
	if len(stub.hosts()) != 0 {
		t.Errorf("a refused path reached %v", stub.hosts())
	}
	if got := f.Stats.EndBadRequest.Load(); got != 1 {
		t.Errorf("end_bad_request = %d; want 1", got)
	}
}

// TestOutgoingUserAgentAndUpgrade: a client without User-Agent sends none
// (not the transport's); an upgrade request keeps its Upgrade header.
func TestOutgoingUserAgentAndUpgrade(t *testing.T) {
	host := &url.URL{Scheme: "http", Host: "b"}
	out := buildOutgoing(context.Background(), &Request{Method: "GET", Path: "/", Header: http.Header{}}, "/", host, time.Second)
	if v, ok := out.Header["User-Agent"]; !ok || len(v) != 1 || v[0] != "" {
		t.Errorf("User-Agent = %q (present %v); want present and empty, so the transport adds none", v, ok)
	}
	in := http.Header{"User-Agent": {"curl/8"}, "Connection": {"keep-alive, Upgrade"}, "Upgrade": {"websocket"}}
	out = buildOutgoing(context.Background(), &Request{Method: "GET", Path: "/", Header: in, Upgrade: "websocket"}, "/", host, time.Second)
	if out.Header.Get("User-Agent") != "curl/8" || out.Header.Get("Upgrade") != "websocket" || out.Header.Get("Connection") != "Upgrade" {
		t.Errorf("headers = %v; want the client's User-Agent, Upgrade: websocket, Connection: Upgrade", out.Header)
	}
}

// FuzzConfinePath: any accepted path, once decoded and resolved under a
// base path (with / and \ both separators), stays under that base.
func FuzzConfinePath(f *testing.F) {
	for _, s := range []string{"/a/b", "/../x", "/..%2fadmin", "/%2e%2e/x", "/..%5cx", `/a\..`, "/a%2Fb", "/...", "/..;x/y", "/%252e%252e/"} {
		f.Add(s)
	}
	host := &url.URL{Scheme: "http", Host: "b", Path: "/api"}
	f.Fuzz(func(t *testing.T, p string) {
		decoded, err := ConfinePath(p)
		if err != nil {
			return
		}
		u := joinURL(host, p, decoded, "")
		once, err := url.PathUnescape(u.EscapedPath())
		if err != nil {
			t.Fatalf("path %q gave an undecodable backend path %q", p, u.EscapedPath())
		}
		if once != u.Path {
			t.Fatalf("path %q: backend path %q decodes to %q, not %q", p, u.EscapedPath(), once, u.Path)
		}
		// Drop path parameters too, as servers that treat ..; as .. do.
		segs := strings.Split(strings.ReplaceAll(u.Path, `\`, "/"), "/")
		for i, seg := range segs {
			segs[i], _, _ = strings.Cut(seg, ";")
		}
		if clean := path.Clean(strings.Join(segs, "/")); clean != "/api" && !strings.HasPrefix(clean, "/api/") {
			t.Fatalf("path %q reaches %q (%q) above the base /api", p, u.EscapedPath(), clean)
		}
	})
}

func TestReasonStatusTable(t *testing.T) {
	tests := []struct {
		r         Reason
		attempted bool
		status    int
		code      string
	}{
		{ReasonInvalidTTL, false, 400, "InvalidTTL"},
		{ReasonInvalidTimeout, false, 400, "InvalidTimeout"},
		{ReasonTTLExpired, false, 412, "TTLExpired"},
		{ReasonTTLExpired, true, 504, "TTLExpired"},
		{ReasonAttemptTimeout, true, 504, "AttemptTimeout"},
		{ReasonFunctionLimit, true, 504, "FunctionLimit"},
		{ReasonBackendUnavailable, true, 502, "BackendUnavailable"},
		{ReasonAsyncUnavailable, false, 503, "AsyncUnavailable"},
		{ReasonInvalidPath, false, 400, "InvalidPath"},
		{ReasonRequestTimeout, false, 408, "RequestTimeout"},
		{ReasonUpgradeUnsupported, false, 501, "UpgradeUnsupported"},
		{ReasonInvalidBody, false, 400, "InvalidBody"},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			if got := tt.r.Status(tt.attempted); got != tt.status {
				t.Errorf("Status(%v) = %d; want %d", tt.attempted, got, tt.status)
			}
			if got := tt.r.Code(); got != tt.code {
				t.Errorf("Code = %q; want %q", got, tt.code)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"3", 3 * time.Second},
		{"0", 0},
		{"-1", 0},
		{"soon", 0},
		{t0.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{t0.Add(-90 * time.Second).Format(http.TimeFormat), 0},
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.in, t0); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %v; want %v", tt.in, got, tt.want)
		}
	}
}

// BenchmarkForward measures one request through the attempt loop on a
// static transport: budget, outgoing request, stream wrapper.
func BenchmarkForward(b *testing.B) {
	rt := &staticAnswer{}
	f := &Forwarder{Transport: rt, Stats: &Stats{}}
	route := &Route{Hosts: testutil.Hosts(b, "backend.test"), MaxAttempts: 1}
	hdr := http.Header{"User-Agent": {"bench"}, "Accept": {"application/json"}}
	b.ReportAllocs()
	for b.Loop() {
		now := time.Now()
		req := Request{Method: "GET", Path: "/v1/items", RawQuery: "id=42", Header: hdr, Host: "gw.test",
			RemoteAddr: "192.0.2.1:5000", Proto: "http", IdempotencyKey: "k", Route: route,
			Budget: Budget{Arrival: now, TTL: now.Add(time.Minute), Timeout: time.Second}}
		res, err := f.Forward(context.Background(), &req)
		if err != nil {
			b.Fatal(err)
		}
		res.Response.Body.Close()
	}
}

// staticAnswer answers every request with an empty 200, reusing nothing.
type staticAnswer struct{}

func (*staticAnswer) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}

func BenchmarkConfinePath(b *testing.B) {
	for _, p := range []string{"/v1/items/42", "/v1/a%2Fb/c%3Bd", "/v1/..well/x"} {
		b.Run(p, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ConfinePath(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestIsHopHeader: the hop-by-hop headers, in canonical form, and only
// they.
func TestIsHopHeader(t *testing.T) {
	for _, k := range []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"} {
		if !isHopHeader(k) {
			t.Errorf("isHopHeader(%q) = false", k)
		}
	}
	for _, k := range []string{"Content-Type", "X-Forwarded-For", "connection", "Upgrade-Insecure-Requests", "Tes"} {
		if isHopHeader(k) {
			t.Errorf("isHopHeader(%q) = true", k)
		}
	}
}

// TestRemoveHopHeaders: the hop-by-hop headers go, with those the
// Connection header names; end-to-end ones stay.
func TestRemoveHopHeaders(t *testing.T) {
	h := http.Header{"Connection": {"close, X-Private"}, "Keep-Alive": {"timeout=5"}, "Transfer-Encoding": {"chunked"},
		"Te": {"trailers"}, "Upgrade": {"websocket"}, "X-Private": {"1"}, "Content-Type": {"text/plain"}, "Etag": {`"x"`}}
	RemoveHopHeaders(h)
	got := slices.Sorted(maps.Keys(h))
	if want := []string{"Content-Type", "Etag"}; !slices.Equal(got, want) {
		t.Errorf("headers left = %v; want %v", got, want)
	}
}

// TestOutgoingVia: the gateway adds itself to Via, keeping earlier hops;
// a trusted proxy's X-Forwarded-Proto and -Host (the only ones that reach
// core) are kept.
func TestOutgoingVia(t *testing.T) {
	host := &url.URL{Scheme: "http", Host: "b:1"}
	req := &Request{Method: "GET", Path: "/", Host: "gw.example", Proto: "http",
		Header: http.Header{"Via": {"1.0 fred", "1.1 p.example"}, "X-Forwarded-Proto": {"https"}, "X-Forwarded-Host": {"api.example"}}}
	out := buildOutgoing(context.Background(), req, "/", host, time.Second)
	if got, want := out.Header.Get("Via"), "1.0 fred, 1.1 p.example, 1.1 fngateway"; got != want {
		t.Errorf("Via = %q; want %q", got, want)
	}
	if out.Header.Get("X-Forwarded-Proto") != "https" || out.Header.Get("X-Forwarded-Host") != "api.example" {
		t.Errorf("X-Forwarded-Proto %q, -Host %q; want the trusted proxy's https, api.example", out.Header.Get("X-Forwarded-Proto"), out.Header.Get("X-Forwarded-Host"))
	}
	if len(req.Header["Via"]) != 2 {
		t.Error("buildOutgoing modified the client's Via")
	}
}

// Package bench compares the gateway with a bare httputil.ReverseProxy on
// the same loopback backend, and measures how late deadline answers are.
// Run it with `make bench`; read it with benchstat -col /impl.
package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"fngateway/adapters/httpapi"
	"fngateway/core"
	"fngateway/internal/settings"
)

const smallBody = `{"ok":true,"model":"bench","tokens":42}`

// backend serves /small (a small JSON body) and /stream (64 KiB in 16
// flushed chunks), and /hang (never answers until cancelled).
func backend(tb testing.TB) *httptest.Server {
	chunk := strings.Repeat("x", 4096)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/small":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, smallBody)
		case "/stream":
			w.Header().Set("Content-Type", "text/event-stream")
			for range 16 {
				io.WriteString(w, chunk)
				w.(http.Flusher).Flush()
			}
		case "/hang":
			<-r.Context().Done()
		}
	}))
	tb.Cleanup(srv.Close)
	return srv
}

func transport() *http.Transport {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
	}
}

// gateway serves the real gateway handler in front of target.
func gateway(tb testing.TB, target string, extraRoutes string) *httptest.Server {
	tb.Helper()
	s := benchSettings(tb, target)
	if extraRoutes != "" {
		if err := s.Routes.Decode(extraRoutes); err != nil {
			tb.Fatal(err)
		}
	}
	stats := &core.Stats{}
	h := &httpapi.Handler{
		Settings:  s,
		Forwarder: &core.Forwarder{Transport: core.NewTransport(), BackoffBase: s.RetryBackoffMs.D(), Stats: stats, Ejector: &core.Ejector{}},
		Stats:     stats,
		Logger:    slog.New(slog.DiscardHandler),
	}
	h.Init()
	srv := httptest.NewServer(h)
	tb.Cleanup(srv.Close)
	return srv
}

// benchSettings are the contract's defaults with target as Hosts.
func benchSettings(tb testing.TB, target string) *settings.Settings {
	tb.Helper()
	d := settings.DefaultSettings() // the one source of defaults
	s := &d
	s.AsyncStore = "file:unused"
	if err := s.Hosts.Decode(target); err != nil {
		tb.Fatal(err)
	}
	return s
}

// bare serves a plain httputil.ReverseProxy in front of target.
func bare(tb testing.TB, target string) *httptest.Server {
	u, _ := url.Parse(target)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = transport()
	rp.ErrorLog = nil
	srv := httptest.NewServer(rp)
	tb.Cleanup(srv.Close)
	return srv
}

func client() *http.Client {
	return &http.Client{Transport: transport(), Timeout: 30 * time.Second}
}

func get(b *testing.B, c *http.Client, url string) {
	resp, err := c.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("status %d", resp.StatusCode)
	}
}

// BenchmarkProxy measures throughput through the gateway and through a
// bare ReverseProxy (and straight to the backend, the floor), for a small
// body and a streamed one. ns/op with RunParallel is the inverse of
// throughput; req/s is reported too.
func BenchmarkProxy(b *testing.B) {
	be := backend(b)
	impls := []struct {
		name string
		url  string
	}{
		{"direct", be.URL},
		{"bare", bare(b, be.URL).URL},
		{"gateway", gateway(b, be.URL, "").URL},
	}
	// Warm every path first, so that the order of the runs below does not
	// favour the later ones (connection pools, heap size, CPU caches).
	wc := client()
	for range 300 {
		for _, impl := range impls {
			for _, body := range []string{"small", "stream"} {
				get(b, wc, impl.url+"/"+body)
			}
		}
	}
	for _, body := range []string{"small", "stream"} {
		for _, impl := range impls {
			b.Run(fmt.Sprintf("body=%s/impl=%s", body, impl.name), func(b *testing.B) {
				c := client()
				u := impl.url + "/" + body
				get(b, c, u) // warm the connections
				b.ReportAllocs()
				b.SetParallelism(4)
				start := time.Now()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						get(b, c, u)
					}
				})
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
			})
		}
	}
}

// BenchmarkLatency measures one request at a time: the gateway's added
// latency is its ns/op less the bare proxy's (or the direct one's).
func BenchmarkLatency(b *testing.B) {
	be := backend(b)
	for _, impl := range []struct{ name, url string }{
		{"direct", be.URL}, {"bare", bare(b, be.URL).URL}, {"gateway", gateway(b, be.URL, "").URL},
	} {
		b.Run("body=small/impl="+impl.name, func(b *testing.B) {
			c := client()
			u := impl.url + "/small"
			get(b, c, u)
			b.ReportAllocs()
			for b.Loop() {
				get(b, c, u)
			}
		})
	}
}

// BenchmarkDeadline504 measures how late the 504 is sent after the TTL:
// each request carries a 20 ms TTL to a backend that never answers.
func BenchmarkDeadline504(b *testing.B) {
	be := backend(b)
	gw := gateway(b, be.URL, "")
	measureLate(b, "GET", gw.URL+"/hang", map[string]string{"S7PTTL": "0.02"}, 504, 20*time.Millisecond, "late")
}

// measureLate sends one request per iteration and reports how long after
// expected each answer (of status want) came: on average and at worst, as
// <name>-ms/op and worst-<name>-ms.
func measureLate(b *testing.B, method, url string, hdr map[string]string, want int, expected time.Duration, name string) {
	c := client()
	var total, worst time.Duration
	for b.Loop() {
		req, _ := http.NewRequestWithContext(context.Background(), method, url, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		start := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			b.Fatalf("status %d; want %d", resp.StatusCode, want)
		}
		d := time.Since(start) - expected
		total += d
		worst = max(worst, d)
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, name+"-ms/op")
	b.ReportMetric(float64(worst.Microseconds())/1000, "worst-"+name+"-ms")
}

package bench

import (
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"fngateway/internal/testutil"
)

// slowUploads is how many trickling uploads BenchmarkLatencyDuringSlowUploads
// keeps open, as the end-to-end TestSlowUploadsBounded does.
const slowUploads = 31

// BenchmarkLatencyDuringSlowUploads measures one normal request at a time
// while 31 buffered uploads trickle their bodies into the gateway, one
// byte every 500 ms under a 10-minute TTL: p50-ms and worst-ms are the
// normal request's latency, the figure the end-to-end test
// TestSlowUploadsBounded (which only checks that the normal requests are
// answered while the uploads are open) does not bound.
func BenchmarkLatencyDuringSlowUploads(b *testing.B) {
	be := backend(b)
	gw := gateway(b, be.URL, "")
	addr := strings.TrimPrefix(gw.URL, "http://")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	b.Cleanup(func() { close(stop); wg.Wait() })
	for range slowUploads {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.WriteString(conn, "POST /upload HTTP/1.1\r\nHost: gw\r\nContent-Length: 100\r\nS7PTTL: 600\r\n\r\nx"); err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close()
			testutil.Trickle(conn, 500*time.Millisecond, 99, stop)
		}()
	}
	c := client()
	u := gw.URL + "/small"
	get(b, c, u)
	lat := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		get(b, c, u)
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "worst-ms")
}

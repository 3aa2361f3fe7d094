package bench

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"
)

// BenchmarkEjection measures the latency of requests to a route of three
// hosts whose first one hangs (it accepts the request and never answers),
// with a 100 ms Timeout, one request at a time: with outlier ejection on
// (ejectAfterFailures 5, ejectForMs 1000, so the dead host comes back and
// is ejected again, for 2 s, 4 s, …) and off. It reports the p50 and p99
// latency in ms; run it with a fixed count, such as -benchtime 2000x, since
// the percentiles depend on how many requests there are.
//
// It is slow: with -benchtime 2000x it takes about 4 minutes, since each of
// the 2000 requests without ejection waits out the 100 ms Timeout (2000 ×
// ~116 ms ≈ 232 s). Under make bench (-benchtime 1s, -count 6) it takes
// about 15 s.
func BenchmarkEjection(b *testing.B) {
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	b.Cleanup(dead.Close)
	good1, good2 := backend(b), backend(b)
	for _, mode := range []struct{ name, eject string }{{"on", `"ejectAfterFailures":5,"ejectForMs":1000`}, {"off", `"ejectAfterFailures":0`}} {
		b.Run("eject="+mode.name, func(b *testing.B) {
			routes := fmt.Sprintf(`[{"prefix":"/small","hosts":[%q,%q,%q],"timeoutMs":100,%s}]`, dead.URL, good1.URL, good2.URL, mode.eject)
			gw := gateway(b, good1.URL, routes)
			c := client()
			u := gw.URL + "/small"
			lat := make([]time.Duration, 0, b.N)
			for b.Loop() {
				start := time.Now()
				get(b, c, u)
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			pct := func(p float64) float64 {
				return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
			}
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
		})
	}
}

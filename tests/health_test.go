package tests

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// TestClientTimeoutEjectsNoHost: five requests whose S7PTimeout is far
// below what a healthy host needs are cut at it, but a host judged by
// what the client chose would be ejected for every client; a sixth request
// with the route's own Timeout goes to that host first and it answers
// (docs/security.md#host-health-and-client-chosen-budgets, issue 21).
func TestClientTimeoutEjectsNoHost(t *testing.T) {
	t.Parallel()
	a := newRecordingBackend(t, "a", 20*time.Millisecond) // healthy: answers in 20 ms
	b := newRecordingBackend(t, "b", 0)
	routes := fmt.Sprintf(`[{"prefix":"/e","hosts":[%q,%q],"ejectAfterFailures":5,"ejectForMs":60000}]`, a.URL, b.URL)
	gw := StartGateway(t, map[string]string{"Hosts": b.URL, "Routes": routes})
	for i := range 5 {
		resp, body, _ := Do(t, "GET", gw.URL+"/e/x", map[string]string{"S7PTimeout": "0.001"}, "")
		// Every attempt is cut at its 1 µs: the first one at a.
		ed := decodeError(t, resp, body)
		if resp.StatusCode != 504 || ed.Error.Code != "AttemptTimeout" || len(ed.Error.Attempts) == 0 ||
			"http://"+ed.Error.Attempts[0].Host != a.URL || ed.Error.Attempts[0].Outcome != "timeout" {
			t.Errorf("request %d with S7PTimeout 0.001: %d %s; want 504 AttemptTimeout, a first", i+1, resp.StatusCode, body)
		}
	}
	resp, body, _ := Do(t, "GET", gw.URL+"/e/x", nil, "")
	if resp.StatusCode != 200 || string(body) != "a" || resp.Header.Get("X-Attempts") != "1" {
		t.Errorf("sixth request: %d %q x-Attempts %s; want 200 from a, the healthy first host, in one attempt",
			resp.StatusCode, body, resp.Header.Get("X-Attempts"))
	}
	st := getStats(t, gw)
	ej, _ := json.Marshal(st["ejected_hosts"])
	if string(ej) != "[]" || st["ejections"] != float64(0) {
		t.Errorf("stats ejected_hosts %s, ejections %v; want none", ej, st["ejections"])
	}
}

package azurefunctions

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"
)

func TestHTTPDeadline(t *testing.T) {
	const s = time.Second
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	lb := HTTPLimit - HTTPLead // what is left of the load balancer's 230 s
	tests := []struct {
		name             string
		http             time.Duration
		started, arrival time.Time
		want             time.Time
	}{
		{"warm: the load balancer's clock ran HTTPLead before", HTTPLimit, t0, t0.Add(time.Hour), t0.Add(time.Hour + lb)},
		{"start unknown", HTTPLimit, time.Time{}, t0, t0.Add(lb)},
		{"cold: counted from the process's start", HTTPLimit, t0, t0.Add(3 * s), t0.Add(lb)},
		{"just past the start-up window", HTTPLimit, t0, t0.Add(HandlerStartLimit), t0.Add(HandlerStartLimit + lb)},
		{"functionTimeout shorter: the host's clock", 45 * s, t0, t0.Add(time.Hour), t0.Add(time.Hour + 45*s)},
		{"functionTimeout shorter, cold", 45 * s, t0, t0.Add(3 * s), t0.Add(48 * s)},
		{"cold, functionTimeout just under the load balancer's", 220 * s, t0, t0.Add(20 * s), t0.Add(lb)},
		{"arrival before the start (a clock step)", HTTPLimit, t0, t0.Add(-s), t0.Add(-s + lb)},
		{"no limit", 0, t0, t0.Add(s), time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Limits{HTTP: tt.http}.HTTPDeadline(tt.arrival, tt.started)
			if !got.Equal(tt.want) {
				t.Errorf("HTTPDeadline = %v after arrival; want %v", got.Sub(tt.arrival), tt.want.Sub(tt.arrival))
			}
		})
	}
}

// TestServerHTTPClock: the gateway's deadline on a forwarded request leaves
// HTTPLead of the load balancer's 230 s for what happened before the
// handler saw it, and, for a request the host held while the process
// started, the start-up too; so the gateway answers (504 or 202, a margin
// before this deadline) before the platform's 502. Before, the deadline was
// the handler's arrival plus 230 s.
func TestServerHTTPClock(t *testing.T) {
	tests := []struct {
		name    string
		startup time.Duration // from the process's start to the request
		want    time.Duration // from the request to its deadline
	}{
		{"warm", time.Hour, HTTPLimit - HTTPLead},
		{"held during a 4 s start-up", 4 * time.Second, HTTPLimit - HTTPLead - 4*time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var left time.Duration
				s := &Server{
					Limits:  Limits{Function: PlanDefault, Invocation: PlanDefault, HTTP: HTTPLimit},
					Started: time.Now(),
					Gateway: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						start := time.Now()
						<-r.Context().Done()
						left = time.Since(start)
						w.WriteHeader(http.StatusGatewayTimeout)
					}),
				}
				time.Sleep(tt.startup)
				req := httptest.NewRequest(http.MethodGet, "/slow", nil)
				req.RemoteAddr = "127.0.0.1:40000"
				rec := httptest.NewRecorder()
				s.ServeHTTP(rec, req)
				if left != tt.want {
					t.Errorf("the request's context ended %v after it reached the handler; want %v (the load balancer's %v less %v before)", left, tt.want, HTTPLimit, HTTPLimit-tt.want)
				}
			})
		})
	}
}

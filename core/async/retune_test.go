package async

import (
	"testing"
	"time"

	"fngateway/core"
)

// TestRetune: a reload's new async deadlines, forwarder and router apply
// to the calls that begin after Retune; the fields set at start-up apply
// before it.
func TestRetune(t *testing.T) {
	f1, f2 := &core.Forwarder{}, &core.Forwarder{}
	a := &Async{Forwarder: f1, TTL: time.Hour, Timeout: 10 * time.Second, TriggerTimeout: 3 * time.Second}
	if e := a.engine(); e.fwd != f1 || e.ttl != time.Hour || e.timeout != 10*time.Second || a.triggerTimeout() != 3*time.Second {
		t.Fatalf("before Retune: fwd %p ttl %v timeout %v trigger %v; want the fields'", e.fwd, e.ttl, e.timeout, a.triggerTimeout())
	}
	rt := core.NewRouter(nil, core.Route{})
	a.Retune(Tuning{Forwarder: f2, Router: rt, TTL: 2 * time.Hour, Timeout: 500 * time.Millisecond, TriggerTimeout: 7 * time.Second})
	e := a.engine()
	if e.fwd != f2 || e.router != rt || e.ttl != 2*time.Hour || e.timeout != 500*time.Millisecond || a.triggerTimeout() != 7*time.Second {
		t.Errorf("after Retune: fwd %p ttl %v timeout %v trigger %v; want the new ones", e.fwd, e.ttl, e.timeout, a.triggerTimeout())
	}
	if e.retryAfter != time.Second {
		t.Errorf("retryAfter %v with a 500 ms AsyncTimeout; want 1 s", e.retryAfter)
	}
}

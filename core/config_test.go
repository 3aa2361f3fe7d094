package core

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func FuzzParseRoutes(f *testing.F) {
	f.Add(`[{"prefix":"/a","hosts":["http://h:1"],"ttlSecs":2.5,"timeoutMs":100,"maxAttempts":2,"stream":true,"firstByteTimeoutMs":5,"idleTimeoutMs":6,"async":true}]`)
	f.Add(`[]`)
	f.Add(`[{"prefix":"/a","hedgeOnPerTryTimeout":true,"ejectAfterFailures":0,"ejectForMs":100,"auth":{"type":"entra","scope":"https://x/.default","clientAuthorizationHeader":"X-Client-Auth"}}]`)
	f.Add(`[{"prefix":"/s3","ejectAfterFailures":3,"auth":{"type":"sigv4","service":"s3","region":"eu-west-1"}}]`)
	f.Add(`[{"prefix":"/a"},{"prefix":"/a"}]`)
	f.Add(`[{"prefix":"/s3","methods":["GET","PUT"],"allowHeaders":["x-amz-meta-*"],"allowQuery":["tagging","comp=list"],"auth":{"type":"sigv4","service":"s3","region":"eu-west-1"}}]`)
	f.Add(`{"x":1}`)
	f.Fuzz(func(t *testing.T, in string) {
		rs, err := ParseRoutes([]byte(in))
		if err != nil {
			return
		}
		// Every accepted route is usable, and writing it back in the wire
		// form parses to the same routes.
		var wire []map[string]any
		for _, r := range rs {
			if !strings.HasPrefix(r.Prefix, "/") || r.TTL < 0 || r.Timeout < 0 || r.MaxAttempts < 0 {
				t.Fatalf("accepted an unusable route %+v from %q", r, in)
			}
			m := map[string]any{"prefix": r.Prefix, "stream": r.Stream}
			if r.Hosts != nil {
				var hs []string
				for _, h := range r.Hosts {
					hs = append(hs, h.String())
				}
				m["hosts"] = hs
			}
			if r.TTL > 0 {
				m["ttlSecs"] = r.TTL.Seconds()
			}
			if r.Timeout > 0 {
				m["timeoutMs"] = r.Timeout.Milliseconds()
			}
			if r.MaxAttempts > 0 {
				m["maxAttempts"] = r.MaxAttempts
			}
			if r.Async != nil {
				m["async"] = *r.Async
			}
			m["hedgeOnPerTryTimeout"] = r.HedgeOnPerTryTimeout
			switch {
			case r.EjectAfterFailures < 0:
				m["ejectAfterFailures"] = 0
			case r.EjectAfterFailures > 0:
				m["ejectAfterFailures"] = r.EjectAfterFailures
			}
			if r.EjectFor > 0 {
				m["ejectForMs"] = r.EjectFor.Milliseconds()
			}
			if r.Auth != nil {
				if r.Auth.validate() != nil {
					t.Fatalf("accepted an invalid auth %+v from %q", *r.Auth, in)
				}
				m["auth"] = r.Auth
			}
			for k, v := range map[string][]string{"methods": r.Methods, "allowHeaders": r.AllowHeaders, "allowQuery": r.AllowQuery} {
				if v != nil {
					m[k] = v
				}
			}
			wire = append(wire, m)
		}
		if wire == nil {
			wire = []map[string]any{}
		}
		out, _ := json.Marshal(wire)
		back, err := ParseRoutes(out)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", out, err)
		}
		if len(back) != len(rs) {
			t.Fatalf("re-parse of %s gave %d routes; want %d", out, len(back), len(rs))
		}
		for i := range rs {
			if back[i].Prefix != rs[i].Prefix || back[i].Hosts.String() != rs[i].Hosts.String() || back[i].MaxAttempts != rs[i].MaxAttempts ||
				back[i].HedgeOnPerTryTimeout != rs[i].HedgeOnPerTryTimeout || back[i].EjectAfterFailures != rs[i].EjectAfterFailures ||
				back[i].EjectFor != rs[i].EjectFor || (back[i].Auth == nil) != (rs[i].Auth == nil) || back[i].Auth != nil && *back[i].Auth != *rs[i].Auth ||
				!slices.Equal(back[i].Methods, rs[i].Methods) || !slices.Equal(back[i].AllowHeaders, rs[i].AllowHeaders) || !slices.Equal(back[i].AllowQuery, rs[i].AllowQuery) {
				t.Fatalf("route %d: %+v after round trip; want %+v", i, back[i], rs[i])
			}
		}
	})
}

func FuzzParseProfiles(f *testing.F) {
	f.Add(`[{"userId":"u","async-config":{"enabled":true,"containername":"abc","topic":"t"}}]`)
	f.Add(`[{"userId":""}]`)
	f.Add(`[{"userId":"u","async-config":{"containername":"gateway"}}]`)
	f.Fuzz(func(t *testing.T, in string) {
		ps, err := ParseProfiles([]byte(in))
		if err != nil {
			return
		}
		for id, p := range ps {
			if id == "" || id != p.UserID {
				t.Fatalf("profile keyed %q has userId %q", id, p.UserID)
			}
			if c := p.Async.ContainerName; c != "" && !ValidContainer(c) || c == StateContainer || strings.HasPrefix(c, "azure-webjobs-") {
				t.Fatalf("accepted container name %q", c)
			}
		}
	})
}

// TestNilStats: a nil *Stats counts nothing and does not panic.
func TestNilStats(t *testing.T) {
	var s *Stats
	s.CountRequest()
	s.CountEnd(ReasonClientGone)
	s.CountBackendCut()
	s.countCut(ErrIdleTimeout)
	s.countTimeout(CauseTTL)
	if got := s.Snapshot()["requests"]; got != 0 {
		t.Errorf("nil Snapshot requests = %d; want 0", got)
	}
}

func TestByteBudget(t *testing.T) {
	b := NewByteBudget(100)
	if !b.Acquire(60) || b.Acquire(41) || !b.Acquire(40) || b.Acquire(1) {
		t.Fatalf("budget of 100: want 60 and 40 granted, 41 and 1 refused; in use %d", b.InUse())
	}
	b.Release(60)
	if got := b.InUse(); got != 40 {
		t.Errorf("in use = %d; want 40", got)
	}
	if b.Acquire(-1) {
		t.Error("a negative size was granted")
	}
	huge := NewByteBudget(1 << 62)
	if !huge.Acquire(1<<62) || huge.Acquire(1<<62) {
		t.Error("a budget near the int64 limit overflowed")
	}
}

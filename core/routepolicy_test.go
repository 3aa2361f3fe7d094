package core

import (
	"strings"
	"testing"
	"time"

	"fngateway/internal/testutil"
)

func TestParseRoutePolicy(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string // a fragment of the error; "" for none
		check   func(t *testing.T, r Route, eff *Route)
	}{
		{name: "defaults", in: `[{"prefix":"/a"}]`, check: func(t *testing.T, r Route, eff *Route) {
			if r.HedgeOnPerTryTimeout || r.Auth != nil {
				t.Errorf("route %+v; want no hedging, no auth", r)
			}
			if eff.EjectAfterFailures != 5 || eff.EjectFor != 30*time.Second {
				t.Errorf("effective ejection %d after %v; want 5 and 30s", eff.EjectAfterFailures, eff.EjectFor)
			}
		}},
		{name: "all set", in: `[{"prefix":"/a","hedgeOnPerTryTimeout":true,"ejectAfterFailures":3,"ejectForMs":1500,"auth":{"type":"sigv4","service":"s3","region":"eu-west-1"}}]`,
			check: func(t *testing.T, r Route, eff *Route) {
				if !eff.HedgeOnPerTryTimeout || eff.EjectAfterFailures != 3 || eff.EjectFor != 1500*time.Millisecond ||
					*eff.Auth != (BackendAuth{Type: "sigv4", Service: "s3", Region: "eu-west-1"}) {
					t.Errorf("effective route %+v", *eff)
				}
			}},
		{name: "ejection off", in: `[{"prefix":"/a","ejectAfterFailures":0}]`, check: func(t *testing.T, r Route, eff *Route) {
			if eff.EjectAfterFailures >= 0 {
				t.Errorf("ejectAfterFailures 0 → %d; want off (negative)", eff.EjectAfterFailures)
			}
		}},
		{name: "entra", in: `[{"prefix":"/a","auth":{"type":"entra","scope":"https://cognitiveservices.azure.com/.default"}}]`},
		{name: "negative ejectAfterFailures", in: `[{"prefix":"/a","ejectAfterFailures":-1}]`, wantErr: "ejectAfterFailures"},
		{name: "zero ejectForMs", in: `[{"prefix":"/a","ejectForMs":0}]`, wantErr: "ejectForMs"},
		{name: "unknown auth type", in: `[{"prefix":"/a","auth":{"type":"basic"}}]`, wantErr: `type "basic": want entra or sigv4`},
		{name: "entra scope without .default", in: `[{"prefix":"/a","auth":{"type":"entra","scope":"https://x"}}]`, wantErr: "scope"},
		{name: "sigv4 without region", in: `[{"prefix":"/a","auth":{"type":"sigv4","service":"s3"}}]`, wantErr: "region"},
		{name: "sigv4 bad service", in: `[{"prefix":"/a","auth":{"type":"sigv4","service":"S3 ","region":"x"}}]`, wantErr: "service"},
		{name: "unknown auth key", in: `[{"prefix":"/a","auth":{"type":"entra","scope":"a/.default","secret":"x"}}]`, wantErr: `unknown field "secret"`},
		{name: "client auth kept as Authorization", in: `[{"prefix":"/a","auth":{"type":"entra","scope":"a/.default","clientAuthorizationHeader":"authorization"}}]`, wantErr: "clientAuthorizationHeader"},
		{name: "client auth under a bad name", in: `[{"prefix":"/a","auth":{"type":"entra","scope":"a/.default","clientAuthorizationHeader":"X Y"}}]`, wantErr: "clientAuthorizationHeader"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs, err := ParseRoutes([]byte(tt.in))
			if tt.wantErr != "" {
				named := strings.Contains(tt.wantErr, "unknown field") || err != nil && strings.Contains(err.Error(), `prefix "/a"`)
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !named {
					t.Fatalf("err = %v; want one naming the route and %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			rt := NewRouter(rs, Route{Hosts: testutil.Hosts(t, "h"), TTL: time.Minute, Timeout: time.Second})
			if tt.check != nil {
				tt.check(t, rs[0], rt.Match("/a"))
			}
		})
	}
}

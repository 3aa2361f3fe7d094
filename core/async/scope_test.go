package async

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestIdempotencyScopedToCaller: a client's Idempotency-Key names the same
// request only for the same profile and the same caller: the values of the
// scope headers (Authorization by default) and the identity the platform
// verified (WithCaller). Before, the second caller with the same key and
// request got the first caller's Accepted, and so its result, with no
// backend call.
func TestIdempotencyScopedToCaller(t *testing.T) {
	const first = "Bearer token-of-alice"
	tests := []struct {
		name         string
		scope        []string // Async.ScopeHeaders; nil: the default
		header       http.Header
		caller       string
		wantSameAsID bool
	}{
		{"same caller", nil, http.Header{"Authorization": {first}}, "", true},
		{"another Authorization", nil, http.Header{"Authorization": {"Bearer token-of-mallory"}}, "", false},
		{"no Authorization", nil, http.Header{}, "", false},
		{"a second Authorization value", nil, http.Header{"Authorization": {first, "x"}}, "", false},
		{"another verified caller", nil, http.Header{"Authorization": {first}}, "aws-iam:arn:aws:iam::1:user/mallory", false},
		{"a header outside the scope differs", nil, http.Header{"Authorization": {first}, "X-Api-Key": {"k2"}}, "", true},
		{"a scope header differs", []string{"Authorization", "X-Api-Key"}, http.Header{"Authorization": {first}, "X-Api-Key": {"k2"}}, "", false},
		{"the principal header is not an identity", nil, http.Header{"Authorization": {first}, "X-Ms-Client-Principal-Id": {"someone"}}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newRunEnv(t, asyncAfter(time.Minute, asyncOK), false, 4)
				e.a.ScopeHeaders = tt.scope
				req := e.runRequest("key-1")
				req.Header.Set("Authorization", first)
				req.Header.Set("X-Api-Key", "k1")
				_, acc1, err := e.a.Run(context.Background(), req, e.profile)
				if err != nil || acc1 == nil {
					t.Fatalf("first Run = %v, %v", acc1, err)
				}
				req2 := e.runRequest("key-1")
				for k, v := range tt.header {
					req2.Header[k] = v
				}
				ctx := WithCaller(context.Background(), tt.caller)
				_, acc2, err := e.a.Run(ctx, req2, e.profile)
				if err != nil || acc2 == nil {
					t.Fatalf("second Run = %v, %v", acc2, err)
				}
				if same := acc2.ID == acc1.ID; same != tt.wantSameAsID {
					t.Errorf("second caller got id %s, first %s: same = %v; want %v", acc2.ID, acc1.ID, same, tt.wantSameAsID)
				}
				wantCalls := 2
				if tt.wantSameAsID {
					wantCalls = 1
				}
				if got := e.backend.count(); got != wantCalls {
					t.Errorf("backend calls = %d; want %d", got, wantCalls)
				}
				// The credential is in no idempotency key or entry.
				for _, k := range e.store.keys("") {
					if !strings.HasPrefix(k, asyncIdempotencyPrefix) {
						continue
					}
					o, _ := e.store.object(k)
					for _, secret := range []string{"token-of-alice", "token-of-mallory", "mallory"} {
						if strings.Contains(k, secret) || bytes.Contains(o.data, []byte(secret)) {
							t.Errorf("idempotency entry %s holds %q in clear", k, secret)
						}
					}
				}
			})
		})
	}
}

// TestCallerScopeUnambiguous: credentials that differ only in how their
// parts split never share a scope.
func TestCallerScopeUnambiguous(t *testing.T) {
	a := &Async{ScopeHeaders: []string{"A", "B"}}
	bg := context.Background()
	scopes := map[string]string{}
	for name, s := range map[string]string{
		"A=x,B=y":      a.idempotency().callerScope(bg, http.Header{"A": {"x"}, "B": {"y"}}),
		"A=xB=y":       a.idempotency().callerScope(bg, http.Header{"A": {"xB=y"}}),
		"A=x,y":        a.idempotency().callerScope(bg, http.Header{"A": {"x", "y"}}),
		"A=x y":        a.idempotency().callerScope(bg, http.Header{"A": {"x y"}}),
		"B=x":          a.idempotency().callerScope(bg, http.Header{"B": {"x"}}),
		"none":         a.idempotency().callerScope(bg, http.Header{}),
		"empty A":      a.idempotency().callerScope(bg, http.Header{"A": {""}}),
		"caller x":     a.idempotency().callerScope(WithCaller(bg, "x"), http.Header{}),
		"A=x caller x": a.idempotency().callerScope(WithCaller(bg, "x"), http.Header{"A": {"x"}}),
	} {
		if other, dup := scopes[s]; dup {
			t.Errorf("%s and %s share a scope", name, other)
		}
		scopes[s] = name
	}
}

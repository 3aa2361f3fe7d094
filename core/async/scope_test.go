package async

import (
	"bytes"
	"context"
	"errors"
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
		"A=x,B=y":      a.engine().idempotency().callerScope(bg, http.Header{"A": {"x"}, "B": {"y"}}),
		"A=xB=y":       a.engine().idempotency().callerScope(bg, http.Header{"A": {"xB=y"}}),
		"A=x,y":        a.engine().idempotency().callerScope(bg, http.Header{"A": {"x", "y"}}),
		"A=x y":        a.engine().idempotency().callerScope(bg, http.Header{"A": {"x y"}}),
		"B=x":          a.engine().idempotency().callerScope(bg, http.Header{"B": {"x"}}),
		"none":         a.engine().idempotency().callerScope(bg, http.Header{}),
		"empty A":      a.engine().idempotency().callerScope(bg, http.Header{"A": {""}}),
		"caller x":     a.engine().idempotency().callerScope(WithCaller(bg, "x"), http.Header{}),
		"caller y":     a.engine().idempotency().callerScope(WithCaller(bg, "y"), http.Header{}),
		"caller c0:\n": a.engine().idempotency().callerScope(WithCaller(bg, "c0:\n"), http.Header{}),
	} {
		if other, dup := scopes[s]; dup {
			t.Errorf("%s and %s share a scope", name, other)
		}
		scopes[s] = name
	}
	// A verified caller is its identity, whatever headers it sends: a
	// SigV4 signature or a refreshed token changes nothing.
	if x, xa := a.engine().idempotency().callerScope(WithCaller(bg, "x"), http.Header{}), a.engine().idempotency().callerScope(WithCaller(bg, "x"), http.Header{"A": {"sig-2"}}); x != xa {
		t.Errorf("verified caller x with and without header A: scopes %s and %s; want one", x, xa)
	}
}

// TestIdempotencyVerifiedCallerOnly: a caller the platform verified keeps
// its Idempotency-Keys across requests whose scope headers differ (a SigV4
// Authorization differs on every request), and another verified caller
// with the same key and headers is another request. Before, the scope
// hashed both, so a verified caller's key never deduplicated when its
// Authorization changed.
func TestIdempotencyVerifiedCallerOnly(t *testing.T) {
	const alice, mallory = "aws-iam:arn:aws:iam::1:user/alice", "aws-iam:arn:aws:iam::1:user/mallory"
	tests := []struct {
		name     string
		caller   string
		auth     string
		wantSame bool
	}{
		{"same caller, another signature", alice, "AWS4-HMAC-SHA256 Signature=2", true},
		{"another caller, same signature", mallory, "AWS4-HMAC-SHA256 Signature=1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newRunEnv(t, asyncAfter(time.Minute, asyncOK), false, 4)
				req := e.runRequest("key-1")
				req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Signature=1")
				_, acc1, err := e.a.Run(WithCaller(context.Background(), alice), req, e.profile)
				if err != nil || acc1 == nil {
					t.Fatalf("first Run = %v, %v", acc1, err)
				}
				req2 := e.runRequest("key-1")
				req2.Header.Set("Authorization", tt.auth)
				_, acc2, err := e.a.Run(WithCaller(context.Background(), tt.caller), req2, e.profile)
				if err != nil || acc2 == nil {
					t.Fatalf("second Run = %v, %v", acc2, err)
				}
				if same := acc2.ID == acc1.ID; same != tt.wantSame {
					t.Errorf("ids %s, %s: same = %v; want %v", acc1.ID, acc2.ID, same, tt.wantSame)
				}
			})
		})
	}
}

// TestCancelBySubmitter (docs/async-api.md#cancellation): a request scoped to a caller — a
// verified identity, or scope headers — is cancelled only by that caller;
// to any other a DELETE is ErrNotFound, as for an unknown id, and changes
// nothing. A request scoped to no caller is cancelled by whoever holds
// its status URI. The record keeps a digest of the caller, never the
// credential. Before, anyone with the status URI could cancel.
func TestCancelBySubmitter(t *testing.T) {
	const alice, mallory = "aws-iam:arn:aws:iam::1:user/alice", "aws-iam:arn:aws:iam::1:user/mallory"
	tests := []struct {
		name          string
		caller        string
		header        http.Header
		cancelCaller  string
		cancelHeader  http.Header
		wantCancelled bool
	}{
		{"verified caller: another caller", alice, nil, mallory, nil, false},
		{"verified caller: anonymous", alice, nil, "", nil, false},
		{"verified caller: a forged header is no identity", alice, nil, "", http.Header{"X-Ms-Client-Principal-Id": {alice}}, false},
		{"verified caller: the submitter, signed anew", alice, http.Header{"Authorization": {"sig-1"}}, alice, http.Header{"Authorization": {"sig-2"}}, true},
		{"scope header: another token", "", http.Header{"Authorization": {"Bearer token-of-alice"}}, "", http.Header{"Authorization": {"Bearer token-of-mallory"}}, false},
		{"scope header: none", "", http.Header{"Authorization": {"Bearer token-of-alice"}}, "", nil, false},
		{"scope header: the submitter", "", http.Header{"Authorization": {"Bearer token-of-alice"}}, "", http.Header{"Authorization": {"Bearer token-of-alice"}}, true},
		{"scoped to no caller: anyone", "", nil, mallory, http.Header{"Authorization": {"Bearer token-of-mallory"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newAsyncEnv(t, asyncOK)
				req := asyncRequest()
				for k, v := range tt.header {
					req.Header[k] = v
				}
				acc, _, err := e.a.Submit(WithCaller(context.Background(), tt.caller), req, e.profile, false)
				if err != nil {
					t.Fatal(err)
				}
				rec := e.store.record(t, acc.ID)
				if scoped := tt.caller != "" || tt.header != nil; scoped != (rec.Submitter != "") {
					t.Errorf("record submitter = %q; want one: %v", rec.Submitter, scoped)
				}
				// The caller is kept as a digest. (The request's own
				// headers are in its snapshot, to be sent again.)
				if raw, _, _ := e.store.Get(context.Background(), asyncRecordKey(acc.ID)); bytes.Contains(raw, []byte("user/alice")) {
					t.Errorf("record holds the caller's identity in clear: %s", raw)
				}
				_, _, err = e.a.Cancel(WithCaller(context.Background(), tt.cancelCaller), acc.ID, tt.cancelHeader)
				if tt.wantCancelled {
					if err != nil {
						t.Fatalf("Cancel by the submitter = %v", err)
					}
					e.drain(t)
					e.cancelled(t, acc.ID)
					return
				}
				if !errors.Is(err, ErrNotFound) {
					t.Fatalf("Cancel by another caller = %v; want ErrNotFound", err)
				}
				if st := e.store.record(t, acc.ID).State; st != StateQueued {
					t.Errorf("state after another caller's cancel = %s; want queued", st)
				}
				// Reads stay capability URLs.
				if _, err := e.a.Status(WithCaller(context.Background(), tt.cancelCaller), acc.ID); err != nil {
					t.Errorf("Status by another caller = %v; want the view", err)
				}
			})
		})
	}
}

package core

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// capRoute parses one route of the Routes setting.
func capRoute(tb testing.TB, js string) *Route {
	tb.Helper()
	rs, err := ParseRoutes([]byte("[" + js + "]"))
	if err != nil {
		tb.Fatalf("ParseRoutes(%s): %v", js, err)
	}
	return &rs[0]
}

const (
	s3Auth      = `"auth":{"type":"sigv4","service":"s3","region":"us-east-1"}`
	storageAuth = `"auth":{"type":"entra","scope":"https://storage.azure.com/.default","clientAuthorizationHeader":"X-Client-Authorization"}`
	ddbAuth     = `"auth":{"type":"sigv4","service":"dynamodb","region":"us-east-1"}`
)

func TestAdmit(t *testing.T) {
	tests := []struct {
		name   string
		route  string
		method string
		header map[string]string
		query  string
		want   Reason // ReasonNone: admitted
		names  []string
	}{
		{name: "no auth, no methods: anything", route: `{"prefix":"/a"}`, method: "DELETE",
			header: map[string]string{"X-Amz-Copy-Source": "/b/k", "X-Http-Method-Override": "PUT"}, query: "delete"},
		{name: "no auth, methods", route: `{"prefix":"/a","methods":["GET"]}`, method: "POST", want: ReasonMethodNotAllowed, names: []string{"POST"}},
		{name: "no auth, methods, method override", route: `{"prefix":"/a","methods":["GET"]}`, method: "GET",
			header: map[string]string{"X-Http-Method-Override": "DELETE"}, want: ReasonHeaderNotAllowed, names: []string{"X-Http-Method-Override"}},
		{name: "no auth, methods, two method overrides", route: `{"prefix":"/a","methods":["GET"]}`, method: "GET",
			header: map[string]string{"X-Http-Method-Override": "DELETE", "X-Method-Override": "DELETE"}, want: ReasonHeaderNotAllowed,
			names: []string{"X-Http-Method-Override", "X-Method-Override"}},
		{name: "signed GET", route: `{"prefix":"/a",` + s3Auth + `}`, method: "GET",
			header: map[string]string{"Range": "bytes=0-1", "X-Amz-Date": "x", "X-Amz-Content-Sha256": "y", "X-Amz-Security-Token": "z"},
			query:  "response-content-type=text/plain"},
		{name: "signed PUT by default", route: `{"prefix":"/a",` + s3Auth + `}`, method: "PUT", want: ReasonMethodNotAllowed, names: []string{"PUT"}},
		{name: "signed lower-case method", route: `{"prefix":"/a",` + s3Auth + `}`, method: "get", want: ReasonMethodNotAllowed, names: []string{"get"}},
		{name: "copy source", route: `{"prefix":"/a","methods":["GET","PUT"],` + s3Auth + `}`, method: "PUT",
			header: map[string]string{"X-Amz-Copy-Source": "/other-bucket/payroll.csv"}, want: ReasonHeaderNotAllowed, names: []string{"X-Amz-Copy-Source"}},
		{name: "several", route: `{"prefix":"/a","methods":["PUT"],` + s3Auth + `}`, method: "PUT",
			header: map[string]string{"X-Amz-Acl": "public-read", "X-Amz-Grant-Read": "uri=x", "X-Amz-Website-Redirect-Location": "/x", "X-Amz-Bypass-Governance-Retention": "true"},
			want:   ReasonHeaderNotAllowed, names: []string{"X-Amz-Acl", "X-Amz-Bypass-Governance-Retention", "X-Amz-Grant-Read", "X-Amz-Website-Redirect-Location"}},
		{name: "underscore spelling", route: `{"prefix":"/a",` + s3Auth + `}`, method: "GET",
			header: map[string]string{"X_amz_copy_source": "/b/k"}, want: ReasonHeaderNotAllowed, names: []string{"X_amz_copy_source"}},
		{name: "signature header spelt otherwise", route: `{"prefix":"/a",` + s3Auth + `}`, method: "GET",
			header: map[string]string{"X_amz_date": "x"}, want: ReasonHeaderNotAllowed, names: []string{"X_amz_date"}},
		{name: "target", route: `{"prefix":"/a","methods":["POST"],` + ddbAuth + `}`, method: "POST",
			header: map[string]string{"X-Amz-Target": "DynamoDB_20120810.DeleteTable"}, want: ReasonHeaderNotAllowed, names: []string{"X-Amz-Target"}},
		{name: "target allowed by name", route: `{"prefix":"/a","methods":["POST"],"allowHeaders":["X-Amz-Target"],` + ddbAuth + `}`, method: "POST",
			header: map[string]string{"X-Amz-Target": "DynamoDB_20120810.GetItem"}},
		{name: "meta by prefix", route: `{"prefix":"/a","methods":["PUT"],"allowHeaders":["x-amz-meta-*"],` + s3Auth + `}`, method: "PUT",
			header: map[string]string{"X-Amz-Meta-Owner": "me"}},
		{name: "prefix does not cover others", route: `{"prefix":"/a","methods":["PUT"],"allowHeaders":["x-amz-meta-*"],` + s3Auth + `}`, method: "PUT",
			header: map[string]string{"X-Amz-Meta-Owner": "me", "X-Amz-Metadata-Directive": "REPLACE"}, want: ReasonHeaderNotAllowed, names: []string{"X-Amz-Metadata-Directive"}},
		{name: "s3 delete", route: `{"prefix":"/a","methods":["POST"],` + s3Auth + `}`, method: "POST", query: "delete", want: ReasonQueryNotAllowed, names: []string{"delete"}},
		{name: "s3 subresources", route: `{"prefix":"/a",` + s3Auth + `}`, method: "GET", query: "acl&versionId=3&response-expires=1",
			want: ReasonQueryNotAllowed, names: []string{"acl", "versionId"}},
		{name: "escaped name", route: `{"prefix":"/a",` + s3Auth + `}`, method: "GET", query: "%64elete", want: ReasonQueryNotAllowed, names: []string{"%64elete"}},
		{name: "plus in name", route: `{"prefix":"/a",` + s3Auth + `}`, method: "GET", query: "response-content-type+=x", want: ReasonQueryNotAllowed},
		{name: "semicolon", route: `{"prefix":"/a",` + s3Auth + `}`, method: "GET", query: "response-expires=1;delete", want: ReasonQueryNotAllowed, names: []string{";"}},
		{name: "storage defaults", route: `{"prefix":"/a",` + storageAuth + `}`, method: "GET",
			header: map[string]string{"X-Ms-Version": "2021-08-06", "X-Ms-Client-Request-Id": "1", "X-Ms-Range": "bytes=0-1"}, query: "timeout=30"},
		{name: "storage copy source", route: `{"prefix":"/a","methods":["PUT"],` + storageAuth + `}`, method: "PUT",
			header: map[string]string{"X-Ms-Version": "2021-08-06", "X-Ms-Copy-Source": "https://acct.blob.core.windows.net/c/b"}, want: ReasonHeaderNotAllowed, names: []string{"X-Ms-Copy-Source"}},
		{name: "storage comp", route: `{"prefix":"/a",` + storageAuth + `}`, method: "GET", query: "restype=container&comp=list",
			want: ReasonQueryNotAllowed, names: []string{"comp", "restype"}},
		{name: "storage comp allowed by value", route: `{"prefix":"/a","allowQuery":["restype=container","comp=list","prefix"],` + storageAuth + `}`, method: "GET",
			query: "restype=container&comp=list&prefix=a%2Fb"},
		{name: "storage comp other value", route: `{"prefix":"/a","methods":["POST"],"allowQuery":["restype=container","comp=list"],` + storageAuth + `}`, method: "POST",
			query: "restype=service&comp=userdelegationkey", want: ReasonQueryNotAllowed, names: []string{"comp=userdelegationkey", "restype=service"}},
		{name: "storage comp escaped value", route: `{"prefix":"/a","allowQuery":["comp=list"],` + storageAuth + `}`, method: "GET", query: "comp=%6cist"},
		{name: "empty value only", route: `{"prefix":"/a","allowQuery":["uploads="],` + s3Auth + `}`, method: "GET", query: "uploads"},
		{name: "client authorization header", route: `{"prefix":"/a",` + storageAuth + `}`, method: "GET",
			header: map[string]string{"X-Client-Authorization": "Bearer forged"}, want: ReasonHeaderNotAllowed, names: []string{"X-Client-Authorization"}},
		{name: "client authorization header with Authorization", route: `{"prefix":"/a",` + storageAuth + `}`, method: "GET",
			header: map[string]string{"Authorization": "Bearer mine", "X-Client-Authorization": "Bearer forged"}, want: ReasonHeaderNotAllowed, names: []string{"X-Client-Authorization"}},
		{name: "client Authorization alone", route: `{"prefix":"/a",` + storageAuth + `}`, method: "GET", header: map[string]string{"Authorization": "Bearer mine"}},
		{name: "other entra: query needs naming", route: `{"prefix":"/a","methods":["POST"],"auth":{"type":"entra","scope":"https://cognitiveservices.azure.com/.default"}}`,
			method: "POST", query: "api-version=2024-02-01", want: ReasonQueryNotAllowed, names: []string{"api-version"}},
		{name: "other entra: named", route: `{"prefix":"/a","methods":["POST"],"allowQuery":["api-version"],"auth":{"type":"entra","scope":"https://cognitiveservices.azure.com/.default"}}`,
			method: "POST", query: "api-version=2024-02-01", header: map[string]string{"Content-Type": "application/json"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := capRoute(t, tt.route)
			h := http.Header{}
			for k, v := range tt.header {
				h[k] = []string{v} // as written: the rule must not rely on canonical keys
			}
			e := r.Admit(tt.method, h, tt.query)
			if tt.want == ReasonNone {
				if e != nil {
					t.Fatalf("Admit = %v; want admitted", e)
				}
				return
			}
			if e == nil || e.Reason != tt.want {
				t.Fatalf("Admit = %v; want %s", e, tt.want.Code())
			}
			var na *NotAllowedError
			if !errors.As(e, &na) {
				t.Fatalf("Err = %#v; want a *NotAllowedError", e.Err)
			}
			if tt.names != nil && !slices.Equal(na.Names, tt.names) {
				t.Errorf("Names = %q; want %q", na.Names, tt.names)
			}
			for _, n := range na.Names {
				if !strings.Contains(e.Message, strconv.Quote(n)) {
					t.Errorf("message %q does not name %q", e.Message, n)
				}
			}
			if strings.Contains(e.Message, "()") {
				t.Errorf("message %q names an empty rule", e.Message)
			}
			if tt.want == ReasonMethodNotAllowed && (len(na.Allow) == 0 || e.HTTPStatus() != 405) {
				t.Errorf("405: Allow %q, status %d", na.Allow, e.HTTPStatus())
			}
			if tt.want != ReasonMethodNotAllowed && e.HTTPStatus() != 400 {
				t.Errorf("status %d; want 400", e.HTTPStatus())
			}
		})
	}
}

func TestParseCapability(t *testing.T) {
	tests := []struct {
		name, in, wantErr string
	}{
		{name: "defaults", in: `{"prefix":"/a",` + s3Auth + `}`},
		{name: "all keys", in: `{"prefix":"/a","methods":["GET","HEAD","PUT"],"allowHeaders":["x-amz-meta-*","X-Amz-Tagging"],"allowQuery":["tagging","comp=list","uploads="],` + s3Auth + `}`},
		{name: "methods without auth", in: `{"prefix":"/a","methods":["GET","PROPFIND"]}`},
		{name: "empty methods", in: `{"prefix":"/a","methods":[]}`, wantErr: "methods []: want at least one method"},
		{name: "lower-case method", in: `{"prefix":"/a","methods":["get"]}`, wantErr: `methods "get": want upper-case method names`},
		{name: "method with space", in: `{"prefix":"/a","methods":["GET "]}`, wantErr: `methods "GET ": want`},
		{name: "method twice", in: `{"prefix":"/a","methods":["GET","GET"]}`, wantErr: `methods "GET": listed twice`},
		{name: "methods not a list", in: `{"prefix":"/a","methods":"GET"}`, wantErr: "methods"},
		{name: "allowHeaders without auth", in: `{"prefix":"/a","allowHeaders":["x-amz-acl"]}`, wantErr: "allowHeaders: only a route with auth"},
		{name: "allowQuery without auth", in: `{"prefix":"/a","allowQuery":["delete"]}`, wantErr: "allowQuery: only a route with auth"},
		{name: "allowHeaders outside the namespaces", in: `{"prefix":"/a","allowHeaders":["Content-Type"],` + s3Auth + `}`, wantErr: `allowHeaders "Content-Type": want an x-amz-* or x-ms-* header`},
		{name: "allowHeaders whole namespace", in: `{"prefix":"/a","allowHeaders":["x-amz-*"],` + s3Auth + `}`, wantErr: `allowHeaders "x-amz-*": want a prefix narrower`},
		{name: "allowHeaders bad prefix", in: `{"prefix":"/a","allowHeaders":["x-amz-meta*"],` + s3Auth + `}`, wantErr: `allowHeaders "x-amz-meta*"`},
		{name: "allowHeaders signature", in: `{"prefix":"/a","allowHeaders":["X-Amz-Date"],` + s3Auth + `}`, wantErr: "the signature sets it"},
		{name: "allowHeaders not a name", in: `{"prefix":"/a","allowHeaders":["x-amz acl"],` + s3Auth + `}`, wantErr: `allowHeaders "x-amz acl": want a header name`},
		{name: "allowQuery escaped", in: `{"prefix":"/a","allowQuery":["%64elete"],` + s3Auth + `}`, wantErr: `allowQuery "%64elete": want a query parameter name`},
		{name: "allowQuery empty name", in: `{"prefix":"/a","allowQuery":["=x"],` + s3Auth + `}`, wantErr: `allowQuery "=x"`},
		{name: "allowQuery bad value", in: `{"prefix":"/a","allowQuery":["comp=a b"],` + s3Auth + `}`, wantErr: `allowQuery "comp=a b"`},
		{name: "unknown key", in: `{"prefix":"/a","allowHeader":["x-amz-acl"],` + s3Auth + `}`, wantErr: `unknown field "allowHeader"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseRoutes([]byte("[" + tt.in + "]"))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("err = %v; want none", err)
				}
				return
			}
			named := strings.Contains(tt.wantErr, "unknown field") || strings.Contains(tt.in, `"methods":"GET"`) ||
				err != nil && strings.Contains(err.Error(), `route 0 (prefix "/a")`)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !named {
				t.Fatalf("err = %v; want one naming the route and %q", err, tt.wantErr)
			}
		})
	}
}

// TestForwardRefusesWhatTheRouteDoesNotAllow: Forward itself admits (a
// continuation replays a stored request through it), and nothing reaches
// the transport.
func TestForwardRefusesWhatTheRouteDoesNotAllow(t *testing.T) {
	sent := 0
	f := &Forwarder{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
		sent++
		return nil, errors.New("unreachable")
	}), Authorizers: map[BackendAuth]Authorizer{}, Stats: &Stats{}}
	r := capRoute(t, `{"prefix":"/files","hosts":["http://127.0.0.1:9/bucket-a"],"methods":["GET","PUT"],`+s3Auth+`}`)
	r.MaxAttempts = 1
	now := time.Now()
	req := &Request{Method: "PUT", Path: "/files/x", Header: http.Header{"X-Amz-Copy-Source": {"/bucket-b/payroll.csv"}}, Route: r,
		Budget: Budget{Arrival: now, TTL: now.Add(time.Minute), Timeout: time.Minute}}
	_, err := f.Forward(context.Background(), req)
	if ReasonOf(err) != ReasonHeaderNotAllowed || sent != 0 {
		t.Fatalf("Forward = %v, %d sent; want HeaderNotAllowed and nothing sent", err, sent)
	}
	if n := f.Stats.EndBadRequest.Load(); n != 1 {
		t.Errorf("end_bad_request = %d; want 1", n)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// capOracle is an independent statement of what a signed route may send:
// the route's methods, x-amz-*/x-ms-* headers only when documented or
// named, never the client-authorization header from the client, and query
// parameters only when documented or named — whichever way a backend
// splits and decodes the query.
type capOracle struct {
	methods    []string
	headers    []string // lower case; "p-*" for prefixes
	query      []string // "name" or "name=value"
	clientAuth string   // lower case
}

func (o capOracle) headerOK(k string) bool {
	n := strings.ReplaceAll(strings.ToLower(k), "_", "-")
	if n == o.clientAuth || n == "x-http-method-override" || n == "x-http-method" || n == "x-method-override" {
		return false
	}
	if !strings.HasPrefix(n, "x-amz-") && !strings.HasPrefix(n, "x-ms-") {
		return true
	}
	for _, a := range o.headers {
		if p, ok := strings.CutSuffix(a, "*"); ok && strings.HasPrefix(n, p) || a == n {
			return true
		}
	}
	return false
}

// queryOK reports whether every parameter of raw, split on '&' and ';'
// and decoded as a path or as a form, is allowed.
func (o capOracle) queryOK(raw string) bool {
	for _, part := range strings.FieldsFunc(raw, func(r rune) bool { return r == '&' || r == ';' }) {
		name, value, _ := strings.Cut(part, "=")
		for _, dec := range []func(string) (string, error){url.QueryUnescape, url.PathUnescape} {
			n, err1 := dec(name)
			v, err2 := dec(value)
			if err1 != nil || err2 != nil {
				return false
			}
			if !slices.Contains(o.query, n) && !slices.Contains(o.query, n+"="+v) {
				return false
			}
		}
	}
	return true
}

func FuzzAdmit(f *testing.F) {
	routes := []struct {
		js     string
		oracle capOracle
	}{
		{`{"prefix":"/f","hosts":["http://s3.test/bucket-a"],` + s3Auth + `}`, capOracle{methods: []string{"GET", "HEAD"},
			headers: []string{"x-amz-date", "x-amz-security-token", "x-amz-content-sha256"}, query: ruleS3.query}},
		{`{"prefix":"/f","hosts":["http://s3.test/bucket-a"],"methods":["GET","PUT"],"allowHeaders":["x-amz-meta-*"],"allowQuery":["tagging=","partNumber"],` + s3Auth + `}`,
			capOracle{methods: []string{"GET", "PUT"}, headers: []string{"x-amz-date", "x-amz-security-token", "x-amz-content-sha256", "x-amz-meta-*"},
				query: append([]string{"tagging=", "partNumber"}, ruleS3.query...)}},
		{`{"prefix":"/f","hosts":["https://acct.blob.core.windows.net/c"],"methods":["GET","PUT","POST"],"allowQuery":["comp=list","restype=container"],` + storageAuth + `}`,
			capOracle{methods: []string{"GET", "PUT", "POST"}, headers: ruleAzureStorage.headers, query: []string{"timeout", "comp=list", "restype=container"},
				clientAuth: "x-client-authorization"}},
		{`{"prefix":"/f","hosts":["http://ddb.test"],"methods":["POST"],` + ddbAuth + `}`, capOracle{methods: []string{"POST"},
			headers: []string{"x-amz-date", "x-amz-security-token", "x-amz-content-sha256"}}},
	}
	f.Add(uint8(0), "GET", "X-Amz-Copy-Source: /b/k\nRange: bytes=0-1", "response-content-type=a&delete")
	f.Add(uint8(1), "PUT", "x-amz-meta-a: 1\nX_Amz_Acl: public-read", "tagging&partNumber=2")
	f.Add(uint8(2), "POST", "X-Client-Authorization: Bearer forged\nx-ms-version: 2021-08-06", "restype=service&comp=userdelegationkey")
	f.Add(uint8(2), "GET", "x-ms-copy-source: x", "comp=%6cist;comp=acl")
	f.Add(uint8(3), "POST", "X-Amz-Target: DynamoDB_20120810.DeleteTable", "")
	f.Add(uint8(0), "GET", "X-Amz-Date: 1\nx-amz-date: 2", "response-expires=1&%64elete")
	f.Fuzz(func(t *testing.T, which uint8, method, headerText, rawQuery string) {
		rc := routes[int(which)%len(routes)]
		r := capRoute(t, rc.js)
		h := http.Header{}
		for line := range strings.SplitSeq(headerText, "\n") {
			k, v, _ := strings.Cut(line, ":")
			if k == "" {
				continue
			}
			h[k] = append(h[k], strings.TrimSpace(v)) // as written, canonical or not
		}
		e := r.Admit(method, h, rawQuery)
		if e != nil {
			var na *NotAllowedError
			if !errors.As(e, &na) || len(na.Names) == 0 {
				t.Fatalf("refusal %v without the names refused", e)
			}
			for _, n := range na.Names[:min(len(na.Names), 5)] {
				if !strings.Contains(e.Message, strconv.Quote(trimText(n))) {
					t.Fatalf("message %q does not name %q", e.Message, n)
				}
			}
			switch e.Reason {
			case ReasonMethodNotAllowed:
				if slices.Contains(rc.oracle.methods, method) || na.Names[0] != method {
					t.Fatalf("method %q refused (%v); the route allows %q", method, e, rc.oracle.methods)
				}
			case ReasonHeaderNotAllowed:
				for _, n := range na.Names {
					// A refused header was sent, and is one the oracle
					// refuses too, or a signature header spelt otherwise
					// than the gateway replaces it.
					spelt := slices.ContainsFunc(sigV4Replaced, func(s string) bool { return HeaderKey(s) == HeaderKey(n) && s != n })
					if _, ok := h[n]; !ok || rc.oracle.headerOK(n) && !spelt {
						t.Fatalf("header %q refused (%v): not sent, or allowed", n, e)
					}
				}
			case ReasonQueryNotAllowed:
				for _, n := range na.Names {
					if !strings.Contains(rawQuery, n) {
						t.Fatalf("query %q refused (%v): not in %q", n, e, rawQuery)
					}
				}
			default:
				t.Fatalf("refusal %v; want a NotAllowed reason", e)
			}
			return
		}
		// Admitted: what reaches the backend carries nothing the route
		// does not allow.
		if !slices.Contains(rc.oracle.methods, method) {
			t.Fatalf("method %q admitted; the route allows %q", method, rc.oracle.methods)
		}
		path := "/f/x"
		out := buildOutgoing(context.Background(), &Request{Method: method, Path: path, RawQuery: rawQuery, Header: h, Route: r},
			path, r.Hosts[0], time.Second)
		for k, v := range out.Header {
			if ca := rc.oracle.clientAuth; ca != "" && HeaderKey(k) == ca && slices.Equal(v, h["Authorization"]) {
				continue // the gateway moved the caller's Authorization there
			}
			if !rc.oracle.headerOK(k) {
				t.Fatalf("admitted, and the backend gets header %q (headers %q, query %q)", k, headerText, rawQuery)
			}
		}
		if !rc.oracle.queryOK(out.URL.RawQuery) {
			t.Fatalf("admitted, and the backend gets query %q", out.URL.RawQuery)
		}
	})
}

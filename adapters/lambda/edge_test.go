package lambda

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"fngateway/core"
)

// TestRawPathEscaped: a rawPath holding '?' or '#' reaches the handler
// escaped, so no part of the path is read as a query or a fragment.
func TestRawPathEscaped(t *testing.T) {
	tests := []struct {
		rawPath, rawQuery, wantPath, wantQuery string
	}{
		{"/a?b#c", "x=1", "/a%3Fb%23c", "x=1"},
		{"/a?b", "", "/a%3Fb", ""},
		{"/a b/%E2%82%AC", "", "/a%20b/%E2%82%AC", ""},
		{"/plain/a%2Fb", "k=v", "/plain/a%2Fb", "k=v"},
	}
	for _, tt := range tests {
		t.Run(tt.rawPath, func(t *testing.T) {
			r, err := newRequest(context.Background(), urlEvent("u.lambda-url.x.on.aws", tt.rawPath, tt.rawQuery, nil, ""))
			if err != nil {
				t.Fatal(err)
			}
			if r.URL.EscapedPath() != tt.wantPath || r.URL.RawQuery != tt.wantQuery || r.URL.Fragment != "" {
				t.Errorf("path %q query %q fragment %q; want %q %q and no fragment", r.URL.EscapedPath(), r.URL.RawQuery, r.URL.Fragment, tt.wantPath, tt.wantQuery)
			}
		})
	}
}

// TestPlatformWord: the event's requestContext.timeEpoch is the platform's
// arrival, carried to the HTTP face; the X-Forwarded-For entry the
// platform appended for sourceIp is taken off (the gateway adds the
// client itself), what the client wrote before it is left for
// TrustedProxies to judge.
func TestPlatformWord(t *testing.T) {
	var e events.LambdaFunctionURLRequest
	json.Unmarshal(urlEvent("u.lambda-url.x.on.aws", "/p", "", nil, ""), &e)
	e.RequestContext.TimeEpoch = 1735689600123
	e.Headers["x-forwarded-for"] = "6.6.6.6, 203.0.113.9"
	b, _ := json.Marshal(e)
	r, err := newRequest(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if at, ok := core.PlatformArrival(r.Context()); !ok || !at.Equal(time.UnixMilli(1735689600123)) {
		t.Errorf("platform arrival %v, %v; want the event's timeEpoch", at, ok)
	}
	if got := r.Header.Get("X-Forwarded-For"); got != "6.6.6.6" || r.RemoteAddr != "203.0.113.9" {
		t.Errorf("X-Forwarded-For %q, RemoteAddr %q; want 6.6.6.6 and the sourceIp", got, r.RemoteAddr)
	}
	// Behind no trusted proxy the gateway drops the client's entries.
	if h, trusted := core.TrustedProxies(nil).Believe(r.Header, r.RemoteAddr); trusted || h.Get("X-Forwarded-For") != "" {
		t.Errorf("believed %v, X-Forwarded-For %q; want nothing believed", trusted, h.Get("X-Forwarded-For"))
	}
	e.Headers["x-forwarded-for"] = "203.0.113.9"
	b, _ = json.Marshal(e)
	if r, _ = newRequest(context.Background(), b); r.Header[http.CanonicalHeaderKey("x-forwarded-for")] != nil {
		t.Errorf("X-Forwarded-For %q; want none left", r.Header.Get("X-Forwarded-For"))
	}
}

package lambda

import (
	"context"
	"encoding/json"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"testing"

	"fngateway/core"
	"fngateway/core/async"
)

// TestCallerIdentity: the caller a Function URL with AuthType AWS_IAM
// verified (requestContext.authorizer.iam.userArn, in the exact shape of
// AWS's sample event) reaches the HTTP face as the request's verified
// caller (async.CallerOf), which scopes its Idempotency-Keys; an event
// without it has none, and no header a client sends can set it.
func TestCallerIdentity(t *testing.T) {
	const iamEvent = `{
  "version": "2.0", "routeKey": "$default", "rawPath": "/my/path", "rawQueryString": "parameter1=value1",
  "headers": {"header1": "value1", "x-ms-client-principal-id": "forged", "authorizer": "forged"},
  "requestContext": {
    "accountId": "123456789012", "apiId": "<urlid>",
    "authorizer": {"iam": {"accessKey": "AKIA...", "accountId": "111122223333", "callerId": "AIDA...",
      "cognitoIdentity": null, "principalOrgId": null,
      "userArn": "arn:aws:iam::111122223333:user/example-user", "userId": "AIDA..."}},
    "domainName": "<url-id>.lambda-url.us-west-2.on.aws", "domainPrefix": "<url-id>",
    "http": {"method": "POST", "path": "/my/path", "protocol": "HTTP/1.1", "sourceIp": "123.123.123.123", "userAgent": "agent"},
    "requestId": "id", "routeKey": "$default", "stage": "$default", "time": "12/Mar/2020:19:03:58 +0000", "timeEpoch": 1583348638390
  },
  "body": "Hello from client!", "isBase64Encoded": false
}`
	const noAuthEvent = `{
  "version": "2.0", "rawPath": "/my/path", "rawQueryString": "",
  "headers": {"x-ms-client-principal-id": "forged", "x-amzn-iam-userarn": "arn:aws:iam::1:user/forged"},
  "requestContext": {"domainName": "u.lambda-url.us-west-2.on.aws",
    "http": {"method": "GET", "path": "/my/path", "sourceIp": "123.123.123.123"}}
}`
	tests := []struct {
		name, event, want string
	}{
		{"AWS_IAM Function URL", iamEvent, "aws-iam:arn:aws:iam::111122223333:user/example-user"},
		{"no authorizer", noAuthEvent, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := "unset"
			h := &Handler{HTTP: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got = async.CallerOf(r.Context())
				w.WriteHeader(http.StatusNoContent)
			})}
			if _, err := h.Invoke(context.Background(), []byte(tt.event)); err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("verified caller = %q; want %q", got, tt.want)
			}
		})
	}
}

// TestSignatureRemoved: behind a Function URL with AuthType AWS_IAM
// (requestContext.authorizer.iam present) the caller's SigV4 headers and
// query parameters are gone before the HTTP face sees the request — they
// would let a backend send the signed request to the Function URL again —
// and every other header and parameter stays as the client wrote it.
// Without the authorizer (AuthType NONE) an Authorization header is the
// client's own and is left alone. Before, every one of them went on.
func TestSignatureRemoved(t *testing.T) {
	const signed = `{
  "version": "2.0", "rawPath": "/my/path", "rawQueryString": "a=1&X-Amz-Signature=abc&x-amz-credential=AKIA%2F20260101&b=%2F2",
  "headers": {"authorization": "AWS4-HMAC-SHA256 Credential=AKIA/20260101/us-east-1/lambda/aws4_request, SignedHeaders=host;x-amz-date, Signature=0123",
    "x-amz-date": "20260101T000000Z", "x-amz-security-token": "FwoGZXIvYXdzE", "x-amz-content-sha256": "UNSIGNED-PAYLOAD",
    "x-amz-meta-kept": "k", "accept": "*/*"},
  "requestContext": {"domainName": "u.lambda-url.us-east-1.on.aws",
    "authorizer": {"iam": {"accessKey": "AKIA", "accountId": "111122223333", "userArn": "arn:aws:iam::111122223333:user/alice", "userId": "AIDA"}},
    "http": {"method": "GET", "path": "/my/path", "sourceIp": "198.51.100.7"}}
}`
	const open = `{
  "version": "2.0", "rawPath": "/my/path", "rawQueryString": "X-Amz-Signature=abc",
  "headers": {"authorization": "Bearer client-own", "x-amz-date": "20260101T000000Z"},
  "requestContext": {"domainName": "u.lambda-url.us-east-1.on.aws", "http": {"method": "GET", "path": "/my/path", "sourceIp": "198.51.100.7"}}
}`
	// Issue 34: a signature after ';', which some servers take as a
	// separator, and the signature headers spelt with '_', which CGI and
	// WSGI backends read as the dashed ones.
	const spelt = `{
  "version": "2.0", "rawPath": "/my/path", "rawQueryString": "keep=1;X-Amz-Signature=abc;x-amz-security-token=t",
  "headers": {"x_amz_security_token": "FwoGZXIvYXdzE", "X_Amz_Date": "20260101T000000Z", "x-amz-meta-kept": "k"},
  "requestContext": {"domainName": "u.lambda-url.us-east-1.on.aws",
    "authorizer": {"iam": {"accessKey": "AKIA", "accountId": "111122223333", "userArn": "arn:aws:iam::111122223333:user/alice", "userId": "AIDA"}},
    "http": {"method": "GET", "path": "/my/path", "sourceIp": "198.51.100.7"}}
}`
	tests := []struct {
		name, event        string
		wantGone, wantKept []string
		wantQuery, wantURI string
	}{
		{"AWS_IAM, ';' and '_' spellings", spelt, []string{"X_amz_security_token", "X_amz_date"},
			[]string{"X-Amz-Meta-Kept"}, "keep=1", "/my/path?keep=1"},
		{"AWS_IAM", signed, []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-Sha256"},
			[]string{"X-Amz-Meta-Kept", "Accept"}, "a=1&b=%2F2", "/my/path?a=1&b=%2F2"},
		{"AuthType NONE", open, nil, []string{"Authorization", "X-Amz-Date"}, "X-Amz-Signature=abc", "/my/path?X-Amz-Signature=abc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got *http.Request
			h := &Handler{HTTP: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got = r
				w.WriteHeader(http.StatusNoContent)
			})}
			if _, err := h.Invoke(context.Background(), []byte(tt.event)); err != nil {
				t.Fatal(err)
			}
			for _, k := range tt.wantGone {
				if v, ok := got.Header[k]; ok {
					t.Errorf("%s = %q reached the HTTP face; want it removed", k, v)
				}
			}
			for _, k := range tt.wantKept {
				if _, ok := got.Header[k]; !ok {
					t.Errorf("%s removed; want it kept", k)
				}
			}
			if got.URL.RawQuery != tt.wantQuery || got.RequestURI != tt.wantURI {
				t.Errorf("query %q, RequestURI %q; want %q, %q", got.URL.RawQuery, got.RequestURI, tt.wantQuery, tt.wantURI)
			}
		})
	}
}

// FuzzSignatureRemoved: behind an AWS_IAM Function URL, whatever header
// and query a client sends, no spelling of a SigV4 header and no SigV4
// query parameter (split at '&' or ';') reaches the HTTP face, and every
// other header does.
func FuzzSignatureRemoved(f *testing.F) {
	f.Add("x_amz_security_token", "keep=1;X-Amz-Signature=abc")
	f.Add("Authorization", "x-amz-credential=a&b")
	f.Add("x-amz-meta-kept", "a=1")
	f.Fuzz(func(t *testing.T, name, rawQuery string) {
		event, err := json.Marshal(map[string]any{
			"version": "2.0", "rawPath": "/p", "rawQueryString": rawQuery,
			"headers": map[string]string{name: "v", "x-kept": "k"},
			"requestContext": map[string]any{"domainName": "u.lambda-url.us-east-1.on.aws",
				"authorizer": map[string]any{"iam": map[string]string{"userArn": "arn:aws:iam::1:user/a"}},
				"http":       map[string]string{"method": "GET", "sourceIp": "198.51.100.7"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		r, err := newRequest(context.Background(), event)
		if err != nil {
			return // refused whole: nothing reaches the HTTP face
		}
		for k := range r.Header {
			if slices.ContainsFunc(core.SigV4Headers, func(s string) bool { return core.HeaderKey(s) == core.HeaderKey(k) }) {
				t.Fatalf("header %q reached the HTTP face", k)
			}
		}
		if k := textproto.CanonicalMIMEHeaderKey(name); r.Header[k] == nil && !slices.ContainsFunc(core.SigV4Headers, func(s string) bool { return core.HeaderKey(s) == core.HeaderKey(k) }) &&
			!strings.EqualFold(k, "Host") && !strings.EqualFold(k, "Content-Length") && !strings.EqualFold(k, "X-Forwarded-For") && !strings.EqualFold(k, "Cookie") {
			t.Fatalf("header %q removed", name)
		}
		for _, p := range strings.FieldsFunc(r.URL.RawQuery, func(c rune) bool { return c == '&' || c == ';' }) {
			k, _, _ := strings.Cut(p, "=")
			if u, err := url.QueryUnescape(k); err == nil && slices.ContainsFunc(core.SigV4QueryParams, func(s string) bool { return strings.EqualFold(s, u) }) {
				t.Fatalf("query %q: %q reached the HTTP face", rawQuery, p)
			}
		}
	})
}

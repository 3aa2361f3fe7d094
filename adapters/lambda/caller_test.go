package lambda

import (
	"context"
	"net/http"
	"testing"

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

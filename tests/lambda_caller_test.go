package tests

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// TestLambdaIdempotencyPerIAMCaller: on the Lambda host (the real binary
// under the Runtime Interface Emulator, invoked with AWS's Function URL
// sample event) an Idempotency-Key is scoped to the AWS_IAM caller Lambda
// verified, requestContext.authorizer.iam.userArn: the same key, request and
// headers from another IAM user is another request (new id, a backend
// call of its own), from the same user the first submission's 202. Before,
// the second user was handed the first user's id, and so its result.
func TestLambdaIdempotencyPerIAMCaller(t *testing.T) {
	hang, cancelled := silentBackend(t)
	f := startFunction(t, binary, map[string]string{
		"Hosts":                       hang.URL,
		"AsyncModeEnabled":            "true",
		"AsyncTriggerTimeout":         "300",
		"UserProfiles":                asyncProfile,
		"AsyncStore":                  "file:" + t.TempDir(),
		"AWS_LAMBDA_FUNCTION_TIMEOUT": "10",
	})
	submit := func(userArn string) acceptedDoc {
		t.Helper()
		ev := httpEvent(t, "lambda-urls-request.json", httpRequest{
			method: "POST", rawPath: "/reports/iam",
			headers: map[string]string{"s7pasyncmode": "true", "x-userprofile": "u1", "idempotency-key": "key-iam-1",
				"authorization": "AWS4-HMAC-SHA256 Credential=shared/20200312/us-west-2/lambda/aws4_request"},
			body: []byte("payload"),
		})
		var m map[string]any
		if err := json.Unmarshal(ev, &m); err != nil {
			t.Fatal(err)
		}
		iam := m["requestContext"].(map[string]any)["authorizer"].(map[string]any)["iam"].(map[string]any)
		if userArn != "" {
			iam["userArn"] = userArn
		}
		ev, _ = json.Marshal(m)
		a, body, _ := f.invokeHTTP(t, ev)
		if a.StatusCode != http.StatusAccepted {
			t.Fatalf("submission as %q: %d %s; want 202", userArn, a.StatusCode, body)
		}
		var acc acceptedDoc
		if err := json.Unmarshal(body, &acc); err != nil || acc.ID == "" {
			t.Fatalf("202 body %q: %v", body, err)
		}
		return acc
	}
	first := submit("") // the sample's own caller: arn:aws:iam::111122223333:user/example-user
	other := submit("arn:aws:iam::111122223333:user/another-user")
	if other.ID == first.ID {
		t.Fatalf("another IAM caller with the same key and request got the first caller's id %s", first.ID)
	}
	// Each new request reached the backend once, its attempt cancelled by
	// the 202 (the function is frozen after it answers).
	for i := range 2 {
		select {
		case <-cancelled:
		case <-time.After(5 * time.Second):
			t.Fatalf("backend attempts seen = %d; want one per caller, 2", i)
		}
	}
	if again := submit(""); again.ID != first.ID {
		t.Errorf("the same IAM caller again got id %s; want the first submission's %s", again.ID, first.ID)
	}
}

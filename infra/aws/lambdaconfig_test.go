package aws

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"fngateway/internal/emulators"
	"fngateway/internal/testutil"
)

// lambdaEnv clears every variable LambdaConfig reads, then sets env, for t
// (t.Setenv: the test cannot run in parallel).
func lambdaEnv(t *testing.T, env map[string]string) {
	t.Helper()
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY",
		"AWS_SECRET_ACCESS_KEY", "AWS_SECRET_KEY", "AWS_SESSION_TOKEN", "AWS_ACCOUNT_ID",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
		"AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
		"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_SNS",
		"AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// TestLambdaConfigAgainstEmulators: the configuration Lambda's environment
// gives (the role's credentials, AWS_REGION, one endpoint per service)
// reaches S3 and SQS through the Store and the Queue, with no SDK config
// package.
func TestLambdaConfigAgainstEmulators(t *testing.T) {
	v := emulators.StartVersitygw(t)
	f := emulators.StartFauxqs(t)
	lambdaEnv(t, map[string]string{
		"AWS_REGION":            emulators.VersitygwRegion,
		"AWS_ACCESS_KEY_ID":     emulators.VersitygwAccessKey,
		"AWS_SECRET_ACCESS_KEY": emulators.VersitygwSecretKey,
		"AWS_SESSION_TOKEN":     "",
		"AWS_ENDPOINT_URL_S3":   v.Endpoint(),
		"AWS_ENDPOINT_URL_SQS":  f.Endpoint(),
	})
	sdk, err := LambdaConfig("")
	if err != nil {
		t.Fatalf("LambdaConfig: %v", err)
	}
	if sdk.Region != emulators.VersitygwRegion {
		t.Errorf("region %q, want AWS_REGION's %q", sdk.Region, emulators.VersitygwRegion)
	}
	ctx := testutil.Context(t)
	store, err := NewStore(Config{AWS: sdk}, "s3://"+testutil.UniqueName("lambda"))
	if err != nil {
		t.Fatalf("NewStore: %v", err)
	}
	if _, err := store.Put(ctx, "c/r.json", []byte(`{"a":1}`), ""); err != nil {
		t.Fatalf("Put through AWS_ENDPOINT_URL_S3 with the environment's credentials: %v", err)
	}
	if got, _, err := store.Get(ctx, "c/r.json"); err != nil || string(got) != `{"a":1}` {
		t.Fatalf("Get: %q, %v", got, err)
	}
	queue, err := NewQueue(Config{AWS: sdk}, f.QueueURL(testutil.UniqueName("lambda")))
	if err != nil {
		t.Fatalf("NewQueue: %v", err)
	}
	if err := queue.Enqueue(ctx, []byte("m"), 0); err != nil {
		t.Fatalf("Enqueue through AWS_ENDPOINT_URL_SQS: %v", err)
	}
	if msgs, err := queue.Receive(ctx, 1, time.Minute); err != nil || len(msgs) != 1 {
		t.Fatalf("Receive: %d messages, %v", len(msgs), err)
	}
}

// TestLambdaConfigEndpoints: AWS_ENDPOINT_URL is every service's endpoint
// unless a service has its own; AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true
// ignores both, as the SDK's default chain does.
func TestLambdaConfigEndpoints(t *testing.T) {
	endpoints := func(t *testing.T) (s3URL, sqsURL string) {
		t.Helper()
		sdk, err := LambdaConfig("eu-west-1")
		if err != nil {
			t.Fatalf("LambdaConfig: %v", err)
		}
		if sdk.Region != "eu-west-1" {
			t.Errorf("region %q, want the one given, eu-west-1, over AWS_REGION", sdk.Region)
		}
		deref := func(p *string) string {
			if p == nil {
				return ""
			}
			return *p
		}
		return deref(s3.NewFromConfig(sdk).Options().BaseEndpoint), deref(sqs.NewFromConfig(sdk).Options().BaseEndpoint)
	}
	base := map[string]string{"AWS_REGION": "us-east-2", "AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "secret",
		"AWS_ENDPOINT_URL": "http://127.0.0.1:1", "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:2"}
	t.Run("Configured", func(t *testing.T) {
		lambdaEnv(t, base)
		if s3URL, sqsURL := endpoints(t); s3URL != "http://127.0.0.1:2" || sqsURL != "http://127.0.0.1:1" {
			t.Errorf("S3 endpoint %q, SQS endpoint %q; want AWS_ENDPOINT_URL_S3's and AWS_ENDPOINT_URL's", s3URL, sqsURL)
		}
	})
	t.Run("Ignored", func(t *testing.T) {
		lambdaEnv(t, base)
		t.Setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true")
		if s3URL, sqsURL := endpoints(t); s3URL != "" || sqsURL != "" {
			t.Errorf("S3 endpoint %q, SQS endpoint %q; want AWS's own with AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true", s3URL, sqsURL)
		}
	})
}

// TestLambdaConfigContainerCredentials: without credentials in the
// environment, they come from AWS_CONTAINER_CREDENTIALS_FULL_URI (as under
// SnapStart), with the token of AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE,
// read when the credentials are.
func TestLambdaConfigContainerCredentials(t *testing.T) {
	var mu sync.Mutex
	var auths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		mu.Unlock()
		json.NewEncoder(w).Encode(map[string]string{"AccessKeyId": "container-id", "SecretAccessKey": "container-secret",
			"Token": "container-token", "Expiration": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	}))
	t.Cleanup(srv.Close)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("file-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	lambdaEnv(t, map[string]string{"AWS_REGION": "us-east-1", "AWS_CONTAINER_CREDENTIALS_FULL_URI": srv.URL + "/creds",
		"AWS_CONTAINER_AUTHORIZATION_TOKEN": "env-token", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": tokenFile})
	sdk, err := LambdaConfig("")
	if err != nil {
		t.Fatalf("LambdaConfig: %v", err)
	}
	creds, err := sdk.Credentials.Retrieve(testutil.Context(t))
	if err != nil {
		t.Fatalf("Retrieve: %v", err)
	}
	if creds.AccessKeyID != "container-id" || creds.SessionToken != "container-token" {
		t.Errorf("credentials %q / %q, want the container endpoint's", creds.AccessKeyID, creds.SessionToken)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(auths) != 1 || auths[0] != "file-token" {
		t.Errorf("the endpoint saw Authorization %q, want one request with the token file's file-token", auths)
	}
}

// TestLambdaConfigRefused: half-given credentials and a container endpoint
// reachable in plain text outside the host stop the start-up, naming the
// variables.
func TestLambdaConfigRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"KeyWithoutSecret", map[string]string{"AWS_ACCESS_KEY_ID": "id"}, "must be set together"},
		{"PlainHTTPElsewhere", map[string]string{"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://198.51.100.7/creds"}, "AWS_CONTAINER_CREDENTIALS_FULL_URI"},
		{"NotAURL", map[string]string{"AWS_CONTAINER_CREDENTIALS_FULL_URI": "169.254.170.2/creds"}, "want an http or https URL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			lambdaEnv(t, c.env)
			if _, err := LambdaConfig(""); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("LambdaConfig: error %v, want one naming %q", err, c.want)
			}
		})
	}
}

// TestLambdaConfigNoCredentials: without any credentials the configuration
// loads (as the default chain's does: nothing is contacted at start-up),
// and a request that needs them fails naming the variables.
func TestLambdaConfigNoCredentials(t *testing.T) {
	lambdaEnv(t, map[string]string{"AWS_REGION": "us-east-1"})
	sdk, err := LambdaConfig("")
	if err != nil {
		t.Fatalf("LambdaConfig: %v", err)
	}
	if _, err := sdk.Credentials.Retrieve(testutil.Context(t)); err == nil || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY") {
		t.Errorf("Retrieve: error %v, want one naming AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", err)
	}
}

// FuzzCheckContainerEndpoint: an accepted endpoint is https, or http to a
// loopback or container address.
func FuzzCheckContainerEndpoint(f *testing.F) {
	for _, s := range []string{"http://169.254.170.2/v2/credentials/x", "http://127.0.0.1:9/c", "http://[::1]:9/",
		"https://example.com/c", "http://localhost/c", "http://169.254.170.23/v1/credentials", "http://[fd00:ec2::23]/",
		"http://198.51.100.7/", "ftp://127.0.0.1/", "", "http://", "http://127.0.0.1@evil.example/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if checkContainerEndpoint(s) != nil {
			return
		}
		u, err := url.Parse(s)
		if err != nil {
			t.Fatalf("%q accepted, but url.Parse: %v", s, err)
		}
		if u.Scheme == "https" {
			return
		}
		h := u.Hostname()
		ip, err := netip.ParseAddr(h)
		loopback := err == nil && ip.Unmap().IsLoopback()
		if u.Scheme != "http" || !(h == "localhost" || loopback ||
			h == "169.254.170.2" || h == "169.254.170.23" || h == "fd00:ec2::23") {
			t.Fatalf("%q accepted: scheme %q host %q", s, u.Scheme, h)
		}
	})
}

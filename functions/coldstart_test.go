package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestLambdaPackageLinks holds what the Lambda package, built with the tags
// of make package-aws, links: none of the packages whose initialisation
// each cold start would pay for a feature the Lambda function never uses
// (docs/performance.md, "Cold start"). The SDK's config package and the
// providers of its default chain (-tags lambdaonly), gRPC's tracing and
// html/template (-tags grpcnotrace), runtime/metrics (gc.go reads the
// collector's setting through runtime/debug).
func TestLambdaPackageLinks(t *testing.T) {
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^package-aws:(?:\n\t.*)*?go build -tags (\S+)`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("no go build -tags in the Makefile's package-aws rule")
	}
	tags := string(m[1])
	out, err := exec.Command("go", "list", "-deps", "-tags", tags, ".").Output()
	if err != nil {
		t.Fatalf("go list -deps -tags %s: %v", tags, err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 || !strings.Contains(string(out), "github.com/aws/aws-sdk-go-v2/service/s3\n") {
		t.Fatalf("go list -deps -tags %s: %d packages, want the gateway's with S3", tags, len(deps))
	}
	refused := []string{
		"github.com/aws/aws-sdk-go-v2/config", "github.com/aws/aws-sdk-go-v2/credentials/stscreds",
		"github.com/aws/aws-sdk-go-v2/credentials/ssocreds", "github.com/aws/aws-sdk-go-v2/service/sso",
		"github.com/aws/aws-sdk-go-v2/service/ssooidc",
		"github.com/aws/aws-sdk-go-v2/service/sts", "github.com/aws/aws-sdk-go-v2/service/signin",
		"github.com/aws/aws-sdk-go-v2/feature/ec2/imds", "golang.org/x/net/trace", "html/template", "runtime/metrics",
		"github.com/Azure",
	}
	for _, d := range deps {
		for _, r := range refused {
			if d == r || strings.HasPrefix(d, r+"/") {
				t.Errorf("make package-aws (-tags %s) links %s", tags, d)
			}
		}
	}
}

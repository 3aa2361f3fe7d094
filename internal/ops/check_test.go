package ops

import (
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseCheckArgs(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want func(c *checkConfig) string // "" when c is as wanted
	}{
		{"defaults", []string{"https://gw.example"}, func(c *checkConfig) string {
			if c.base.String() != "https://gw.example" || c.method != "GET" || c.path != "/" || c.slowPath != "" ||
				c.ttl != 2*time.Second || c.tolerance != time.Second || c.async || c.asyncPath != "/" || c.sigv4 {
				return "not the documented defaults"
			}
			return ""
		}},
		{"URL between flags", []string{"--slow-path", "/delay/10", "https://gw.example/base", "--ttl", "0.5", "--async", "--profile", "u1", "-header", "X-Api-Key: k"}, func(c *checkConfig) string {
			if c.base.Path != "/base" || c.slowPath != "/delay/10" || c.ttl != 500*time.Millisecond || c.ttlText != "0.5" ||
				!c.async || c.profile != "u1" || c.asyncPath != "/delay/10" || c.headers.Get("X-Api-Key") != "k" {
				return "flags after the URL not read"
			}
			return ""
		}},
		{"async path given", []string{"--async", "--profile", "u1", "--async-path", "/report", "--slow-path", "/s", "http://127.0.0.1:8080"}, func(c *checkConfig) string {
			if c.asyncPath != "/report" {
				return "async path " + c.asyncPath
			}
			return ""
		}},
		{"sigv4", []string{"--aws-sigv4", "--region", "eu-west-1", "--method", "post", "https://x.lambda-url.eu-west-1.on.aws/"}, func(c *checkConfig) string {
			if !c.sigv4 || c.region != "eu-west-1" || c.method != "POST" {
				return "sigv4 flags not read"
			}
			return ""
		}},
		{"azure credentials", []string{"--entra-scope", "api://11111111-2222-3333-4444-555555555555/.default", "--function-key", "k3y==", "https://gw.azurewebsites.net"}, func(c *checkConfig) string {
			if c.entraScope != "api://11111111-2222-3333-4444-555555555555/.default" || c.functionKey != "k3y==" || c.sigv4 {
				return "azure credential flags not read"
			}
			return ""
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, code, err := parseCheckArgs(tt.args, io.Discard)
			if err != nil || code != 0 {
				t.Fatalf("parseCheckArgs(%q) = %d, %v", tt.args, code, err)
			}
			if msg := tt.want(c); msg != "" {
				t.Errorf("parseCheckArgs(%q): %s: %+v", tt.args, msg, c)
			}
		})
	}
}

func TestParseCheckArgsErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, "want one URL, got 0"},
		{[]string{"https://a", "https://b"}, "want one URL, got 2"},
		{[]string{"gw.example"}, `URL "gw.example": want an absolute http or https URL`},
		{[]string{"https://gw.example/?a=1"}, "without query"},
		{[]string{"--ttl", "0", "https://gw"}, `--ttl "0": want seconds, more than 0`},
		{[]string{"--ttl", "NaN", "https://gw"}, `--ttl "NaN"`},
		{[]string{"--ttl", "3601", "https://gw"}, `--ttl "3601"`},
		{[]string{"--path", "api", "https://gw"}, `--path "api": want a path starting with /`},
		{[]string{"--slow-path", "/a b", "https://gw"}, `--slow-path "/a b"`},
		{[]string{"--method", "G T", "https://gw"}, `--method "G T"`},
		{[]string{"--header", "no colon", "https://gw"}, `want "Name: value"`},
		{[]string{"--async", "https://gw"}, "--async needs --profile"},
		{[]string{"--wait", "0s", "https://gw"}, "positive durations"},
		{[]string{"--bogus", "https://gw"}, "flag provided but not defined: -bogus"},
		{[]string{"--entra-scope", "api://x", "https://gw"}, `--entra-scope "api://x": want the app registration's scope`},
		{[]string{"--entra-scope", "/.default", "https://gw"}, `--entra-scope "/.default"`},
		{[]string{"--entra-scope", "api://x /.default", "https://gw"}, `--entra-scope "api://x /.default"`},
		{[]string{"--function-key", "a b", "https://gw"}, "--function-key: want the key itself"},
		{[]string{"--aws-sigv4", "--function-key", "k", "https://gw"}, "give one or the other"},
		{[]string{"--aws-sigv4", "--entra-scope", "api://x/.default", "https://gw"}, "give one or the other"},
	}
	for _, tt := range tests {
		_, code, err := parseCheckArgs(tt.args, io.Discard)
		if err == nil || code != 2 || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parseCheckArgs(%q) = %d, %v; want exit 2 and an error containing %q", tt.args, code, err, tt.want)
		}
	}
}

// FuzzCheckCredentials: whatever --entra-scope and --function-key say, the
// flags are either refused (exit 2, naming the flag) or give a scope that
// ends in /.default and a key that can be sent as one header value.
func FuzzCheckCredentials(f *testing.F) {
	f.Add("api://11111111-2222-3333-4444-555555555555/.default", "k3y==")
	f.Add("/.default", "")
	f.Add("api://x /.default", "a\r\nb")
	f.Add("", "key")
	f.Fuzz(func(t *testing.T, scope, key string) {
		args := []string{"https://gw.example"}
		if scope != "" {
			args = append(args, "--entra-scope", scope)
		}
		if key != "" {
			args = append(args, "--function-key", key)
		}
		c, code, err := parseCheckArgs(args, io.Discard)
		if err != nil {
			if code != 2 || !(strings.Contains(err.Error(), "--entra-scope") || strings.Contains(err.Error(), "--function-key")) {
				t.Fatalf("parseCheckArgs(%q) = %d, %v; want exit 2 naming the flag", args, code, err)
			}
			return
		}
		if c.entraScope != "" && (!strings.HasSuffix(c.entraScope, "/.default") || strings.ContainsAny(c.entraScope, " \t\r\n") || c.entraScope == "/.default") {
			t.Fatalf("scope %q accepted", c.entraScope)
		}
		if c.functionKey != "" && !checkHeaderValue(c.functionKey) {
			t.Fatalf("key %q accepted", c.functionKey)
		}
		if (scope != "") != (c.entraScope != "") || (key != "") != (c.functionKey != "") {
			t.Fatalf("flags %q %q became scope %q key %q", scope, key, c.entraScope, c.functionKey)
		}
	})
}

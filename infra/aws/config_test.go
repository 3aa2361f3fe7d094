package aws

import (
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestParseLocation(t *testing.T) {
	for _, tc := range []struct {
		in             string
		bucket, prefix string
		ok             bool
	}{
		{"s3://my-bucket", "my-bucket", "", true},
		{"s3://my-bucket/", "my-bucket", "", true},
		{"s3://my.bucket.1/gateway", "my.bucket.1", "gateway/", true},
		{"s3://b12/a/b/", "b12", "a/b/", true},
		{"s3://", "", "", false},
		{"s3:/bucket", "", "", false},
		{"S3://bucket", "", "", false},
		{"file:x", "", "", false},
		{"s3://ab", "", "", false},
		{"s3://" + strings.Repeat("a", 64), "", "", false},
		{"s3://Bucket", "", "", false},
		{"s3://-bucket", "", "", false},
		{"s3://bucket-", "", "", false},
		{"s3://buc..ket", "", "", false},
		{"s3://buc.-ket", "", "", false},
		{"s3://buc_ket", "", "", false},
		{"s3://bucket//x", "", "", false},
		{"s3://bucket/a/../b", "", "", false},
		{"s3://bucket/./b", "", "", false},
		{"s3://bucket/\xff", "", "", false},
	} {
		bucket, prefix, err := ParseLocation(tc.in)
		if (err == nil) != tc.ok || bucket != tc.bucket || prefix != tc.prefix {
			t.Errorf("ParseLocation(%q) = %q, %q, %v; want %q, %q, ok %v", tc.in, bucket, prefix, err, tc.bucket, tc.prefix, tc.ok)
		}
	}
}

func TestParseQueueURL(t *testing.T) {
	for _, tc := range []struct {
		in, name string
		ok       bool
	}{
		{"https://sqs.eu-west-1.amazonaws.com/123456789012/gateway-continuations", "gateway-continuations", true},
		{"http://sqs.us-east-1.localhost:4566/000000000000/Q_1", "Q_1", true},
		{"https://sqs.eu-west-1.amazonaws.com/123456789012/q.fifo", "", false},
		{"https://sqs.eu-west-1.amazonaws.com/123456789012/", "", false},
		{"https://sqs.eu-west-1.amazonaws.com/123456789012", "", false},
		{"https://sqs.eu-west-1.amazonaws.com//q", "", false},
		{"https://sqs.eu-west-1.amazonaws.com/1/2/q", "", false},
		{"https://sqs.eu-west-1.amazonaws.com/1/q?x=1", "", false},
		{"https://sqs.eu-west-1.amazonaws.com/1/q#f", "", false},
		{"https://user@sqs.eu-west-1.amazonaws.com/1/q", "", false},
		{"ftp://sqs.eu-west-1.amazonaws.com/1/q", "", false},
		{"/1/q", "", false},
		{"gateway-continuations", "", false},
		{"https://sqs.eu-west-1.amazonaws.com/1/" + strings.Repeat("q", 81), "", false},
		{"https://sqs.eu-west-1.amazonaws.com/1/a%2Fb", "", false},
		{"https://sqs.eu-west-1.amazonaws.com/1/a b", "", false},
	} {
		name, err := ParseQueueURL(tc.in)
		if (err == nil) != tc.ok || name != tc.name {
			t.Errorf("ParseQueueURL(%q) = %q, %v; want %q, ok %v", tc.in, name, err, tc.name, tc.ok)
		}
	}
}

func TestSeconds(t *testing.T) {
	for _, tc := range []struct {
		d, least, most time.Duration
		want           int32
	}{
		{0, 0, maxDelay, 0},
		{-time.Second, 0, maxDelay, 0},
		{time.Millisecond, 0, maxDelay, 1},
		{1500 * time.Millisecond, 0, maxDelay, 2},
		{maxDelay, 0, maxDelay, 900},
		{20 * time.Minute, 0, maxDelay, 900}, // clamped: core re-enqueues
		{0, time.Second, maxVisibility, 1},
		{13 * time.Hour, 0, maxVisibility, 43200},
	} {
		if got := seconds(tc.d, tc.least, tc.most); got != tc.want {
			t.Errorf("seconds(%v, %v, %v) = %d, want %d", tc.d, tc.least, tc.most, got, tc.want)
		}
	}
}

// FuzzParseLocation: an accepted location names a valid bucket and a
// prefix of clean segments, and writing them back parses to the same.
func FuzzParseLocation(f *testing.F) {
	for _, s := range []string{"s3://b12", "s3://my.bucket/a/b/", "s3://x/../y", "s3://", "s3://ab/\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		bucket, prefix, err := ParseLocation(s)
		if err != nil {
			return
		}
		if checkBucket(bucket) != nil {
			t.Fatalf("ParseLocation(%q) accepted bucket %q", s, bucket)
		}
		if prefix != "" && (!strings.HasSuffix(prefix, "/") || checkSegments(strings.TrimSuffix(prefix, "/")) != nil) {
			t.Fatalf("ParseLocation(%q) accepted prefix %q", s, prefix)
		}
		b2, p2, err := ParseLocation("s3://" + bucket + "/" + prefix)
		if err != nil || b2 != bucket || p2 != prefix {
			t.Fatalf("round trip of %q: %q, %q, %v; want %q, %q", s, b2, p2, err, bucket, prefix)
		}
	})
}

// FuzzParseQueueURL: an accepted URL is http(s) with a host, and the name
// returned is its last path segment, a valid standard queue name.
func FuzzParseQueueURL(f *testing.F) {
	for _, s := range []string{
		"https://sqs.eu-west-1.amazonaws.com/123456789012/q",
		"http://127.0.0.1:1/0/q.fifo", "https://h/1/a%2Fb", "https://h//q",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		name, err := ParseQueueURL(s)
		if err != nil {
			return
		}
		u, perr := url.Parse(s)
		if perr != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			t.Fatalf("ParseQueueURL(%q) accepted a URL that is not http(s) with a host", s)
		}
		if checkQueueName(name) != nil || !strings.HasSuffix(u.Path, "/"+name) || strings.Count(u.Path, "/") != 2 {
			t.Fatalf("ParseQueueURL(%q) = %q, not the valid last of two segments", s, name)
		}
	})
}

// FuzzValidText: accepted bodies are UTF-8 of SQS's allowed characters.
func FuzzValidText(f *testing.F) {
	for _, s := range []string{`{"v":1}`, "\xff", "a\x00b", "tab\there", "\uFFFE", "😀"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !validText(b) {
			return
		}
		if !utf8.Valid(b) {
			t.Fatalf("validText accepted invalid UTF-8 %q", b)
		}
		for _, r := range string(b) {
			if r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0xFFFE || r == 0xFFFF || r >= 0xD800 && r < 0xE000 {
				t.Fatalf("validText accepted %q with %U", b, r)
			}
		}
	})
}

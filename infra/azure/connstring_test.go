package azure

import (
	"strings"
	"testing"
)

// A valid base64 key that is not the development one.
const testKey = "dGVzdCBrZXkgKyBzbGFzaC8gZm9yIHRoZSBnYXRld2F5IHRlc3Rz"

func TestParseConnectionString(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		wantBlob  string
		wantQueue string
	}{
		{
			name:      "portal form",
			in:        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" + testKey + ";EndpointSuffix=core.windows.net",
			wantBlob:  "https://acct.blob.core.windows.net",
			wantQueue: "https://acct.queue.core.windows.net",
		},
		{
			name:      "defaults",
			in:        "AccountName=acct;AccountKey=" + testKey,
			wantBlob:  "https://acct.blob.core.windows.net",
			wantQueue: "https://acct.queue.core.windows.net",
		},
		{
			name:      "sovereign cloud over http",
			in:        "DefaultEndpointsProtocol=HTTP;AccountName=acct;AccountKey=" + testKey + ";EndpointSuffix=core.chinacloudapi.cn",
			wantBlob:  "http://acct.blob.core.chinacloudapi.cn",
			wantQueue: "http://acct.queue.core.chinacloudapi.cn",
		},
		{
			name:      "explicit endpoints, loose spelling",
			in:        " accountname=devstoreaccount1 ; ACCOUNTKEY=" + testKey + ";;BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;QueueEndpoint=http://127.0.0.1:10001/devstoreaccount1;TableEndpoint=http://127.0.0.1:10002/devstoreaccount1;",
			wantBlob:  "http://127.0.0.1:10000/devstoreaccount1",
			wantQueue: "http://127.0.0.1:10001/devstoreaccount1",
		},
		{
			name:      "only the blob endpoint explicit",
			in:        "AccountName=acct;AccountKey=" + testKey + ";BlobEndpoint=https://blobs.example.com/",
			wantBlob:  "https://blobs.example.com/",
			wantQueue: "https://acct.queue.core.windows.net",
		},
		{
			name:      "development storage",
			in:        "UseDevelopmentStorage=true",
			wantBlob:  "http://127.0.0.1:10000/devstoreaccount1",
			wantQueue: "http://127.0.0.1:10001/devstoreaccount1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConnectionString(tt.in)
			if err != nil {
				t.Fatalf("ParseConnectionString: %v", err)
			}
			if got := c.BlobServiceURL(); got != tt.wantBlob {
				t.Errorf("BlobServiceURL = %q, want %q", got, tt.wantBlob)
			}
			if got := c.QueueServiceURL(); got != tt.wantQueue {
				t.Errorf("QueueServiceURL = %q, want %q", got, tt.wantQueue)
			}
			if c.AccountKey == "" || strings.Contains(c.String(), c.AccountKey) {
				t.Errorf("String() = %q: shows the account key", c.String())
			}
		})
	}
}

func TestParseConnectionStringErrors(t *testing.T) {
	const badKey = "not+base64/secret!value"
	tests := []struct {
		name, in, want string
	}{
		{"empty", " ", "empty"},
		{"only separators", ";;", "no Name=Value parts"},
		{"not name=value", "AccountName=acct;" + badKey, "part 2 is not Name=Value"},
		{"empty name", "=x;AccountName=acct", "part 1 is not Name=Value"},
		{"unknown name", "AccountName=acct;AccountKey=" + testKey + ";Bogus=1", `unknown name "Bogus"`},
		{"unknown odd name", "AccountName=acct;" + badKey + "=1", "part 2 has an unknown name"},
		{"duplicate", "AccountName=a1;AccountKey=" + testKey + ";accountname=a2", "AccountName given twice"},
		{"empty value", "AccountName=;AccountKey=" + testKey, "AccountName is empty"},
		{"no key", "AccountName=acct", "AccountKey missing"},
		{"no name", "AccountKey=" + testKey, "AccountName missing"},
		{"key not base64", "AccountName=acct;AccountKey=" + badKey, "AccountKey is not valid base64"},
		{"bad account name", "AccountName=My_Account;AccountKey=" + testKey, `AccountName "My_Account"`},
		{"bad protocol", "DefaultEndpointsProtocol=ftp;AccountName=acct;AccountKey=" + testKey, `DefaultEndpointsProtocol "ftp"`},
		{"bad suffix", "EndpointSuffix=.core..net;AccountName=acct;AccountKey=" + testKey, `EndpointSuffix ".core..net"`},
		{"endpoint not a URL", "AccountName=acct;AccountKey=" + testKey + ";BlobEndpoint=127.0.0.1:10000", "BlobEndpoint"},
		{"endpoint with query", "AccountName=acct;AccountKey=" + testKey + ";QueueEndpoint=https://q.example.com/?sv=1", "QueueEndpoint"},
		{"sas", "BlobEndpoint=https://b.example.com;SharedAccessSignature=sv=2020&sig=" + badKey, "SharedAccessSignature is not supported"},
		{"dev storage mixed", "UseDevelopmentStorage=true;AccountName=acct", "cannot be combined with AccountName"},
		{"dev storage false", "UseDevelopmentStorage=false", `UseDevelopmentStorage "false"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConnectionString(tt.in)
			if err == nil {
				t.Fatalf("ParseConnectionString(%q): no error, want one containing %q", tt.in, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to contain %q", err, tt.want)
			}
			for _, secret := range []string{badKey, testKey} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q shows a key", err)
				}
			}
		})
	}
}

// FuzzParseConnectionString checks that whatever parses formats back to
// the same value, derives valid service URLs and never shows its key, and
// that errors never show the AccountKey given.
func FuzzParseConnectionString(f *testing.F) {
	for _, s := range []string{
		"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" + testKey + ";EndpointSuffix=core.windows.net",
		"AccountName=devstoreaccount1;AccountKey=" + testKey + ";BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;QueueEndpoint=http://127.0.0.1:10001/devstoreaccount1",
		"UseDevelopmentStorage=true",
		"AccountName=acct;AccountKey=not+base64/secret!",
		"accountname=a;accountkey=" + testKey + ";;TableEndpoint=x",
		"AccountKey=a+b/c==;SharedAccessSignature=sig=x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseConnectionString(s)
		if err != nil {
			key, rest := accountKeyPart(s)
			if len(key) >= 8 && strings.ContainsAny(key, "+/") && !strings.Contains(rest, key) &&
				strings.Contains(err.Error(), key) {
				t.Fatalf("error %q shows the AccountKey %q", err, key)
			}
			return
		}
		again, err := ParseConnectionString(c.format(c.AccountKey))
		if err != nil {
			t.Fatalf("parse of formatted %q: %v", c.format("…"), err)
		}
		if again != c {
			t.Fatalf("round trip: got %+v, want %+v", again, c)
		}
		for _, u := range []string{c.BlobServiceURL(), c.QueueServiceURL()} {
			if err := checkServiceURL(u); err != nil {
				t.Fatalf("service URL %q: %v", u, err)
			}
		}
		noKey := c
		noKey.AccountKey = ""
		if !strings.Contains(noKey.format(""), c.AccountKey) && strings.Contains(c.String(), c.AccountKey) {
			t.Fatalf("String() = %q shows the key", c.String())
		}
	})
}

// accountKeyPart returns the value of the last AccountKey part of s and
// s without it.
func accountKeyPart(s string) (key, rest string) {
	parts := strings.Split(s, ";")
	var others []string
	for _, p := range parts {
		name, value, _ := strings.Cut(p, "=")
		if strings.EqualFold(strings.TrimSpace(name), "AccountKey") {
			key = strings.TrimSpace(value)
			continue
		}
		others = append(others, p)
	}
	return key, strings.Join(others, ";")
}

func TestCarriesCredential(t *testing.T) {
	tests := []struct {
		in      string
		want    bool
		wantErr bool
	}{
		{"", false, false},
		{"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=;EndpointSuffix=core.windows.net", false, false},
		{"AccountName=acct; accountkey =  ;", false, false},
		{"AccountName=acct", false, false},
		{"UseDevelopmentStorage=false", false, false},
		{"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" + testKey + ";EndpointSuffix=core.windows.net", true, false},
		{"ACCOUNTKEY=" + testKey, true, false},
		{"BlobEndpoint=https://b.example.com;SharedAccessSignature=sv=2022-11-02&sig=x", true, false},
		{"UseDevelopmentStorage=true", true, false},
		{"AccountName=acct;" + testKey, false, true},
		{"=x", false, true},
	}
	for _, tt := range tests {
		got, err := CarriesCredential(tt.in)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("CarriesCredential(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil && strings.Contains(err.Error(), testKey) {
			t.Errorf("error %q shows the key", err)
		}
	}
}

// FuzzCarriesCredential checks CarriesCredential against
// ParseConnectionString: whatever parses with an account key carries a
// credential, a string without any AccountKey, SharedAccessSignature or
// UseDevelopmentStorage part carries none, and errors never echo input.
func FuzzCarriesCredential(f *testing.F) {
	for _, s := range []string{
		"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=;EndpointSuffix=core.windows.net",
		"AccountName=acct;AccountKey=" + testKey,
		"SharedAccessSignature=sig=x",
		"UseDevelopmentStorage=true",
		"AccountName=acct;garbage",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := CarriesCredential(s)
		if err != nil {
			if got {
				t.Fatalf("CarriesCredential(%q) = true with an error", s)
			}
			if len(s) > 12 && strings.Contains(err.Error(), s) {
				t.Fatalf("error %q echoes the input", err)
			}
			return
		}
		if c, perr := ParseConnectionString(s); perr == nil && c.AccountKey != "" && !got {
			t.Fatalf("CarriesCredential(%q) = false; it parses with an account key", s)
		}
		lower := strings.ToLower(s)
		if got && !strings.Contains(lower, "accountkey") && !strings.Contains(lower, "sharedaccesssignature") && !strings.Contains(lower, "usedevelopmentstorage") {
			t.Fatalf("CarriesCredential(%q) = true without a credential part", s)
		}
	})
}

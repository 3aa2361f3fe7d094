package core

import (
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// FuzzHeaderIs: the allocation-free comparisons agree with HeaderKey, the
// one normalisation.
func FuzzHeaderIs(f *testing.F) {
	f.Add("X_MS_CLIENT_PRINCIPAL_ID", "X-Ms-Client-Principal")
	f.Add("x-functions-key", "X-Functions-Key")
	f.Add("X-Amz-Date_", "x_amz_date")
	f.Fuzz(func(t *testing.T, k, name string) {
		if got, want := headerIs(k, name), HeaderKey(k) == HeaderKey(name); got != want {
			t.Fatalf("headerIs(%q, %q) = %v; HeaderKey says %v", k, name, got, want)
		}
		if got, want := headerHasPrefix(k, name), strings.HasPrefix(HeaderKey(k), HeaderKey(name)); got != want {
			t.Fatalf("headerHasPrefix(%q, %q) = %v; HeaderKey says %v", k, name, got, want)
		}
	})
}

// testCredentials are a host's credentials as the tests strip them.
var testCredentials = Credentials{
	Names:    []string{"X-Functions-Key", "Authorization"},
	Prefixes: []string{"X-Ms-Client-Principal"},
	Verified: []string{"X-Ms-Verified"},
	Query:    []string{"code", "X-Amz-Signature"},
}

func TestCredentialsStrip(t *testing.T) {
	r, err := http.NewRequest("GET", "http://gw/p?a=1;code=k&X-Amz-Signature=s&b=2", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.RequestURI = "/p?a=1;code=k&X-Amz-Signature=s&b=2"
	r.Header = http.Header{
		"X-Functions-Key":          {"k"},
		"X_functions_key":          {"k"},
		"authorization":            {"AWS4 …"},
		"X-Ms-Client-Principal-Id": {"p"},
		"X_MS_CLIENT_PRINCIPAL_ID": {"p"},
		"X-Ms-Verified-Id":         {"kept: the platform's spelling"},
		"X_Ms_Verified_Id":         {"forged"},
		"X-Other":                  {"kept"},
		"X_Other":                  {"kept"},
	}
	testCredentials.Strip(r)
	want := []string{"X-Ms-Verified-Id", "X-Other", "X_Other"}
	var got []string
	for k := range r.Header {
		got = append(got, k)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("headers left %q; want %q", got, want)
	}
	if r.URL.RawQuery != "a=1&b=2" || r.RequestURI != "/p?a=1&b=2" {
		t.Errorf("query %q, RequestURI %q; want a=1&b=2 in both", r.URL.RawQuery, r.RequestURI)
	}
}

// FuzzCredentialsStrip: whatever a client sends, no spelling of a
// credential header and no credential query parameter (split at '&' or
// ';') is left, a verified header is left only in a spelling without '_',
// and every other header stays.
func FuzzCredentialsStrip(f *testing.F) {
	f.Add("X_MS_CLIENT_PRINCIPAL_ID", "a=1;code=k")
	f.Add("x_ms_verified", "CODE=1&cod%65=2")
	f.Add("X-Functions-Key", "keep=1;X-Amz-Signature=s")
	f.Fuzz(func(t *testing.T, name, rawQuery string) {
		if !IsToken(name) || strings.ContainsAny(rawQuery, "# ?") {
			return
		}
		r, err := http.NewRequest("GET", "http://gw/p?"+rawQuery, nil)
		if err != nil {
			return
		}
		r.RequestURI = "/p?" + rawQuery
		r.Header = http.Header{name: {"v"}, "X-Kept": {"v"}}
		testCredentials.Strip(r)
		n := HeaderKey(name)
		credential := n == "x-functions-key" || n == "authorization" || strings.HasPrefix(n, "x-ms-client-principal")
		forged := strings.HasPrefix(n, "x-ms-verified") && strings.Contains(name, "_")
		if _, left := r.Header[name]; left == (credential || forged) && name != "X-Kept" {
			t.Fatalf("header %q left: %v", name, left)
		}
		if _, ok := r.Header["X-Kept"]; !ok {
			t.Fatal("X-Kept removed")
		}
		for _, p := range strings.FieldsFunc(r.URL.RawQuery, func(c rune) bool { return c == '&' || c == ';' }) {
			k, _, _ := strings.Cut(p, "=")
			if u, err := url.QueryUnescape(k); err == nil && (strings.EqualFold(u, "code") || strings.EqualFold(u, "X-Amz-Signature")) {
				t.Fatalf("query %q: %q left", rawQuery, p)
			}
		}
		if want := "/p"; r.URL.RawQuery != "" {
			if want += "?" + r.URL.RawQuery; r.RequestURI != want {
				t.Fatalf("RequestURI %q, want %q", r.RequestURI, want)
			}
		}
	})
}

func TestPopPlatformHop(t *testing.T) {
	tests := []struct {
		name       string
		xff        []string
		want       string // the address wanted, "" for any
		wantHop    string
		wantLeft   string
		wantAbsent bool
	}{
		{"the platform's hop alone", []string{"203.0.113.9:51234"}, "", "203.0.113.9", "", true},
		{"client-written entries stay", []string{"6.6.6.6, 10.0.0.1, 203.0.113.9"}, "", "203.0.113.9", "6.6.6.6, 10.0.0.1", false},
		{"across values", []string{"6.6.6.6", "203.0.113.9"}, "", "203.0.113.9", "6.6.6.6", false},
		{"sourceIp matches", []string{"6.6.6.6, 198.51.100.7"}, "198.51.100.7", "198.51.100.7", "6.6.6.6", false},
		{"sourceIp differs", []string{"6.6.6.6, 198.51.100.8"}, "198.51.100.7", "", "6.6.6.6, 198.51.100.8", false},
		{"not an address", []string{"6.6.6.6, unknown"}, "", "", "6.6.6.6, unknown", false},
		{"none", nil, "", "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.xff != nil {
				h["X-Forwarded-For"] = tt.xff
			}
			var want netip.Addr
			if tt.want != "" {
				want = netip.MustParseAddr(tt.want)
			}
			hop := PopPlatformHop(h, want)
			got := ""
			if hop.IsValid() {
				got = hop.String()
			}
			_, present := h["X-Forwarded-For"]
			if left := strings.Join(h["X-Forwarded-For"], ","); got != tt.wantHop || left != tt.wantLeft && !tt.wantAbsent || present == tt.wantAbsent {
				t.Errorf("hop %q, left %q (present %v); want %q, %q (absent %v)", got, left, present, tt.wantHop, tt.wantLeft, tt.wantAbsent)
			}
		})
	}
}

// FuzzPopPlatformHop: the hop popped is the last entry, an address; what
// is left is every entry before it, in order; nothing else is touched.
func FuzzPopPlatformHop(f *testing.F) {
	f.Add("6.6.6.6, 203.0.113.9:1")
	f.Add("[2001:db8::1]:443")
	f.Add(",, ,")
	f.Fuzz(func(t *testing.T, xff string) {
		h := http.Header{"X-Forwarded-For": {xff}}
		hop := PopPlatformHop(h, netip.Addr{})
		entries := strings.Split(xff, ",")
		last := ParseHop(entries[len(entries)-1])
		if hop != last {
			t.Fatalf("%q: popped %v, the last entry is %v", xff, hop, last)
		}
		if !hop.IsValid() {
			if got := h["X-Forwarded-For"]; len(got) != 1 || got[0] != xff {
				t.Fatalf("%q: nothing to pop, but left %q", xff, got)
			}
			return
		}
		rest := strings.TrimSpace(strings.Join(entries[:len(entries)-1], ","))
		if got := strings.Join(h["X-Forwarded-For"], ","); got != rest {
			t.Fatalf("%q: left %q, want %q", xff, got, rest)
		}
	})
}

// TestConnectionNames: a Connection header's options are read one way
// everywhere: comma-separated, trimmed, canonical, empty ones skipped.
func TestConnectionNames(t *testing.T) {
	for _, tt := range []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{"close"}, "Close"},
		{[]string{" keep-alive , x-secret", "upgrade"}, "Keep-Alive,X-Secret,Upgrade"},
		{[]string{",, ,", ""}, ""},
		{[]string{"x_y,X-Y"}, "X_y,X-Y"},
	} {
		if got := strings.Join(slices.Collect(ConnectionNames(tt.in)), ","); got != tt.want {
			t.Errorf("ConnectionNames(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
	for range ConnectionNames([]string{"a,b", "c"}) {
		break // a stop is honoured (a yield after it panics)
	}
}

// FuzzConnectionNames: every name yielded is a non-empty, trimmed,
// canonical element of the values split at commas, in order.
func FuzzConnectionNames(f *testing.F) {
	f.Add("close", "keep-alive, X-Secret")
	f.Add(",,", " upgrade ")
	f.Fuzz(func(t *testing.T, a, b string) {
		var want []string
		for _, v := range []string{a, b} {
			for _, p := range strings.Split(v, ",") {
				if n := http.CanonicalHeaderKey(strings.TrimSpace(p)); n != "" {
					want = append(want, n)
				}
			}
		}
		got := slices.Collect(ConnectionNames([]string{a, b}))
		if !slices.Equal(got, want) {
			t.Fatalf("ConnectionNames(%q, %q) = %q; want %q", a, b, got, want)
		}
		for _, n := range got {
			if n == "" || n != strings.TrimSpace(n) || strings.Contains(n, ",") {
				t.Fatalf("yielded %q", n)
			}
		}
	})
}

package core

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestTrustedProxiesDecode(t *testing.T) {
	tests := []struct {
		in, want, wantErr string
	}{
		{"", "", ""},
		{"  ", "", ""},
		{"10.0.0.0/8", "10.0.0.0/8", ""},
		{"10.1.2.3/8, 2001:db8::/32", "10.0.0.0/8,2001:db8::/32", ""},
		{"192.0.2.7", "192.0.2.7/32", ""},
		{"::1", "::1/128", ""},
		{"10.0.0.0/8,,127.0.0.1/32", "", "without empty elements"},
		{"10.0.0.0/33", "", "CIDRs"},
		{"localhost", "", "CIDRs"},
		{"fe80::1%eth0", "", "CIDRs"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var p TrustedProxies
			err := p.Decode(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Decode(%q) = %v; want an error containing %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil || p.String() != tt.want {
				t.Fatalf("Decode(%q) = %q, %v; want %q", tt.in, p.String(), err, tt.want)
			}
		})
	}
}

func TestBelieve(t *testing.T) {
	var trust TrustedProxies
	if err := trust.Decode("10.0.0.0/8,127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	client := http.Header{
		"X-Forwarded-For":   {"6.6.6.6"},
		"X-Forwarded-Host":  {"evil.example"},
		"X-Forwarded-Proto": {"https"},
		"X-Forwarded-Port":  {"1"},
		"Forwarded":         {"for=6.6.6.6"},
		"X-Request-Start":   {"t=1"},
		"Accept":            {"*/*"},
	}
	// Client-address look-alikes (docs/security.md#what-the-gateway-trusts-host-by-host): what other proxies write
	// for the client, and forwarding headers spelt with '_'.
	lookalikes := http.Header{
		"X-Real-Ip":         {"6.6.6.6"},
		"True-Client-Ip":    {"6.6.6.6"},
		"X-Client-Ip":       {"6.6.6.6"},
		"x-real-ip":         {"6.6.6.6"},
		"X_Forwarded_For":   {"6.6.6.6"},
		"X_Forwarded_Host":  {"evil.example"},
		"x_forwarded_proto": {"https"},
		"X_Real_IP":         {"6.6.6.6"},
		"X-Realm":           {"kept"},
		"Accept":            {"*/*"},
	}
	tests := []struct {
		name    string
		trust   TrustedProxies
		peer    string
		hdr     http.Header
		trusted bool
		xff     string // "" means absent
		kept    []string
		dropped []string
	}{
		{"no trusted proxies: dropped", nil, "127.0.0.1:5000", client, false, "", []string{"Accept"},
			[]string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Forwarded-Port", "Forwarded", "X-Request-Start"}},
		{"untrusted peer: dropped", trust, "192.0.2.1:5000", client, false, "", []string{"Accept"},
			[]string{"X-Forwarded-For", "Forwarded", "X-Request-Start", "X-Forwarded-Host"}},
		{"trusted peer: kept", trust, "127.0.0.1:5000", client, true, "6.6.6.6",
			[]string{"Accept", "X-Forwarded-Host", "Forwarded", "X-Request-Start"}, nil},
		{"trusted chain: spoofed entries before the client dropped", trust, "10.0.0.2:1",
			http.Header{"X-Forwarded-For": {"6.6.6.6, 7.7.7.7", "203.0.113.9:5555, 10.0.0.9"}}, true, "203.0.113.9, 10.0.0.9", nil, nil},
		{"trusted chain all trusted", trust, "10.0.0.2:1", http.Header{"X-Forwarded-For": {"10.0.0.3, 10.0.0.4"}}, true, "10.0.0.3, 10.0.0.4", nil, nil},
		{"garbage entry stops the walk", trust, "10.0.0.2:1", http.Header{"X-Forwarded-For": {"1.1.1.1, unknown, 10.0.0.4"}}, true, "10.0.0.4", nil, nil},
		{"IPv6 peer", trust, "[::ffff:127.0.0.1]:80", http.Header{"X-Forwarded-For": {"[2001:db8::1]:443"}}, true, "2001:db8::1", nil, nil},
		{"nothing to drop: same header", nil, "192.0.2.1:5000", http.Header{"Accept": {"x"}}, false, "", []string{"Accept"}, nil},
		{"lower-case key dropped", nil, "192.0.2.1:5000", http.Header{"x-forwarded-for": {"6.6.6.6"}}, false, "", nil, []string{"x-forwarded-for"}},
		{"untrusted peer: client-address headers dropped", trust, "192.0.2.1:5000", lookalikes, false, "", []string{"Accept", "X-Realm"},
			[]string{"X-Real-Ip", "True-Client-Ip", "X-Client-Ip", "x-real-ip", "X_Forwarded_For", "X_Forwarded_Host", "x_forwarded_proto", "X_Real_IP"}},
		{"trusted peer: client-address headers kept, underscore forms dropped", trust, "127.0.0.1:5000", lookalikes, true, "",
			[]string{"Accept", "X-Realm", "X-Real-Ip", "True-Client-Ip", "X-Client-Ip", "x-real-ip"},
			[]string{"X_Forwarded_For", "X_Forwarded_Host", "x_forwarded_proto", "X_Real_IP"}},
		{"trusted peer: underscore form dropped beside a believed chain", trust, "10.0.0.2:1",
			http.Header{"X-Forwarded-For": {"203.0.113.9"}, "X_Forwarded_For": {"6.6.6.6"}}, true, "203.0.113.9", nil, []string{"X_Forwarded_For"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.hdr.Clone()
			got, trusted := tt.trust.Believe(tt.hdr, tt.peer)
			if trusted != tt.trusted {
				t.Errorf("trusted = %v; want %v", trusted, tt.trusted)
			}
			if x := strings.Join(got["X-Forwarded-For"], ","); x != tt.xff {
				t.Errorf("X-Forwarded-For = %q; want %q", x, tt.xff)
			}
			for _, k := range tt.kept {
				if _, ok := got[k]; !ok {
					t.Errorf("%s dropped; want it kept", k)
				}
			}
			for _, k := range tt.dropped {
				if _, ok := got[k]; ok {
					t.Errorf("%s kept; want it dropped", k)
				}
			}
			for k, v := range before {
				if strings.Join(tt.hdr[k], "\x00") != strings.Join(v, "\x00") {
					t.Errorf("Believe modified the caller's header %s", k)
				}
			}
		})
	}
}

func TestParseRequestStart(t *testing.T) {
	want := time.UnixMicro(1735689600123456)
	tests := []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"t=1735689600123456", want, true},
		{"1735689600123456", want, true},
		{"t=1735689600123", time.UnixMilli(1735689600123), true},
		{"t=1735689600.123", time.UnixMilli(1735689600123), true},
		{"t=1735689600", time.Unix(1735689600, 0), true},
		{"t=1735689600123456789", time.Unix(0, 1735689600123456789), true},
		{"", time.Time{}, false},
		{"t=", time.Time{}, false},
		{"t=-5", time.Time{}, false},
		{"t=abc", time.Time{}, false},
		{"t=1e300", time.Time{}, false},
		{"t=99999999999999999999999", time.Time{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseRequestStart(tt.in)
			if (err == nil) != tt.ok || tt.ok && !got.Equal(tt.want) {
				t.Errorf("ParseRequestStart(%q) = %v, %v; want %v (ok %v)", tt.in, got, err, tt.want, tt.ok)
			}
		})
	}
}

func FuzzParseRequestStart(f *testing.F) {
	for _, s := range []string{"t=1735689600123456", "t=1735689600.123", "1", "t=", "t=9223372036854775807", "t=1.5e9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got, err := ParseRequestStart(v)
		if err != nil {
			return
		}
		if !got.After(time.Unix(0, 0)) {
			t.Fatalf("ParseRequestStart(%q) = %v: not after the epoch", v, got)
		}
		// The clock starts no later than arrival, whatever the header says.
		now := time.Now()
		if s := ClockStart(got, now); s.After(now) {
			t.Fatalf("ClockStart(%v, now) = %v: after arrival", got, s)
		}
	})
}

func TestClockStart(t *testing.T) {
	arrival := time.Unix(1000, 0)
	for _, tt := range []struct {
		name     string
		accepted time.Time
		want     time.Time
	}{
		{"none", time.Time{}, arrival},
		{"earlier", arrival.Add(-800 * time.Millisecond), arrival.Add(-800 * time.Millisecond)},
		{"in the future: now", arrival.Add(time.Hour), arrival},
		{"equal", arrival, arrival},
	} {
		if got := ClockStart(tt.accepted, arrival); !got.Equal(tt.want) {
			t.Errorf("%s: ClockStart = %v; want %v", tt.name, got, tt.want)
		}
	}
}

// TestConnectionNamedStripped: a backend's "Connection: X-Secret, close"
// makes net/http's transport drop the Connection header before the
// gateway reads it; the header it named must go all the same.
func TestConnectionNamedStripped(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				c.Read(buf) // the request head; the test sends no body
				c.Write([]byte("HTTP/1.1 200 OK\r\nConnection: X-Secret, close\r\nConnection: X-Other\r\nX-Secret: s3cr3t\r\nX-Other: o\r\nX-Kept: k\r\nContent-Length: 2\r\n\r\nok"))
			}()
		}
	}()
	u := "http://" + ln.Addr().String()
	var hosts HostList
	if err := hosts.Decode(u); err != nil {
		t.Fatal(err)
	}
	f := &Forwarder{Transport: NewTransport()}
	now := time.Now()
	for range 2 { // fresh connections both times: the backend closes
		res, err := f.Forward(t.Context(), &Request{Method: "GET", Path: "/x", Header: http.Header{},
			Route: &Route{Hosts: hosts, MaxAttempts: 1}, Budget: Budget{Arrival: now, TTL: now.Add(5 * time.Second), Timeout: 5 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		res.Response.Body.Close()
		h := res.Response.Header
		RemoveHopHeaders(h)
		if h.Get("X-Secret") != "" || h.Get("X-Other") != "" || h.Get("X-Kept") != "k" {
			t.Errorf("headers after hop removal: %v; want X-Secret and X-Other gone, X-Kept kept", h)
		}
	}
}

// TestRecordingTLS: over TLS the transport still speaks HTTP/2 where the
// backend offers it, and on HTTP/1.1 a header named in "Connection: …,
// close" is stripped as over plain TCP.
func TestRecordingTLS(t *testing.T) {
	for _, h2 := range []bool{true, false} {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Proto", r.Proto)
			if r.ProtoMajor == 1 {
				w.Header().Set("Connection", "X-Secret, close")
				w.Header().Set("X-Secret", "s3cr3t")
			}
			io.WriteString(w, "ok")
		}))
		srv.EnableHTTP2 = h2
		srv.StartTLS()
		defer srv.Close()
		tr := NewTransport()
		tr.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
		var hosts HostList
		if err := hosts.Decode(srv.URL); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		res, err := (&Forwarder{Transport: tr}).Forward(t.Context(), &Request{Method: "GET", Path: "/", Header: http.Header{},
			Route: &Route{Hosts: hosts, MaxAttempts: 1}, Budget: Budget{Arrival: now, TTL: now.Add(5 * time.Second), Timeout: 5 * time.Second}})
		if err != nil {
			t.Fatalf("h2 %v: %v", h2, err)
		}
		res.Response.Body.Close()
		want := "HTTP/1.1"
		if h2 {
			want = "HTTP/2.0"
		}
		if got := res.Response.Header.Get("X-Proto"); got != want || res.Response.Header.Get("X-Secret") != "" {
			t.Errorf("h2 %v: backend saw %q, X-Secret %q; want %s and no X-Secret", h2, got, res.Response.Header.Get("X-Secret"), want)
		}
	}
}

// FuzzBelieve: whatever header a client sends, from a peer that is not
// trusted no forwarding or client-address header, in any spelling the
// backend may read as one, is passed on; from a trusted one no underscore
// form is; every other header is kept, and the caller's header is never
// modified.
func FuzzBelieve(f *testing.F) {
	for _, k := range []string{"X-Forwarded-For", "X_Forwarded_For", "x-real-ip", "True_Client_IP", "X-Client-Ip", "Forwarded", "X-Request-Start", "Accept", "X-Real-Ipv6"} {
		f.Add(k, "6.6.6.6", false)
		f.Add(k, "6.6.6.6", true)
	}
	var trust TrustedProxies
	if err := trust.Decode("10.0.0.0/8"); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, k, v string, fromProxy bool) {
		peer := "192.0.2.1:5000"
		if fromProxy {
			peer = "10.0.0.1:5000"
		}
		h := http.Header{"Accept": {"*/*"}}
		h[k] = []string{v}
		got, trusted := trust.Believe(h, peer)
		if trusted != fromProxy {
			t.Fatalf("trusted = %v; want %v", trusted, fromProxy)
		}
		if len(h[k]) != 1 || h[k][0] != v {
			t.Fatalf("Believe modified the caller's header %q", k)
		}
		dashed := strings.ToLower(strings.ReplaceAll(k, "_", "-"))
		lookalike := strings.HasPrefix(dashed, "x-forwarded-") && len(dashed) > len("x-forwarded-") ||
			dashed == "forwarded" || dashed == "x-request-start" || dashed == "x-real-ip" || dashed == "true-client-ip" || dashed == "x-client-ip"
		_, kept := got[k]
		switch {
		case lookalike && !fromProxy && kept:
			t.Errorf("untrusted peer: %q passed on", k)
		case lookalike && strings.Contains(k, "_") && kept:
			t.Errorf("trusted peer: underscore form %q passed on", k)
		case !lookalike && !kept:
			t.Errorf("%q dropped; it is no forwarding header", k)
		}
		if _, ok := got["Accept"]; !ok {
			t.Error("Accept dropped")
		}
	})
}

package tests

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"fngateway/internal/emulators"
)

// readResultURI reads a result URI of a 202 as a client that follows
// redirects does: a 307 is followed once. It returns the final answer, its
// body, and the 307's Location ("" when there was none).
func readResultURI(tb testing.TB, uri string) (*http.Response, []byte, string) {
	tb.Helper()
	resp, body, _ := Do(tb, "GET", uri, nil, "")
	if resp.StatusCode != http.StatusTemporaryRedirect {
		return resp, body, ""
	}
	loc := resp.Header.Get("Location")
	if loc == "" {
		tb.Fatalf("GET %s: 307 without a Location", uri)
	}
	resp, body, _ = Do(tb, "GET", loc, nil, "")
	return resp, body, loc
}

// frontDoor is a reverse proxy in front of whichever gateway instance is
// current: the public address (PublicBaseURL) that outlives instances.
type frontDoor struct {
	*httptest.Server
	target atomic.Pointer[url.URL]
}

func newFrontDoor(tb testing.TB) *frontDoor {
	fd := &frontDoor{}
	fd.Server = httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(fd.target.Load())
	}})
	tb.Cleanup(fd.Close)
	return fd
}

func (fd *frontDoor) route(tb testing.TB, gw *Gateway) {
	u, err := url.Parse(gw.URL)
	if err != nil {
		tb.Fatal(err)
	}
	fd.target.Store(u)
}

// TestAsyncResultURIOutlivesKey: the result URIs a 202 hands out on S3
// (versitygw, which checks SigV4) still serve the result after the access
// key the gateway signed with at 202 time has been revoked and the gateway
// runs with another one, as when a Lambda role's session token expires:
// they are gateway URLs that redirect to a URL presigned at that moment. A
// URL presigned with the revoked key is refused meanwhile. A changed
// signature, or one used for the other blob, is 403.
func TestAsyncResultURIOutlivesKey(t *testing.T) {
	t.Parallel()
	v := emulators.StartVersitygw(t)
	f := emulators.StartFauxqs(t)
	var held releases // the backend answers once the test has the 202
	be := newHeldBackend(t, 1500*time.Millisecond, held.hold)
	fd := newFrontDoor(t)
	env := s3sqsEnv(be.URL, v, f)
	env["PublicBaseURL"] = fd.URL
	gw1 := StartGateway(t, env)
	fd.route(t, gw1)

	_, acc, _ := submitAsync(t, fd.URL, "/reports/revoke", nil)
	held.release("/reports/revoke")
	for name, u := range map[string]string{"data": acc.DataBlobURI, "headers": acc.HeaderBlobURI} {
		if want := fd.URL + "/_gateway/async/" + acc.ID + "/" + name + "?sig="; !strings.HasPrefix(u, want) {
			t.Errorf("%s URI %q; want a gateway result URL %s…", name, u, want)
		}
	}
	oldSigned, _ := waitDone(t, acc.StatusURI, 1500*time.Millisecond+loadMargin) // the backend's delay
	if !strings.Contains(oldSigned, "Credential="+emulators.VersitygwAccessKey+"%2F") {
		t.Fatalf("303 Location %q: want a URL presigned with the first key", oldSigned)
	}
	const wantData = "report for /reports/revoke: payload-123"
	if resp, data, _ := readResultURI(t, acc.DataBlobURI); resp.StatusCode != 200 || string(data) != wantData {
		t.Fatalf("data URI before the revocation: %d %q; want 200 %q", resp.StatusCode, data, wantData)
	}

	// The key is revoked: versitygw serves another one only, and a new
	// gateway instance signs with that one.
	gw1.Kill()
	const newAccess, newSecret = "rotatedkey", "rotatedkey-secret"
	v.Rekey(t, newAccess, newSecret)
	env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"] = newAccess, newSecret
	gw2 := StartGateway(t, env)
	fd.route(t, gw2)
	// (versitygw answers 404 XAdminUserNotFound; S3 403 InvalidAccessKeyId.)
	if resp, body, _ := Do(t, "GET", oldSigned, nil, ""); resp.StatusCode < 400 {
		t.Fatalf("URL presigned with the revoked key: %d %s; want it refused", resp.StatusCode, body)
	}

	resp, data, loc := readResultURI(t, acc.DataBlobURI)
	if resp.StatusCode != 200 || string(data) != wantData {
		t.Errorf("data URI from the 202 after the revocation: %d %q; want 200 %q", resp.StatusCode, data, wantData)
	}
	if !strings.HasPrefix(loc, v.Endpoint()+"/") || !strings.Contains(loc, "Credential="+newAccess+"%2F") {
		t.Errorf("data URI redirected to %q; want a URL on %s presigned with the new key", loc, v.Endpoint())
	}
	resp, hb, _ := readResultURI(t, acc.HeaderBlobURI)
	var h headerBlob
	if resp.StatusCode != 200 || json.Unmarshal(hb, &h) != nil || h.Status != 201 || h.ID != acc.ID {
		t.Errorf("header URI from the 202 after the revocation: %d %s; want 200 with the header blob", resp.StatusCode, hb)
	}

	// Changing the signature, or using the data URL's for the headers.
	sig := acc.DataBlobURI[strings.LastIndex(acc.DataBlobURI, "=")+1:]
	flip := "A"
	if sig[len(sig)-1] == 'A' {
		flip = "B"
	}
	for name, u := range map[string]string{
		"changed signature":       acc.DataBlobURI[:len(acc.DataBlobURI)-1] + flip,
		"data signature, headers": strings.Replace(acc.DataBlobURI, "/data?", "/headers?", 1),
		"no signature":            acc.DataBlobURI[:strings.IndexByte(acc.DataBlobURI, '?')],
	} {
		resp, body, _ := Do(t, "GET", u, nil, "")
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Gateway-Error") != "InvalidSignature" || resp.Header.Get("Location") != "" {
			t.Errorf("%s: %d %s %s; want 403 InvalidSignature, no redirect", name, resp.StatusCode, resp.Header.Get("X-Gateway-Error"), body)
		}
	}
	if resp, _, _ := Do(t, "POST", acc.DataBlobURI, nil, "x"); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST on the data URI: %d; want 405", resp.StatusCode)
	}
}

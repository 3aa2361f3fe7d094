package tests

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"fngateway/internal/emulators"
)

// refused checks that resp is the gateway's refusal code (status want),
// naming each of names, and returns its message.
func refused(tb testing.TB, what string, resp *http.Response, body []byte, want int, code string, names ...string) string {
	tb.Helper()
	if resp.StatusCode != want {
		tb.Errorf("%s: %d %s; want %d %s", what, resp.StatusCode, body, want, code)
		return ""
	}
	ed := decodeError(tb, resp, body)
	if ed.Error.Code != code {
		tb.Errorf("%s: code %q (%s); want %s", what, ed.Error.Code, body, code)
	}
	for _, n := range names {
		if !strings.Contains(ed.Error.Message, `"`+n+`"`) {
			tb.Errorf("%s: message %q does not name %q", what, ed.Error.Message, n)
		}
	}
	if resp.Header.Get("X-Attempts") != "0" {
		tb.Errorf("%s: x-Attempts %q; want 0, nothing sent", what, resp.Header.Get("X-Attempts"))
	}
	return ed.Error.Message
}

// TestSignedRouteIsACapabilityS3 sends, through a route signed for S3 that
// names bucket A, the requests that would turn the function's role to
// another operation or bucket, against versitygw, which checks every
// signature: a copy from bucket B (X-Amz-Copy-Source), ACL and grant
// headers, a multi-object delete (?delete), and a PUT on a route that
// allows only reads. The gateway refuses each before anything is sent, and
// the S3 client, going to versitygw directly, finds bucket A unchanged.
func TestSignedRouteIsACapabilityS3(t *testing.T) {
	t.Parallel()
	v := emulators.StartVersitygw(t)
	ctx := context.Background()
	cli := s3.NewFromConfig(sdkaws.Config{
		Region:      emulators.VersitygwRegion,
		Credentials: credentials.NewStaticCredentialsProvider(emulators.VersitygwAccessKey, emulators.VersitygwSecretKey, ""),
	}, func(o *s3.Options) { o.BaseEndpoint = sdkaws.String(v.Endpoint()); o.UsePathStyle = true })
	for _, b := range []string{"bucket-a", "bucket-b"} {
		if _, err := cli.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: sdkaws.String(b)}); err != nil {
			t.Fatalf("create %s: %v", b, err)
		}
	}
	put := func(bucket, key, body string) {
		t.Helper()
		if _, err := cli.PutObject(ctx, &s3.PutObjectInput{Bucket: sdkaws.String(bucket), Key: sdkaws.String(key), Body: strings.NewReader(body)}); err != nil {
			t.Fatalf("put %s/%s: %v", bucket, key, err)
		}
	}
	exists := func(bucket, key string) bool {
		t.Helper()
		_, err := cli.HeadObject(ctx, &s3.HeadObjectInput{Bucket: sdkaws.String(bucket), Key: sdkaws.String(key)})
		var nf *types.NotFound
		if err != nil && !errors.As(err, &nf) {
			t.Fatalf("head %s/%s: %v", bucket, key, err)
		}
		return err == nil
	}
	put("bucket-b", "payroll.csv", "name,salary\n")
	put("bucket-a", "keep.txt", "kept")

	auth := `"auth":{"type":"sigv4","service":"s3","region":"` + emulators.VersitygwRegion + `"}`
	routes := fmt.Sprintf(`[{"prefix":"/files","hosts":[%q],"methods":["GET","HEAD","PUT","POST"],%s},`+
		`{"prefix":"/bucket-a","hosts":[%q],"methods":["GET","HEAD","PUT","POST"],%s},`+
		`{"prefix":"/ro","hosts":[%q],%s}]`,
		v.Endpoint()+"/bucket-a/prefix", auth, v.Endpoint(), auth, v.Endpoint()+"/bucket-a/prefix", auth)
	gw := StartGateway(t, map[string]string{
		"Hosts":                     v.Endpoint(),
		"Routes":                    routes,
		"AWS_ACCESS_KEY_ID":         emulators.VersitygwAccessKey,
		"AWS_SECRET_ACCESS_KEY":     emulators.VersitygwSecretKey,
		"AWS_EC2_METADATA_DISABLED": "true",
	})

	// The copy from bucket B: refused, and x never appears in bucket A.
	resp, body, _ := Do(t, "PUT", gw.URL+"/files/x", map[string]string{"X-Amz-Copy-Source": "/bucket-b/payroll.csv"}, "")
	refused(t, "PUT with X-Amz-Copy-Source", resp, body, 400, "HeaderNotAllowed", "X-Amz-Copy-Source")
	if exists("bucket-a", "prefix/files/x") {
		t.Errorf("bucket-a/prefix/files/x exists: the copy from bucket-b went through")
	}
	for _, h := range []map[string]string{
		{"X-Amz-Acl": "public-read"},
		{"X-Amz-Grant-Read": `uri="http://acs.amazonaws.com/groups/global/AllUsers"`},
		{"X-Amz-Website-Redirect-Location": "https://elsewhere.example/"},
		{"X-Amz-Bypass-Governance-Retention": "true"},
	} {
		resp, body, _ = Do(t, "PUT", gw.URL+"/files/y", h, "body")
		for k := range h {
			refused(t, "PUT with "+k, resp, body, 400, "HeaderNotAllowed", k)
		}
	}
	if exists("bucket-a", "prefix/files/y") {
		t.Errorf("bucket-a/prefix/files/y exists after refused PUTs")
	}

	// A multi-object delete names its keys in the body, anywhere in the
	// bucket: refused by its subresource, on the route under a prefix and
	// on the route of the whole bucket, and keep.txt survives.
	del := `<Delete><Object><Key>keep.txt</Key></Object></Delete>`
	sum := md5.Sum([]byte(del))
	md := map[string]string{"Content-MD5": base64.StdEncoding.EncodeToString(sum[:]), "Content-Type": "application/xml"}
	for _, path := range []string{"/files?delete", "/bucket-a?delete"} {
		resp, body, _ = Do(t, "POST", gw.URL+path, md, del)
		refused(t, "POST "+path, resp, body, 400, "QueryNotAllowed", "delete")
	}
	resp, body, _ = Do(t, "GET", gw.URL+"/bucket-a?acl", nil, "")
	refused(t, "GET ?acl", resp, body, 400, "QueryNotAllowed", "acl")
	if !exists("bucket-a", "keep.txt") {
		t.Errorf("bucket-a/keep.txt is gone: the delete went through")
	}

	// A route with auth and no methods allows reads only.
	resp, body, _ = Do(t, "PUT", gw.URL+"/ro/z", nil, "written")
	refused(t, "PUT on a read-only route", resp, body, 405, "MethodNotAllowed", "PUT")
	if got := resp.Header.Get("Allow"); got != "GET, HEAD" {
		t.Errorf("Allow = %q; want \"GET, HEAD\"", got)
	}
	if exists("bucket-a", "prefix/ro/z") {
		t.Errorf("bucket-a/prefix/ro/z exists after a refused PUT")
	}

	// What the routes do allow still works, signed.
	resp, body, _ = Do(t, "PUT", gw.URL+"/files/ok.txt", map[string]string{"Content-Type": "text/plain"}, "allowed")
	if resp.StatusCode != 200 {
		t.Fatalf("PUT allowed: %d %s", resp.StatusCode, body)
	}
	resp, body, _ = Do(t, "GET", gw.URL+"/files/ok.txt?response-content-type=text/x-test", nil, "")
	if resp.StatusCode != 200 || string(body) != "allowed" {
		t.Errorf("GET with response-content-type: %d %q; want 200 and the object", resp.StatusCode, body)
	}
}

// TestSignedRouteIsACapabilityAzureStorage does the same against Azurite
// in OAuth mode, with tokens from a managed-identity endpoint on loopback:
// Copy Blob from another container (x-ms-copy-source), a container listing
// and an ACL change selected by comp/restype, and the user delegation key
// (POST, which no route allows) are refused; what the routes allow works.
func TestSignedRouteIsACapabilityAzureStorage(t *testing.T) {
	t.Parallel()
	az := emulators.StartAzuriteOAuth(t)
	cred := az.TokenCredential("5e1f7a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b")
	identity := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Identity-Header") != "signed-identity-header" {
			http.Error(w, `{"error":"bad header"}`, http.StatusBadRequest)
			return
		}
		tok, err := cred.GetToken(context.Background(), policy.TokenRequestOptions{})
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		fmt.Fprintf(w, `{"access_token":%q,"expires_on":"%d","resource":%q,"token_type":"Bearer"}`, tok.Token, tok.ExpiresOn.Unix(), r.URL.Query().Get("resource"))
	}))
	defer identity.Close()
	u, err := url.Parse(az.BlobEndpoint())
	if err != nil {
		t.Fatal(err)
	}
	blob := "https://127.0.0.1:" + u.Port()
	auth := `"auth":{"type":"entra","scope":"https://storage.azure.com/.default"}`
	start := func(routes string) *Gateway {
		return StartGateway(t, map[string]string{
			"Hosts":             blob,
			"Routes":            routes,
			"IDENTITY_ENDPOINT": identity.URL + "/msi/token",
			"IDENTITY_HEADER":   "signed-identity-header",
			"SSL_CERT_FILE":     az.CertFile(),
		})
	}
	// The operator's own gateway sets up the containers; under test is
	// gw, whose data route is a capability on the blobs of container data
	// (read and written, nothing else) beside an account route.
	admin := start(fmt.Sprintf(`[{"prefix":"/devstoreaccount1","hosts":[%q],"methods":["GET","HEAD","PUT"],"allowHeaders":["x-ms-blob-type"],"allowQuery":["restype=container"],%s}]`, blob, auth))
	gw := start(fmt.Sprintf(`[{"prefix":"/devstoreaccount1","hosts":[%q],"methods":["GET","HEAD","PUT"],"allowQuery":["restype=container"],%s},`+
		`{"prefix":"/devstoreaccount1/data","hosts":[%q],"methods":["GET","HEAD","PUT"],"allowHeaders":["x-ms-blob-type"],%s}]`, blob, auth, blob, auth))
	ver := map[string]string{"x-ms-version": "2021-08-06"}
	blockBlob := map[string]string{"x-ms-version": "2021-08-06", "x-ms-blob-type": "BlockBlob"}
	for _, c := range []string{"data", "secret"} {
		if resp, body, _ := Do(t, "PUT", admin.URL+"/devstoreaccount1/"+c+"?restype=container", ver, ""); resp.StatusCode != 201 {
			t.Fatalf("create container %s: %d %s", c, resp.StatusCode, body)
		}
	}
	if resp, body, _ := Do(t, "PUT", admin.URL+"/devstoreaccount1/secret/payroll.csv", blockBlob, "name,salary\n"); resp.StatusCode != 201 {
		t.Fatalf("put the secret blob: %d %s", resp.StatusCode, body)
	}

	// Copy Blob from the secret container into data: refused, and data/x
	// does not appear.
	src := blob + "/devstoreaccount1/secret/payroll.csv"
	resp, body, _ := Do(t, "PUT", gw.URL+"/devstoreaccount1/data/x", map[string]string{"x-ms-version": "2021-08-06", "x-ms-copy-source": src}, "")
	refused(t, "PUT with x-ms-copy-source", resp, body, 400, "HeaderNotAllowed", "X-Ms-Copy-Source")
	if resp, body, _ := Do(t, "GET", gw.URL+"/devstoreaccount1/data/x", ver, ""); resp.StatusCode != 404 {
		t.Errorf("GET data/x after the refused copy: %d %.80s; want 404", resp.StatusCode, body)
	}

	// comp and restype select the operation: a listing, an ACL change.
	resp, body, _ = Do(t, "GET", gw.URL+"/devstoreaccount1/data?restype=container&comp=list", ver, "")
	refused(t, "list the container", resp, body, 400, "QueryNotAllowed", "comp", "restype")
	resp, body, _ = Do(t, "PUT", gw.URL+"/devstoreaccount1/data?restype=container&comp=acl", ver, "")
	refused(t, "set the container ACL", resp, body, 400, "QueryNotAllowed", "comp", "restype")
	resp, body, _ = Do(t, "PUT", gw.URL+"/devstoreaccount1/data/b?comp=metadata", map[string]string{"x-ms-version": "2021-08-06"}, "")
	refused(t, "set blob metadata", resp, body, 400, "QueryNotAllowed", "comp")
	// The account route allows restype=container, but not comp=list.
	resp, body, _ = Do(t, "GET", gw.URL+"/devstoreaccount1/secret?restype=container&comp=list", ver, "")
	refused(t, "list through the account route", resp, body, 400, "QueryNotAllowed", "comp")
	// The user delegation key (it signs SAS for anything the identity can
	// read) is a POST, which no route allows.
	resp, body, _ = Do(t, "POST", gw.URL+"/devstoreaccount1/?restype=service&comp=userdelegationkey", ver,
		`<?xml version="1.0" encoding="utf-8"?><KeyInfo><Expiry>2030-01-01T00:00:00Z</Expiry></KeyInfo>`)
	refused(t, "get a user delegation key", resp, body, 405, "MethodNotAllowed", "POST")
	if got := resp.Header.Get("Allow"); got != "GET, HEAD, PUT" {
		t.Errorf("Allow = %q; want \"GET, HEAD, PUT\"", got)
	}

	// What the data route allows works.
	if resp, body, _ := Do(t, "PUT", gw.URL+"/devstoreaccount1/data/b", blockBlob, "allowed"); resp.StatusCode != 201 {
		t.Fatalf("put an allowed blob: %d %s", resp.StatusCode, body)
	}
	if resp, body, _ := Do(t, "GET", gw.URL+"/devstoreaccount1/data/b?timeout=30", ver, ""); resp.StatusCode != 200 || string(body) != "allowed" {
		t.Errorf("get the blob: %d %q", resp.StatusCode, body)
	}
}

// TestClientAuthorizationHeaderIsTheGatewaysOwn: on a route that moves the
// caller's Authorization to X-Client-Authorization, the backend gets that
// header only from the gateway: a client's own X-Client-Authorization
// (alone, beside an Authorization, or spelt with '_') is refused 400
// HeaderNotAllowed and nothing is sent.
func TestClientAuthorizationHeaderIsTheGatewaysOwn(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []http.Header
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
	}))
	defer backend.Close()
	gw := StartGateway(t, map[string]string{
		"Hosts": backend.URL,
		"Routes": `[{"prefix":"/api","auth":{"type":"sigv4","service":"execute-api","region":"eu-west-1",` +
			`"clientAuthorizationHeader":"X-Client-Authorization"}}]`,
		"AWS_ACCESS_KEY_ID":         "AKIDEXAMPLE",
		"AWS_SECRET_ACCESS_KEY":     "example-secret",
		"AWS_EC2_METADATA_DISABLED": "true",
	})
	resp, body, _ := Do(t, "GET", gw.URL+"/api/me", map[string]string{"Authorization": "Bearer the-callers"}, "")
	if resp.StatusCode != 200 {
		t.Fatalf("GET with the caller's Authorization: %d %s", resp.StatusCode, body)
	}
	mu.Lock()
	if len(seen) != 1 || seen[0].Get("X-Client-Authorization") != "Bearer the-callers" || !strings.HasPrefix(seen[0].Get("Authorization"), "AWS4-HMAC-SHA256 ") {
		t.Errorf("the backend got %v; want the caller's Authorization under X-Client-Authorization and the gateway's signature", seen)
	}
	mu.Unlock()
	for _, h := range []map[string]string{
		{"X-Client-Authorization": "Bearer forged"},
		{"X-Client-Authorization": "Bearer forged", "Authorization": "Bearer the-callers"},
	} {
		resp, body, _ = Do(t, "GET", gw.URL+"/api/me", h, "")
		refused(t, fmt.Sprintf("GET with %v", h), resp, body, 400, "HeaderNotAllowed", "X-Client-Authorization")
	}
	req, _ := http.NewRequest("GET", gw.URL+"/api/me", nil)
	req.Header["X_Client_Authorization"] = []string{"Bearer forged"}
	r2, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := io.ReadAll(r2.Body)
	r2.Body.Close()
	refused(t, "GET with X_Client_Authorization", r2, b2, 400, "HeaderNotAllowed")
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 {
		t.Errorf("the backend got %d requests; want only the first, nothing of the refused ones", len(seen))
	}
}

// rawRecorder is a backend that keeps every byte its clients send, as
// they arrive on the wire (headers, chunked framing and trailer section
// included), and answers each request "ok" once it has read its body.
type rawRecorder struct {
	*httptest.Server
	mu  sync.Mutex
	raw bytes.Buffer
}

func newRawRecorder(tb testing.TB) *rawRecorder {
	rec := &rawRecorder{}
	rec.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // the trailer section is read with the body's end
		io.WriteString(w, "ok")
	}))
	rec.Listener = &recordingListener{Listener: rec.Listener, rec: rec}
	rec.Start()
	tb.Cleanup(rec.Close)
	return rec
}

// take returns what the backend has received so far and forgets it.
func (rec *rawRecorder) take() string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	s := rec.raw.String()
	rec.raw.Reset()
	return s
}

type recordingListener struct {
	net.Listener
	rec *rawRecorder
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &recordingConn{Conn: c, rec: l.rec}, nil
}

type recordingConn struct {
	net.Conn
	rec *rawRecorder
}

func (c *recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.rec.mu.Lock()
	c.rec.raw.Write(p[:n])
	c.rec.mu.Unlock()
	return n, err
}

// TestSignedRouteTrailers: a message is its head, its body and its
// trailers (issue 34). A chunked POST whose trailer section carries
// X-Client-Authorization, X-Amz-Copy-Source, Authorization and
// X-Amz-Security-Token reaches a sigv4 route's backend without any of its
// trailer fields — buffered or streamed — while the gateway's signature is
// there; on a route without auth the trailer goes on without the
// credential, forwarding and gateway fields. The backend's raw bytes are
// the evidence. Before, the signed route's backend got every field
// verbatim: Admit saw only the header section.
func TestSignedRouteTrailers(t *testing.T) {
	t.Parallel()
	be := newRawRecorder(t)
	gw := StartGateway(t, map[string]string{
		"Hosts":             be.URL,
		"MaxRetryBodyBytes": "1024",
		"Routes": `[{"prefix":"/signed","methods":["POST"],"auth":{"type":"sigv4","service":"s3","region":"eu-west-1",` +
			`"clientAuthorizationHeader":"X-Client-Authorization"}},{"prefix":"/open"}]`,
		"AWS_ACCESS_KEY_ID":         "AKIDEXAMPLE",
		"AWS_SECRET_ACCESS_KEY":     "example-secret",
		"AWS_EC2_METADATA_DISABLED": "true",
	})
	addr := strings.TrimPrefix(gw.URL, "http://")
	const trailer = "X-Client-Authorization: Bearer forged-client\r\nX-Amz-Copy-Source: /bucket-b/secret\r\n" +
		"Authorization: Bearer forged-auth\r\nX-Amz-Security-Token: forged-token\r\n" +
		"X_Forwarded_For: 6.6.6.6\r\nS7PTTL: 1\r\nX-Checksum: abc123\r\n"
	// What never reaches a backend on either route; on the signed route
	// nothing of the trailer does.
	forged := []string{"forged-auth", "forged-token", "6.6.6.6", "S7PTTL"}
	signedOnly := []string{"forged-client", "/bucket-b/secret", "abc123"}
	for _, size := range []int{5, 2000} { // buffered, streamed (MaxRetryBodyBytes 1024)
		for _, path := range []string{"/signed/k", "/open/k"} {
			t.Run(fmt.Sprintf("%s/%d bytes", path, size), func(t *testing.T) {
				data := strings.Repeat("~", size) // a byte no header the gateway writes holds
				req := "POST " + path + " HTTP/1.1\r\nHost: gw\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n" +
					"Trailer: X-Client-Authorization, X-Amz-Copy-Source, Authorization, X-Amz-Security-Token, X-Checksum\r\n\r\n" +
					strconv.FormatInt(int64(size), 16) + "\r\n" + data + "\r\n0\r\n" + trailer + "\r\n"
				resp, body, _, _ := rawExchange(t, addr, req, loadMargin)
				if resp.StatusCode != 200 || string(body) != "ok" {
					t.Fatalf("%d %s; want 200 ok", resp.StatusCode, body)
				}
				raw := be.take()
				if n := strings.Count(raw, "~"); n != size {
					t.Fatalf("the backend got %d bytes of the body; want %d\n%s", n, size, tail(raw, 600))
				}
				signed := strings.HasPrefix(path, "/signed")
				for _, f := range forged {
					if strings.Contains(raw, f) {
						t.Errorf("the backend got %q:\n%s", f, tail(raw, 600))
					}
				}
				for _, f := range signedOnly {
					if got := strings.Contains(raw, f); got == signed {
						t.Errorf("the backend got %q: %v; want %v\n%s", f, got, !signed, tail(raw, 600))
					}
				}
				if signed && (!strings.Contains(raw, "Authorization: AWS4-HMAC-SHA256 ") || strings.Contains(strings.ToLower(raw), "\r\ntrailer:")) {
					t.Errorf("want the gateway's signature and no Trailer header:\n%s", tail(raw, 600))
				}
			})
		}
	}
}

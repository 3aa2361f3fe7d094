package tests

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"fngateway/internal/emulators"
)

// countingProxy stands between the gateway and a storage emulator and
// records each request it passes: its If-None-Match and the status. The
// Host header is kept, so the client's signature still holds.
type countingProxy struct {
	*httptest.Server
	mu   sync.Mutex
	seen []proxied
}

type proxied struct {
	at          time.Time
	method      string
	ifNoneMatch string
	status      int
}

func newCountingProxy(tb testing.TB, target string) *countingProxy {
	u, err := url.Parse(target)
	if err != nil {
		tb.Fatal(err)
	}
	p := &countingProxy{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = u.Scheme, u.Host
			pr.Out.Host = pr.In.Host
		},
		ModifyResponse: func(resp *http.Response) error {
			p.mu.Lock()
			p.seen = append(p.seen, proxied{at: time.Now(), method: resp.Request.Method,
				ifNoneMatch: resp.Request.Header.Get("If-None-Match"), status: resp.StatusCode})
			p.mu.Unlock()
			return nil
		},
	}
	p.Server = httptest.NewServer(rp)
	tb.Cleanup(p.Close)
	return p
}

func (p *countingProxy) requests() []proxied {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]proxied(nil), p.seen...)
}

// checkStorageReload runs the storage-document source's checks on a
// gateway that reads its settings document through proxy, polling it every
// interval: the document's settings are in force from the start; while it
// is unchanged each poll is one conditional GET answered 304, at most one
// per interval; a new version is reloaded and named by its ETag.
func checkStorageReload(t *testing.T, g *Gateway, proxy *countingProxy, interval time.Duration, put func(doc string)) {
	t.Helper()
	v, _ := getSettingsView(t, g)
	if s := v.Settings["DefaultTTLSecs"]; s.Value != "60" || !strings.HasPrefix(s.From, "source ") || v.Source == nil || v.Source.Version == "" {
		t.Fatalf("DefaultTTLSecs %+v, source %+v; want 60 from the source's document, with its ETag", s, v.Source)
	}
	etag := v.Source.Version

	// Three polls of the unchanged document.
	start, before := time.Now(), len(proxy.requests())
	deadline := start.Add(3*interval + loadMargin)
	for len(proxy.requests()) < before+3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d polls within %v; want 3, one per %v", len(proxy.requests())-before, 3*interval+loadMargin, interval)
		}
		time.Sleep(interval / 10) // polling the proxy's count, bounded above
	}
	elapsed := time.Since(start)
	polls := proxy.requests()[before:]
	if max := int(elapsed/interval) + 1; len(polls) > max {
		t.Errorf("%d requests in %v; want at most one per %v (%d)", len(polls), elapsed, interval, max)
	}
	for _, p := range polls {
		if p.method != http.MethodGet || p.ifNoneMatch != etag || p.status != http.StatusNotModified {
			t.Errorf("a poll of the unchanged document: %s If-None-Match %q answered %d; want GET If-None-Match %q answered 304", p.method, p.ifNoneMatch, p.status, etag)
		}
	}

	put(`{"DefaultTTLSecs": 30}`)
	line := g.WaitLog(t, interval+loadMargin, func(m map[string]any) bool { return m["msg"] == "settings reloaded" })
	if line["version"] == etag || line["version"] == "" || !strings.Contains(fmt.Sprint(line["changed"]), "DefaultTTLSecs") {
		t.Errorf("reload line %v; want a new ETag and DefaultTTLSecs changed", line)
	}
	resp, body, _ := Do(t, "GET", g.URL+"/x", nil, "")
	var ms int64
	fmt.Sscanf(strings.TrimPrefix(string(body), "A "), "%d", &ms)
	if resp.StatusCode != http.StatusOK || ms <= 0 || ms > 30000 {
		t.Errorf("after the reload: %d %q; want the backend's answer under the 30 s TTL", resp.StatusCode, body)
	}
}

// TestSettingsReloadFromBlob: SettingsSource names a blob (Azurite, which
// answers If-None-Match as Blob storage does), read with the account key
// of AzureWebJobsStorage.
func TestSettingsReloadFromBlob(t *testing.T) {
	t.Parallel()
	az := emulators.StartAzurite(t)
	ctx := context.Background()
	cli, err := azblob.NewClientFromConnectionString(az.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.CreateContainer(ctx, "settings", nil); err != nil {
		t.Fatal(err)
	}
	put := func(doc string) {
		t.Helper()
		if _, err := cli.UploadBuffer(ctx, "settings", "gateway.json", []byte(doc), nil); err != nil {
			t.Fatal(err)
		}
	}
	put(`{"DefaultTTLSecs": 60}`)
	proxy := newCountingProxy(t, az.BlobEndpoint())
	endpoint := proxy.URL + "/" + emulators.AzuriteAccountName
	conn := strings.Replace(az.ConnectionString(), az.BlobEndpoint(), endpoint, 1)
	const interval = time.Second
	g := StartGateway(t, map[string]string{"Hosts": budgetBackend(t, "A").URL, "AzureWebJobsStorage": conn,
		"SettingsSource": endpoint + "/settings/gateway.json", "SettingsRefreshSecs": "1"})
	checkStorageReload(t, g, proxy, interval, put)
}

// TestSettingsReloadFromS3: SettingsSource names an S3 object (versitygw,
// which answers If-None-Match as S3 does), read with the SDK's default
// credential chain.
func TestSettingsReloadFromS3(t *testing.T) {
	t.Parallel()
	v := emulators.StartVersitygw(t)
	ctx := context.Background()
	cli := s3.NewFromConfig(sdkaws.Config{
		Region:      emulators.VersitygwRegion,
		Credentials: credentials.NewStaticCredentialsProvider(emulators.VersitygwAccessKey, emulators.VersitygwSecretKey, ""),
	}, func(o *s3.Options) { o.BaseEndpoint = sdkaws.String(v.Endpoint()); o.UsePathStyle = true })
	if _, err := cli.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: sdkaws.String("settings")}); err != nil {
		t.Fatal(err)
	}
	put := func(doc string) {
		t.Helper()
		if _, err := cli.PutObject(ctx, &s3.PutObjectInput{Bucket: sdkaws.String("settings"), Key: sdkaws.String("gateway.json"), Body: strings.NewReader(doc)}); err != nil {
			t.Fatal(err)
		}
	}
	put(`{"DefaultTTLSecs": 60}`)
	proxy := newCountingProxy(t, v.Endpoint())
	const interval = time.Second
	g := StartGateway(t, map[string]string{"Hosts": budgetBackend(t, "A").URL,
		"SettingsSource": "s3://settings/gateway.json", "SettingsRefreshSecs": "1",
		"AWS_ENDPOINT_URL_S3": proxy.URL, "AWS_REGION": emulators.VersitygwRegion,
		"AWS_ACCESS_KEY_ID": emulators.VersitygwAccessKey, "AWS_SECRET_ACCESS_KEY": emulators.VersitygwSecretKey,
		"AWS_EC2_METADATA_DISABLED": "true"})
	checkStorageReload(t, g, proxy, interval, put)
}

package httpapi

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"fngateway/core"
	"fngateway/core/async"
	"fngateway/infra/filestore"
)

// briefSigner is a store whose signatures do not last (it hides the file
// store's LastingSigner), as S3's and Azure's: the 202 hands out gateway
// result URLs.
type briefSigner struct{ async.Store }

// TestResultURLAnswers: a gateway result URL answers 404 with Retry-After
// while the request runs, 307 to the blob signed now once it is done (the
// blob then reads back), 403 for a changed signature, and 410 Expired
// after the expiry and read grace.
func TestResultURLAnswers(t *testing.T) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "the result") }))
	defer be.Close()
	fs, err := filestore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 2 * time.Second // the read grace is as long
	g := startGW(t, be.URL, func(h *Handler) {
		h.Async = &async.Async{Store: briefSigner{fs}, Queue: fs, Notifier: fs, Forwarder: h.Forwarder,
			Router: h.Settings.Router(), TTL: ttl}
		h.Blobs = fs
	})
	arrival := time.Now()
	req := &core.Request{Method: "GET", Path: "/r", Header: http.Header{}, Host: g.addr(), Budget: core.Budget{Arrival: arrival}}
	acc, _, err := g.h.Async.Submit(context.Background(), req, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(acc.DataURI, "/_gateway/async/"+acc.ID+"/data?sig=") {
		t.Fatalf("data URI %q; want a gateway result URL", acc.DataURI)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(u string) (*http.Response, string) {
		t.Helper()
		resp, err := client.Get(g.srv.URL + u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	if resp, body := get(acc.DataURI); resp.StatusCode != 404 || resp.Header.Get("Retry-After") == "" || errorCode(t, []byte(body)) != "NotFound" {
		t.Errorf("before the result: %d %v %s; want 404 NotFound with Retry-After", resp.StatusCode, resp.Header, body)
	}
	msgs, err := fs.Receive(context.Background(), 1, time.Minute)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive the continuation: %v, %d messages", err, len(msgs))
	}
	if err := g.h.Async.Process(context.Background(), msgs[0].Body); err != nil {
		t.Fatal(err)
	}

	resp, body := get(acc.DataURI)
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusTemporaryRedirect || !strings.HasPrefix(loc, g.srv.URL+"/_gateway/blobs/gateway-results/"+acc.ID+"/data?") ||
		resp.Header.Get("Cache-Control") != "no-store" || resp.Header.Get("X-Attempts") != "1" {
		t.Fatalf("once done: %d Location %q %v %s; want 307 to the data blob, no-store, x-Attempts 1", resp.StatusCode, loc, resp.Header, body)
	}
	if resp, body := get(strings.TrimPrefix(loc, g.srv.URL)); resp.StatusCode != 200 || body != "the result" {
		t.Errorf("the redirect's blob: %d %q; want 200 the result", resp.StatusCode, body)
	}
	if resp, _ := get(acc.HeaderURI); resp.StatusCode != http.StatusTemporaryRedirect ||
		!strings.Contains(resp.Header.Get("Location"), "/gateway-results/"+acc.ID+"/headers.json?") {
		t.Errorf("header URI: %d to %q; want 307 to the header blob", resp.StatusCode, resp.Header.Get("Location"))
	}
	changed := acc.DataURI[:len(acc.DataURI)-1] + map[bool]string{true: "B", false: "A"}[strings.HasSuffix(acc.DataURI, "A")]
	if resp, body := get(changed); resp.StatusCode != 403 || errorCode(t, []byte(body)) != "InvalidSignature" || resp.Header.Get("Location") != "" {
		t.Errorf("changed signature: %d %s; want 403 InvalidSignature", resp.StatusCode, body)
	}

	// A request that arrived a minute ago is past its expiry and read grace.
	old := &core.Request{Method: "GET", Path: "/r", Header: http.Header{}, Host: g.addr(), Budget: core.Budget{Arrival: arrival.Add(-time.Minute)}}
	gone, _, err := g.h.Async.Submit(context.Background(), old, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if resp, body := get(gone.DataURI); resp.StatusCode != 410 || errorCode(t, []byte(body)) != "Expired" || resp.Header.Get("Location") != "" {
		t.Errorf("after the read grace: %d %s; want 410 Expired, nothing signed", resp.StatusCode, body)
	}
}

package httpapi

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"fngateway/core"
)

// slowClient is a ResponseWriter whose client takes each write only after
// pause: the relay blocks in Write, as it does on a client whose socket
// buffers are full.
type slowClient struct {
	pause  time.Duration
	header http.Header
	status int
	body   bytes.Buffer
}

func (c *slowClient) Header() http.Header { return c.header }

func (c *slowClient) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
}

func (c *slowClient) Write(p []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	time.Sleep(c.pause)
	return c.body.Write(p)
}

func (c *slowClient) Flush() {}

// chunkBody is a backend's response body: chunks "chunk" ready at once,
// then, after silentAfter of them (when not negative), silence until the
// attempt is cancelled.
type chunkBody struct {
	ctx         context.Context
	left        int
	silentAfter int
}

func (b *chunkBody) Read(p []byte) (int, error) {
	if b.silentAfter == 0 {
		<-b.ctx.Done()
	}
	if err := context.Cause(b.ctx); err != nil {
		return 0, err
	}
	if b.left == 0 {
		return 0, io.EOF
	}
	b.left--
	b.silentAfter--
	return copy(p, "chunk"), nil
}

func (*chunkBody) Close() error { return nil }

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestRelayIdleGapIsBackendSilence: with idleTimeoutMs 1000, a backend
// whose data is always ready streams all its chunks to a client that takes
// each only 2 s (twice the limit) after the last: the time the relay waits
// for the client is not the backend's silence. A backend that falls silent
// is still cut, and the client sees the transfer break.
func TestRelayIdleGapIsBackendSilence(t *testing.T) {
	const idle = time.Second
	tests := []struct {
		name        string
		silentAfter int // chunks the backend sends before it falls silent; -1: never
		wantChunks  int
		wantCut     bool
		wantAt      time.Duration // when the relay ends, from the request
	}{
		{"a slow client, a ready backend", -1, 5, false, 10 * time.Second},
		{"a slow client, a backend silent after two chunks", 2, 2, true, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := testSettings(t, "http://backend.invalid:1")
				if err := s.Routes.Decode(`[{"prefix":"/s","idleTimeoutMs":1000}]`); err != nil {
					t.Fatal(err)
				}
				stats := &core.Stats{}
				rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
					return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, ContentLength: -1,
						Body: &chunkBody{ctx: r.Context(), left: 5, silentAfter: tt.silentAfter}}, nil
				})
				h := &Handler{Settings: s, Forwarder: &core.Forwarder{Transport: rt, Stats: stats}, Stats: stats}
				h.Init()
				w := &slowClient{pause: 2 * idle, header: http.Header{}}
				start := time.Now()
				aborted := func() (aborted bool) {
					defer func() {
						if v := recover(); v != nil {
							if v != http.ErrAbortHandler {
								panic(v)
							}
							aborted = true
						}
					}()
					h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://gw/s/x", nil))
					return false
				}()
				if got := strings.Count(w.body.String(), "chunk"); w.status != http.StatusOK || got != tt.wantChunks {
					t.Errorf("client got %d with %d chunks; want 200 with %d", w.status, got, tt.wantChunks)
				}
				if aborted != tt.wantCut {
					t.Errorf("transfer aborted = %v; want %v", aborted, tt.wantCut)
				}
				wantCuts := int64(0)
				if tt.wantCut {
					wantCuts = 1
				}
				if got := stats.StreamIdleCut.Load(); got != wantCuts {
					t.Errorf("stream_idle_cut = %d; want %d", got, wantCuts)
				}
				if got := time.Since(start); got != tt.wantAt {
					t.Errorf("relay ended after %v; want %v", got, tt.wantAt)
				}
			})
		})
	}
}

package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"fngateway/adapters/lambda"
	"fngateway/core"
)

// sizedBody is a backend's response body of left bytes of fill, read 100
// at a time; it records how much was read and whether it was closed.
type sizedBody struct {
	left, read int
	fill       byte
	closed     bool
}

func (b *sizedBody) Read(p []byte) (int, error) {
	if b.closed {
		return 0, io.ErrClosedPipe
	}
	if b.left == 0 {
		return 0, io.EOF
	}
	n := min(len(p), 100, b.left)
	for i := range n {
		p[i] = b.fill
	}
	b.left -= n
	b.read += n
	return n, nil
}

func (b *sizedBody) Close() error { b.closed = true; return nil }

// TestAnswerCap: with a host response limit, an answer that cannot fit is
// a gateway error (502 ResponseTooLarge, x-Attempts) before anything of it
// is sent, its body read no further than the limit and closed; one that
// fits passes whole; on a streaming host one that passes the limit after
// its status is cut.
func TestAnswerCap(t *testing.T) {
	whole := core.ResponseLimit{MaxBytes: 1000, Whole: true, Form: lambda.BufferedResponse.Form}
	stream := core.ResponseLimit{MaxBytes: 1000}
	tests := []struct {
		name        string
		limit       core.ResponseLimit
		contentType string
		size        int
		fill        byte
		known       bool // Content-Length sent
		wantStatus  int
		wantCut     bool
		wantMaxRead int // the most of the body the gateway may read
	}{
		{"whole: text that fits passes", whole, "text/plain", 600, 'a', false, 200, false, 600},
		{"whole: text over the limit, length unknown", whole, "text/plain", 5000, 'a', false, 502, false, 1000},
		{"whole: text over the limit, length known", whole, "text/plain", 5000, 'a', true, 502, false, 0},
		{"whole: binary that fits as bytes but not as base64", whole, "application/octet-stream", 800, 0xff, false, 502, false, 800},
		{"whole: escapes push text over", whole, "text/plain", 800, '\x01', false, 502, false, 800},
		{"stream: fits", stream, "application/octet-stream", 1000, 0xff, true, 200, false, 1000},
		{"stream: over the limit, length known", stream, "application/octet-stream", 1001, 0xff, true, 502, false, 0},
		{"stream: over the limit, length unknown", stream, "application/octet-stream", 5000, 0xff, false, 200, true, 1100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := &sizedBody{left: tt.size, fill: tt.fill}
			rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				cl := int64(-1)
				if tt.known {
					cl = int64(tt.size)
				}
				return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {tt.contentType}, "X-Backend": {"1"}},
					ContentLength: cl, Body: body}, nil
			})
			h := &Handler{Settings: testSettings(t, "http://backend.invalid:1"), Forwarder: &core.Forwarder{Transport: rt},
				Host: core.HostCaps{Name: "test", Response: tt.limit}}
			h.Init()
			w := httptest.NewRecorder()
			cut := func() (cut bool) {
				defer func() {
					if v := recover(); v != nil {
						if v != http.ErrAbortHandler {
							panic(v)
						}
						cut = true
					}
				}()
				h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://gw/x", nil))
				return false
			}()
			if w.Code != tt.wantStatus || cut != tt.wantCut {
				t.Fatalf("status %d, cut %v; want %d, cut %v: %s", w.Code, cut, tt.wantStatus, tt.wantCut, w.Body)
			}
			if body.read > tt.wantMaxRead {
				t.Errorf("read %d bytes of the backend's body, want at most %d", body.read, tt.wantMaxRead)
			}
			if got := w.Header().Get("X-Attempts"); got != "1" {
				t.Errorf("x-Attempts %q, want 1", got)
			}
			switch {
			case tt.wantStatus == 502:
				var doc struct {
					Error struct {
						Code     string
						Attempts []core.Attempt
					}
				}
				if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil || doc.Error.Code != "ResponseTooLarge" || len(doc.Error.Attempts) != 1 {
					t.Errorf("body %s, want the ResponseTooLarge error with its attempt", w.Body)
				}
				if w.Header().Get("X-Gateway-Error") != "ResponseTooLarge" || w.Header().Get("X-Backend") != "" {
					t.Errorf("headers %v: want the gateway error's, none of the backend's", w.Header())
				}
				if !body.closed {
					t.Errorf("the backend's body was not closed: its upstream goes on")
				}
			case tt.wantCut:
				if !body.closed || w.Body.Len() > int(tt.limit.MaxBytes) {
					t.Errorf("cut stream sent %d bytes (closed %v), want at most %d", w.Body.Len(), body.closed, tt.limit.MaxBytes)
				}
			default:
				if want := bytes.Repeat([]byte{tt.fill}, tt.size); !bytes.Equal(w.Body.Bytes(), want) {
					t.Errorf("body of %d bytes, want the backend's %d", w.Body.Len(), tt.size)
				}
			}
		})
	}
}

// TestAnswerCapFinalEncoding: a Whole host counts the answer, once its
// body is complete, in the encoding it will send (issue 34). A text body
// whose last rune is cut travels base64-encoded, so one that fitted as a
// JSON string while it arrived is 502 ResponseTooLarge at its end; a body
// of control characters, six times its size as a JSON string, travels
// base64-encoded and fits.
func TestAnswerCapFinalEncoding(t *testing.T) {
	const limit = 10000
	tests := []struct {
		name       string
		body       []byte
		wantStatus int
	}{
		// 7,502 bytes as text, 10,004 as base64: the head takes it over.
		{"last rune cut", append(bytes.Repeat([]byte("a"), 7500), 0xe2, 0x82), 502},
		// 36,000 bytes as a JSON string, 8,000 as base64.
		{"control characters", bytes.Repeat([]byte{1}, 6000), 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/plain"}},
					ContentLength: -1, Body: io.NopCloser(bytes.NewReader(tt.body))}, nil
			})
			h := &Handler{Settings: testSettings(t, "http://backend.invalid:1"), Forwarder: &core.Forwarder{Transport: rt},
				Host: core.HostCaps{Name: "test", Response: core.ResponseLimit{MaxBytes: limit, Whole: true, Form: lambda.BufferedResponse.Form}}}
			h.Init()
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://gw/x", nil))
			if w.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d: %.200q", w.Code, tt.wantStatus, w.Body)
			}
			if tt.wantStatus == 502 && w.Header().Get("X-Gateway-Error") != "ResponseTooLarge" {
				t.Errorf("x-Gateway-Error %q, want ResponseTooLarge", w.Header().Get("X-Gateway-Error"))
			}
			if tt.wantStatus == 200 {
				if !bytes.Equal(w.Body.Bytes(), tt.body) {
					t.Errorf("body of %d bytes, want the backend's %d", w.Body.Len(), len(tt.body))
				}
				m := lambda.BufferedResponse.Form.Meter(w.Header()).(interface {
					core.PayloadMeter
					Base64() bool
				})
				m.Write(w.Body.Bytes())
				if !m.Base64() || m.Cost() > limit {
					t.Errorf("the answer travels base64 %v at %d bytes, want base64 within %d", m.Base64(), m.Cost(), limit)
				}
			}
		})
	}
}

// TestAnswerCapHead: the Content-Length of an answer to HEAD announces a
// body that is not sent: it passes, however large.
func TestAnswerCapHead(t *testing.T) {
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Length": {"7000000"}}, ContentLength: 7000000, Body: http.NoBody}, nil
	})
	h := &Handler{Settings: testSettings(t, "http://backend.invalid:1"), Forwarder: &core.Forwarder{Transport: rt},
		Host: core.HostCaps{Response: core.ResponseLimit{MaxBytes: 1000, Whole: true, Form: lambda.BufferedResponse.Form}}}
	h.Init()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodHead, "http://gw/x", nil))
	if w.Code != http.StatusOK || w.Header().Get("Content-Length") != "7000000" {
		t.Errorf("HEAD answered %d %v, want 200 with the backend's Content-Length", w.Code, w.Header())
	}
}

// TestAnswerCapPerRequest: a limit set on the request (a Lambda API
// Gateway event under a streaming Function URL) wins over the host's.
func TestAnswerCapPerRequest(t *testing.T) {
	body := &sizedBody{left: 2000, fill: 'a'}
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/plain"}}, ContentLength: -1, Body: body}, nil
	})
	h := &Handler{Settings: testSettings(t, "http://backend.invalid:1"), Forwarder: &core.Forwarder{Transport: rt},
		Host: core.HostCaps{Response: core.ResponseLimit{MaxBytes: 1 << 20}}}
	h.Init()
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "http://gw/x", nil)
	r = r.WithContext(core.WithResponseLimit(r.Context(), core.ResponseLimit{MaxBytes: 1000, Whole: true, Form: lambda.BufferedResponse.Form}))
	h.ServeHTTP(w, r)
	if w.Code != http.StatusBadGateway || w.Header().Get("X-Gateway-Error") != "ResponseTooLarge" {
		t.Errorf("status %d %q, want 502 ResponseTooLarge", w.Code, w.Header().Get("X-Gateway-Error"))
	}
}

// TestAnswerCapBodyBytes: under a limit without a Form (a Lambda response
// stream) an answer costs its body's bytes alone, its headers not counted
// (moved from core's TestPayloadMeterHead with the bytes form).
func TestAnswerCapBodyBytes(t *testing.T) {
	w := httptest.NewRecorder()
	w.Header().Set("Content-Type", "text/plain")
	w.Header()["Set-Cookie"] = []string{"a=1", "b=2"}
	c := newAnswerCap(w, core.ResponseLimit{MaxBytes: 1000})
	if got := c.meter.Cost(); got != 0 {
		t.Errorf("an empty answer costs %d; want 0, headers not counted", got)
	}
	c.meter.Write([]byte("hello"))
	if got, least := c.meter.Cost(), c.meter.Least(3); got != 5 || least != 8 {
		t.Errorf("5 bytes cost %d, at least %d with 3 more; want 5 and 8", got, least)
	}
}

package lambda

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"fngateway/core"
)

// checkPayload reads the document newPayload writes and checks it against
// aws-lambda-go's encoding of the same answer, and its length against what
// core.PayloadMeter counted for the host's limit.
func checkPayload(tb testing.TB, status int, h http.Header, body []byte) {
	tb.Helper()
	doc, err := io.ReadAll(newPayload(status, h, body))
	if err != nil {
		tb.Fatal(err)
	}
	var got events.LambdaFunctionURLResponse
	if err := json.Unmarshal(doc, &got); err != nil {
		tb.Fatalf("document %.200q: %v", doc, err)
	}
	hdr, cookies := responseHeaders(h)
	want := events.LambdaFunctionURLResponse{StatusCode: status, Headers: hdr, Cookies: cookies, Body: string(body)}
	if !core.TextBody(h.Get("Content-Type"), body) {
		want.IsBase64Encoded = true
		want.Body = string(must(json.Marshal(body))[1:])
		want.Body = want.Body[:len(want.Body)-1]
	}
	if got.StatusCode != want.StatusCode || got.Body != want.Body || got.IsBase64Encoded != want.IsBase64Encoded ||
		!equalMaps(got.Headers, want.Headers) || strings.Join(got.Cookies, "\n") != strings.Join(want.Cookies, "\n") {
		tb.Fatalf("document %.300q decodes to %+.300v, want %+.300v", doc, got, want)
	}
	m := core.NewPayloadMeter(core.PayloadJSON, h)
	m.Write(body)
	if int64(len(doc)) > m.Cost() {
		tb.Fatalf("document of %d bytes, the meter counted %d", len(doc), m.Cost())
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestPayload(t *testing.T) {
	euro := strings.Repeat("€", payloadChunk) // runes cross every chunk boundary
	tests := []struct {
		name, contentType string
		body              []byte
	}{
		{"empty", "", nil},
		{"text", "text/plain", []byte("héllo \"x\" \\ <&> \u2028\n\t\x01")},
		{"text across chunks", "application/json", []byte(euro)},
		{"binary across chunks", "application/octet-stream", bytes.Repeat([]byte{0, 0xff, 0x80}, payloadChunk)},
		{"invalid UTF-8 labelled text", "text/plain", []byte("ok\xff")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{"Content-Type": {tt.contentType}, "Set-Cookie": {"a=1", "b=2"}, "X-Two": {"1", "2"}}
			checkPayload(t, 201, h, tt.body)
		})
	}
}

func FuzzPayload(f *testing.F) {
	f.Add([]byte("héllo\u2028"), true)
	f.Add([]byte{0, 0xff}, false)
	f.Fuzz(func(t *testing.T, body []byte, text bool) {
		ct := "application/octet-stream"
		if text {
			ct = "text/plain"
		}
		checkPayload(t, 200, http.Header{"Content-Type": {ct}}, body)
	})
}

package lambda

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// checkPayload reads the document newPayload writes and checks it against
// aws-lambda-go's encoding of the same answer, and its length against what
// payloadMeter counted for the host's limit.
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
	if payloadBase64(h, body) {
		want.IsBase64Encoded = true
		want.Body = string(must(json.Marshal(body))[1:])
		want.Body = want.Body[:len(want.Body)-1]
	}
	if got.StatusCode != want.StatusCode || got.Body != want.Body || got.IsBase64Encoded != want.IsBase64Encoded ||
		!equalMaps(got.Headers, want.Headers) || strings.Join(got.Cookies, "\n") != strings.Join(want.Cookies, "\n") {
		tb.Fatalf("document %.300q decodes to %+.300v, want %+.300v", doc, got, want)
	}
	m := newPayloadMeter(h)
	m.Write(body)
	if int64(len(doc)) > m.Cost() {
		tb.Fatalf("document of %d bytes, the meter counted %d", len(doc), m.Cost())
	}
	// The meter counts the body exactly as it is sent: the JSON string or
	// base64 between `,"body":"` (which no escaped header can hold) and
	// the document's closing `"}`.
	i := bytes.Index(doc, []byte(`,"body":"`))
	if i < 0 || !bytes.HasSuffix(doc, []byte(`"}`)) {
		tb.Fatalf("document %.300q has no body member at its end", doc)
	}
	head := newPayloadMeter(h).Cost()
	if sent, counted := int64(len(doc)-i-len(`,"body":"`)-len(`"}`)), m.Cost()-head; sent != counted {
		tb.Fatalf("body sent as %d bytes (base64 %v), counted as %d", sent, got.IsBase64Encoded, counted)
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
		// The escaping corpus of issue 34: cheaper as base64.
		{"0x01 as text", "text/plain", bytes.Repeat([]byte{1}, 3*payloadChunk)},
		{"backslashes", "text/plain", bytes.Repeat([]byte(`\`), 3*payloadChunk)},
		{"quotes", "application/json", bytes.Repeat([]byte(`"`), 3*payloadChunk)},
		{"line separators", "text/plain", []byte(strings.Repeat("\u2028", payloadChunk))},
		{"ANSI colour", "text/plain", bytes.Repeat([]byte("\x1b[1;31mE\x1b[0m\n"), payloadChunk/4)},
		{"last rune cut", "text/plain", append(bytes.Repeat([]byte("text "), payloadChunk), 0xe2, 0x82)},
		{"a few escapes stay text", "text/plain", []byte("a \"b\" \\ c\n")},
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
	f.Add(bytes.Repeat([]byte{1}, 100), true)
	f.Add(bytes.Repeat([]byte(`\"`), 50), true)
	f.Add([]byte(strings.Repeat("\u2028", 40)), true)
	f.Add(bytes.Repeat([]byte("\x1b[31mERR\x1b[0m\n"), 10), true)
	f.Add([]byte("text\xe2\x82"), true)
	f.Fuzz(func(t *testing.T, body []byte, text bool) {
		ct := "application/octet-stream"
		if text {
			ct = "text/plain"
		}
		checkPayload(t, 200, http.Header{"Content-Type": {ct}}, body)
	})
}

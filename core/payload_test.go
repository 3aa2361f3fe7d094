package core

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"testing"
)

// jsonString is b as encoding/json writes it as a string with HTML
// escaping off (as aws-lambda-go encodes responses), quotes included.
func jsonString(tb testing.TB, b []byte) []byte {
	tb.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(string(b)); err != nil {
		tb.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// bodyCost is what the body alone costs in a payload format 2.0 response:
// its JSON string without the quotes when it is text, else its base64.
func bodyCost(tb testing.TB, contentType string, b []byte) int64 {
	if TextBody(contentType, b) {
		return int64(len(jsonString(tb, b)) - 2)
	}
	return int64(len(base64.StdEncoding.EncodeToString(b)))
}

func TestPayloadMeter(t *testing.T) {
	tests := []struct {
		name, contentType string
		parts             []string
	}{
		{"empty", "text/plain", nil},
		{"ascii text", "text/plain; charset=utf-8", []string{"hello ", "world"}},
		{"escapes", "application/json", []string{`{"a":"b\\c"}` + "\n\t\r\b\f\x01\x1f<>&"}},
		{"line separators", "text/plain", []string{"a\u2028b\u2029c"}},
		{"rune split across writes", "text/plain", []string{"x\xe2", "\x82", "\xacy", "\xe2\x80", "\xa8"}},
		{"invalid utf-8 turns base64", "text/plain", []string{"ok", "\xff", "more"}},
		{"rune cut at the end turns base64", "text/plain", []string{"ok\xe2\x82"}},
		{"bad continuation across writes", "text/plain", []string{"\xe2", "A"}},
		{"binary", "application/octet-stream", []string{"\x00\x01\x02", "\x03"}},
		{"no content type", "", []string{"text without a type"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{"Content-Type": {tt.contentType}}
			m := NewPayloadMeter(PayloadJSON, h)
			var body []byte
			for _, p := range tt.parts {
				if least := m.Least(0); least > m.head+bodyCost(t, tt.contentType, append(body, p...)) {
					t.Errorf("Least before %q = %d, above the final cost", p, least)
				}
				m.Write([]byte(p))
				body = append(body, p...)
			}
			if got, want := m.Cost()-m.head, bodyCost(t, tt.contentType, body); got != want {
				t.Errorf("body cost %d, want %d", got, want)
			}
			if m.Least(0) > m.Cost() {
				t.Errorf("Least %d > Cost %d", m.Least(0), m.Cost())
			}
		})
	}
}

// TestPayloadMeterHead: the headers' share covers the JSON a payload
// format 2.0 response writes for them, joined or as cookies.
func TestPayloadMeterHead(t *testing.T) {
	h := http.Header{"Content-Type": {"text/plain"}, "X-Long": {`"quoted"`, "<v>"}, "Set-Cookie": {"a=1", "b=2"}}
	resp := struct {
		StatusCode      int               `json:"statusCode"`
		Headers         map[string]string `json:"headers"`
		Cookies         []string          `json:"cookies"`
		Body            string            `json:"body"`
		IsBase64Encoded bool              `json:"isBase64Encoded"`
	}{StatusCode: 200, Headers: map[string]string{"Content-Type": "text/plain", "X-Long": `"quoted",<v>`}, Cookies: h["Set-Cookie"]}
	m := NewPayloadMeter(PayloadJSON, h)
	if got := jsonLen(resp); m.Cost() < got {
		t.Errorf("an empty answer costs %d, the response it becomes is %d bytes", m.Cost(), got)
	}
	if b := NewPayloadMeter(PayloadBytes, h); b.Cost() != 0 {
		t.Errorf("PayloadBytes counts headers: %d", b.Cost())
	}
}

// FuzzPayloadMeter: whatever the bytes and however they are split, the
// meter counts the body exactly as encoding/json and base64 write it, and
// Least never exceeds what the answer finally costs.
func FuzzPayloadMeter(f *testing.F) {
	f.Add([]byte("hello \u2028 \"world\"\n"), uint8(3), true)
	f.Add([]byte("\xe2\x82\xac\xff"), uint8(1), true)
	f.Add([]byte{0, 1, 2, 250}, uint8(2), false)
	f.Fuzz(func(t *testing.T, body []byte, step uint8, text bool) {
		ct := "application/octet-stream"
		if text {
			ct = "text/plain"
		}
		m := NewPayloadMeter(PayloadJSON, http.Header{"Content-Type": {ct}})
		final := m.head + bodyCost(t, ct, body)
		n := int(step%7) + 1
		for i := 0; i < len(body); i += n {
			if least := m.Least(int64(len(body) - i)); least > final {
				t.Fatalf("Least(%d) at %d = %d, above the final cost %d", len(body)-i, i, least, final)
			}
			m.Write(body[i:min(i+n, len(body))])
		}
		if got := m.Cost(); got != final {
			t.Fatalf("cost %d, want %d", got, final)
		}
	})
}

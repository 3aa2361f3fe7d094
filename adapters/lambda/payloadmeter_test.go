package lambda

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
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

// bodyCost is what the body alone costs in a payload format 2.0 response,
// worked out with encoding/json and encoding/base64 themselves, and
// whether it travels base64-encoded: its JSON string without the quotes
// when it is text (a textual media type, valid UTF-8) and that string is
// no longer than its base64, else its base64.
func bodyCost(tb testing.TB, contentType string, b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	b64 := int64(len(base64.StdEncoding.EncodeToString(b)))
	if textMediaType(contentType) && utf8.Valid(b) {
		if s := int64(len(jsonString(tb, b)) - 2); s <= b64 {
			return s, false
		}
	}
	return b64, true
}

// escapingCorpus are bodies small in bytes and large as a JSON string
// (issue 34): each is labelled text, and each would cost several times its
// size as a JSON string.
var escapingCorpus = []struct{ name, body string }{
	{"0x01 bytes", strings.Repeat("\x01", 64)},
	{"backslashes", strings.Repeat(`\`, 64)},
	{"quotes", strings.Repeat(`"`, 64)},
	{"line separators", strings.Repeat("\u2028", 64)},
	{"ANSI colour", strings.Repeat("\x1b[1;31mE\x1b[0m\n", 8)},
	{"last rune cut", strings.Repeat("text ", 16) + "\xe2\x82"},
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
	for _, c := range escapingCorpus {
		tests = append(tests, struct {
			name, contentType string
			parts             []string
		}{"corpus/" + c.name, "text/plain", []string{c.body[:len(c.body)/3], c.body[len(c.body)/3:]}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{"Content-Type": {tt.contentType}}
			m := newPayloadMeter(h)
			var body []byte
			for _, p := range tt.parts {
				if least, final := m.Least(0), m.head+must2(bodyCost(t, tt.contentType, append(body, p...))); least > final {
					t.Errorf("Least before %q = %d, above the final cost %d", p, least, final)
				}
				m.Write([]byte(p))
				body = append(body, p...)
			}
			want, b64 := bodyCost(t, tt.contentType, body)
			if got := m.Cost() - m.head; got != want {
				t.Errorf("body cost %d, want %d", got, want)
			}
			if m.Base64() != b64 || payloadBase64(h, body) != b64 {
				t.Errorf("Base64 %v, PayloadBase64 %v; want %v", m.Base64(), payloadBase64(h, body), b64)
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
	m := newPayloadMeter(h)
	if got := jsonLen(resp); m.Cost() < got {
		t.Errorf("an empty answer costs %d, the response it becomes is %d bytes", m.Cost(), got)
	}
}

// FuzzPayloadMeter: whatever the bytes and however they are split, the
// meter counts the body exactly as encoding/json and base64 write it, and
// Least never exceeds what the answer finally costs.
func FuzzPayloadMeter(f *testing.F) {
	f.Add([]byte("hello \u2028 \"world\"\n"), uint8(3), true)
	f.Add([]byte("\xe2\x82\xac\xff"), uint8(1), true)
	f.Add([]byte{0, 1, 2, 250}, uint8(2), false)
	for _, c := range escapingCorpus {
		f.Add([]byte(c.body), uint8(5), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, step uint8, text bool) {
		ct := "application/octet-stream"
		if text {
			ct = "text/plain"
		}
		m := newPayloadMeter(http.Header{"Content-Type": {ct}})
		final := m.head + must2(bodyCost(t, ct, body))
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
		if _, b64 := bodyCost(t, ct, body); m.Base64() != b64 {
			t.Fatalf("Base64 %v, want %v", m.Base64(), b64)
		}
	})
}

func must2(n int64, _ bool) int64 { return n }

// TestPayloadEncodingCorpus: every body of the escaping corpus, which
// costs several times its size as a JSON string, travels base64-encoded,
// so an answer of it costs no more than 4/3 of its size plus its head.
func TestPayloadEncodingCorpus(t *testing.T) {
	for _, c := range escapingCorpus {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{"Content-Type": {"text/plain; charset=utf-8"}}
			m := newPayloadMeter(h)
			m.Write([]byte(c.body))
			if !m.Base64() {
				t.Errorf("a %d-byte body travels as a JSON string of %d bytes", len(c.body), m.Cost()-m.head)
			}
			if got, most := m.Cost()-m.head, int64(base64.StdEncoding.EncodedLen(len(c.body))); got > most {
				t.Errorf("body cost %d, more than its base64 %d", got, most)
			}
		})
	}
}

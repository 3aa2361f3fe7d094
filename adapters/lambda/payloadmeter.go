package lambda

import (
	"encoding/base64"
	"encoding/json"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"fngateway/core"
)

// jsonPayload is the form of an answer Lambda carries as one JSON document,
// as its payload format 2.0 responses are (a buffered Function URL, API
// Gateway): status and headers as JSON members, the body a JSON string or
// base64, as payloadMeter.Base64 decides. The limit counts the whole
// document (BufferedResponse).
type jsonPayload struct{}

// Meter returns a payloadMeter for an answer with headers h.
func (jsonPayload) Meter(h http.Header) core.PayloadMeter { return newPayloadMeter(h) }

// Note says what the limit counts besides the body.
func (jsonPayload) Note() string {
	return " of response payload, headers and JSON encoding included (a binary body is base64-encoded)"
}

// jsonEnvelope bounds the JSON members of a payload format 2.0 response
// besides its headers' and body's contents: {"statusCode":…,"headers":,
// "cookies":,"body":"","isBase64Encoded":false} and a final newline.
const jsonEnvelope = 128

// payloadMeter counts what an answer costs as one JSON document of payload
// format 2.0 as its body is written to it, without holding the body:
// base64 is counted by length, a JSON string by its escapes as
// encoding/json writes them (with HTML escaping off, as aws-lambda-go
// encodes responses). Not safe for concurrent use.
type payloadMeter struct {
	head    int64 // what everything but the body costs (at most)
	n       int64 // body bytes so far
	text    bool  // the body is still a candidate JSON string
	escaped int64 // the body's JSON string so far (its quotes are in head)
	partial [utf8.UTFMax]byte
	np      int // bytes of partial: a rune begun at the end of a write
}

// newPayloadMeter returns a meter for an answer whose headers are h (the
// headers as the host will send them, Set-Cookie included). The headers
// are counted at their JSON length as one array of values per name, which
// is at least what a payload format 2.0 response writes for them.
func newPayloadMeter(h http.Header) *payloadMeter {
	return &payloadMeter{head: jsonEnvelope + jsonLen(h), text: textMediaType(h.Get("Content-Type"))}
}

// jsonLen is the length of v as encoding/json writes it with HTML escaping
// off.
func jsonLen(v any) int64 {
	var c byteCounter
	enc := json.NewEncoder(&c)
	enc.SetEscapeHTML(false)
	enc.Encode(v) // an http.Header always encodes
	return int64(c)
}

type byteCounter int64

func (c *byteCounter) Write(p []byte) (int, error) { *c += byteCounter(len(p)); return len(p), nil }

// Write counts p as the body's next bytes. It never fails.
func (m *payloadMeter) Write(p []byte) (int, error) {
	m.n += int64(len(p))
	if m.text {
		m.countText(p)
	}
	return len(p), nil
}

// countText adds p's cost as part of a JSON string, or ends text when p
// makes the body invalid UTF-8.
func (m *payloadMeter) countText(p []byte) {
	for m.np > 0 && len(p) > 0 {
		// Finish the rune the last write began.
		m.partial[m.np] = p[0]
		m.np++
		p = p[1:]
		if !utf8.FullRune(m.partial[:m.np]) {
			continue
		}
		r, size := utf8.DecodeRune(m.partial[:m.np])
		if r == utf8.RuneError && size <= 1 || size != m.np {
			m.text = false
			return
		}
		m.escaped += runeCost(r, size)
		m.np = 0
	}
	for i := 0; i < len(p); {
		if c := p[i]; c < utf8.RuneSelf {
			m.escaped += int64(asciiCost[c])
			i++
			continue
		}
		if !utf8.FullRune(p[i:]) {
			m.np = copy(m.partial[:], p[i:])
			return
		}
		r, size := utf8.DecodeRune(p[i:])
		if r == utf8.RuneError && size == 1 {
			m.text = false
			return
		}
		m.escaped += runeCost(r, size)
		i += size
	}
}

// runeCost is what a valid rune of size bytes costs in a JSON string:
// encoding/json writes U+2028 and U+2029 as \u escapes, others as they are.
func runeCost(r rune, size int) int64 {
	if r == '\u2028' || r == '\u2029' {
		return 6
	}
	return int64(size)
}

// asciiCost is what each ASCII byte costs in a JSON string as
// encoding/json writes it with HTML escaping off.
var asciiCost = func() (t [utf8.RuneSelf]uint8) {
	for c := range t {
		switch {
		case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
			t[c] = 2
		case c < 0x20:
			t[c] = 6 // \u00XX
		default:
			t[c] = 1
		}
	}
	return t
}()

// Least returns the least an answer whose body so far has been written to
// m can cost, whatever bytes follow: once it exceeds a limit, the answer
// will not fit. With n more bytes announced (a Content-Length), pass them
// as more; otherwise 0.
func (m *payloadMeter) Least(more int64) int64 {
	n := m.n + more
	b64 := m.head + int64(base64.StdEncoding.EncodedLen(int(n)))
	if !m.text {
		return b64
	}
	// Still text: each further byte costs at least one as a JSON string,
	// and the host sends the cheaper form (Base64), so the least is the
	// lesser of the two.
	return min(m.head+m.escaped+int64(m.np)+more, b64)
}

// Cost returns what the answer costs once its body is complete, in the
// encoding Base64 chooses: what the host sends is what the cap counts.
func (m *payloadMeter) Cost() int64 {
	if m.Base64() {
		return m.head + int64(base64.StdEncoding.EncodedLen(int(m.n)))
	}
	return m.head + m.escaped
}

// Base64 reports whether an answer whose body is what has been written to
// m, complete, carries its body base64-encoded rather than as a
// JSON string. It is the one rule of the encoding: a host that carries
// answers as JSON encodes by it (payloadBase64), and Cost and Least count
// by it. A body travels base64-encoded unless it is clearly text — empty,
// or of a textual media type (textMediaType), valid UTF-8 and with no
// rune cut at its end — and its JSON string is no longer than its base64:
// control characters (6 bytes each as \u00XX, as in ANSI colour escapes),
// backslashes and quotes (2 each) and U+2028/U+2029 (6 each) can make a
// JSON string up to six times the body, base64 never more than 4/3 of it.
// Either way the client gets the same bytes: Lambda decodes a body whose
// isBase64Encoded is true.
func (m *payloadMeter) Base64() bool {
	if m.n == 0 {
		return false
	}
	return !m.text || m.np > 0 || m.escaped > int64(base64.StdEncoding.EncodedLen(int(m.n)))
}

// payloadBase64 reports whether Lambda carries body, the whole body of an
// answer with headers h, base64-encoded (payloadMeter.Base64): the
// encoder's side (newPayload) of the rule the cap counts by.
func payloadBase64(h http.Header, body []byte) bool {
	m := payloadMeter{text: textMediaType(h.Get("Content-Type"))}
	m.Write(body)
	return m.Base64()
}

// textMediaType reports whether a body of this Content-Type may travel as
// a JSON string (payloadMeter.Base64): a textual media type.
func textMediaType(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return strings.HasPrefix(mt, "text/") || mt == "application/json" || strings.HasSuffix(mt, "+json") ||
		mt == "application/xml" || strings.HasSuffix(mt, "+xml") || mt == "application/javascript" ||
		mt == "application/x-www-form-urlencoded"
}

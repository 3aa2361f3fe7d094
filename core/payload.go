package core

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"
)

// ResponseLimit is the largest answer a host can send, and how the host
// counts an answer against it (docs/deadlines.md#size-limits-per-host). Each adapter states its own in
// HostCaps.Response; the shared HTTP face never holds more than it, and
// answers one that will not fit with 502 ResponseTooLarge instead of
// leaving it to the platform. The zero value is no limit. A plain value,
// safe to copy and to read from many goroutines.
type ResponseLimit struct {
	// MaxBytes is the most an answer may cost, as Form counts it. Zero
	// means no limit.
	MaxBytes int64
	// Whole reports whether the host sends an answer only once it is
	// complete (Lambda BUFFERED): the gateway then holds the body until
	// its end, so an answer that passes MaxBytes can still become a 502.
	// Otherwise the answer streams: one whose Content-Length already
	// exceeds MaxBytes is refused before its status is sent, and one that
	// passes MaxBytes later is cut (the client sees the transfer break).
	Whole bool
	// Form is how the host carries the answer, which decides its cost.
	Form PayloadForm
}

// responseLimitKey is the context key of WithResponseLimit.
type responseLimitKey struct{}

// WithResponseLimit returns ctx carrying the response limit of one
// request, for a host whose limit depends on how the request arrived
// (Lambda: an API Gateway event is answered buffered even where the
// Function URL streams). The HTTP face applies it instead of
// HostCaps.Response.
func WithResponseLimit(ctx context.Context, l ResponseLimit) context.Context {
	return context.WithValue(ctx, responseLimitKey{}, l)
}

// ResponseLimitOf returns the limit WithResponseLimit put in ctx, and
// whether there was one.
func ResponseLimitOf(ctx context.Context) (ResponseLimit, bool) {
	l, ok := ctx.Value(responseLimitKey{}).(ResponseLimit)
	return l, ok
}

// PayloadForm is how a host carries an answer in its payload.
type PayloadForm uint8

const (
	// PayloadBytes: the body's bytes as they are; status and headers are
	// not counted (a Lambda response stream, whose limit is on the body).
	PayloadBytes PayloadForm = iota
	// PayloadJSON: the whole answer is one JSON document, as Lambda's
	// payload format 2.0 responses are: status and headers as JSON
	// members, the body a JSON string or base64, as PayloadMeter.Base64
	// decides.
	PayloadJSON
)

// jsonEnvelope bounds the JSON members of a payload format 2.0 response
// besides its headers' and body's contents: {"statusCode":…,"headers":,
// "cookies":,"body":"","isBase64Encoded":false} and a final newline.
const jsonEnvelope = 128

// PayloadMeter counts what an answer costs in a PayloadForm as its body is
// written to it, without holding the body: base64 is counted by length, a
// JSON string by its escapes as encoding/json writes them (with HTML
// escaping off, as aws-lambda-go encodes responses). Not safe for
// concurrent use.
type PayloadMeter struct {
	form    PayloadForm
	head    int64 // what everything but the body costs (at most)
	n       int64 // body bytes so far
	text    bool  // the body is still a candidate JSON string
	escaped int64 // the body's JSON string so far (its quotes are in head)
	partial [utf8.UTFMax]byte
	np      int // bytes of partial: a rune begun at the end of a write
}

// NewPayloadMeter returns a meter for an answer in form whose headers are
// h (the headers as the host will send them, Set-Cookie included). The
// headers are counted at their JSON length as one array of values per name,
// which is at least what a payload format 2.0 response writes for them.
func NewPayloadMeter(form PayloadForm, h http.Header) *PayloadMeter {
	m := &PayloadMeter{form: form}
	if form == PayloadJSON {
		m.head = jsonEnvelope + jsonLen(h)
		m.text = TextMediaType(h.Get("Content-Type"))
	}
	return m
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
func (m *PayloadMeter) Write(p []byte) (int, error) {
	m.n += int64(len(p))
	if m.text {
		m.countText(p)
	}
	return len(p), nil
}

// countText adds p's cost as part of a JSON string, or ends text when p
// makes the body invalid UTF-8.
func (m *PayloadMeter) countText(p []byte) {
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
func (m *PayloadMeter) Least(more int64) int64 {
	n := m.n + more
	if m.form == PayloadBytes {
		return n
	}
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
func (m *PayloadMeter) Cost() int64 {
	switch {
	case m.form == PayloadBytes:
		return m.n
	case m.Base64():
		return m.head + int64(base64.StdEncoding.EncodedLen(int(m.n)))
	}
	return m.head + m.escaped
}

// Base64 reports whether a PayloadJSON answer whose body is what has been
// written to m, complete, carries its body base64-encoded rather than as a
// JSON string. It is the one rule of the encoding: a host that carries
// answers as JSON encodes by it (PayloadBase64), and Cost and Least count
// by it. A body travels base64-encoded unless it is clearly text — empty,
// or of a textual media type (TextMediaType), valid UTF-8 and with no
// rune cut at its end — and its JSON string is no longer than its base64:
// control characters (6 bytes each as \u00XX, as in ANSI colour escapes),
// backslashes and quotes (2 each) and U+2028/U+2029 (6 each) can make a
// JSON string up to six times the body, base64 never more than 4/3 of it.
// Either way the client gets the same bytes: Lambda decodes a body whose
// isBase64Encoded is true. False for PayloadBytes.
func (m *PayloadMeter) Base64() bool {
	if m.form != PayloadJSON || m.n == 0 {
		return false
	}
	return !m.text || m.np > 0 || m.escaped > int64(base64.StdEncoding.EncodedLen(int(m.n)))
}

// PayloadBase64 reports whether a PayloadJSON host carries body, the whole
// body of an answer with headers h, base64-encoded (PayloadMeter.Base64):
// the encoder's side of the rule the cap counts by.
func PayloadBase64(h http.Header, body []byte) bool {
	m := PayloadMeter{form: PayloadJSON, text: TextMediaType(h.Get("Content-Type"))}
	m.Write(body)
	return m.Base64()
}

// TextMediaType reports whether a body of this Content-Type may travel as
// a JSON string (PayloadMeter.Base64): a textual media type.
func TextMediaType(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return strings.HasPrefix(mt, "text/") || mt == "application/json" || strings.HasSuffix(mt, "+json") ||
		mt == "application/xml" || strings.HasSuffix(mt, "+xml") || mt == "application/javascript" ||
		mt == "application/x-www-form-urlencoded"
}

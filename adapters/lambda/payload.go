package lambda

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"unicode/utf8"
)

// payload is a buffered HTTP answer as the payload format 2.0 response
// document Lambda expects ({"statusCode","headers","cookies",
// "isBase64Encoded","body"}, the same for Function URLs and API Gateway),
// written as the runtime client reads it: the body is base64-encoded or
// JSON-escaped a chunk at a time, never whole, so an answer near the 6 MB
// cap is held once (the body) rather than three times (body, encoded
// string, JSON document). It is an io.Reader whose fields are unexported:
// aws-lambda-go encodes it as {} and then posts it as it is
// (lambda/handler.go: "if response value is an io.Reader, return it
// as-is"), with the Content-Type ContentType gives. Not safe for
// concurrent use.
type payload struct {
	pending []byte // encoded bytes not yet read
	body    []byte // the body still to encode
	text    bool   // the body travels as a JSON string, else base64
	tailed  bool   // the closing `"}` is in pending
	enc     []byte // scratch for one chunk's encoding
}

// payloadHead is the document without its body.
type payloadHead struct {
	StatusCode      int               `json:"statusCode"`
	Headers         map[string]string `json:"headers"`
	Cookies         []string          `json:"cookies"`
	IsBase64Encoded bool              `json:"isBase64Encoded"`
}

// payloadChunk is how many body bytes are encoded at a time.
const payloadChunk = 48 << 10 // 64 KiB of base64

// newPayload returns the document for status, header and body: headers
// joined by commas, Set-Cookie as cookies, and the body a JSON string or
// base64 as payloadBase64 decides, the rule by which the answer cap
// counted it (payloadMeter): the cap holds the bytes sent.
func newPayload(status int, header http.Header, body []byte) *payload {
	hdr, cookies := responseHeaders(header)
	p := &payload{body: body, text: !payloadBase64(header, body)}
	var head bytes.Buffer
	enc := json.NewEncoder(&head)
	enc.SetEscapeHTML(false) // as aws-lambda-go encodes, and payloadMeter counts
	enc.Encode(payloadHead{StatusCode: status, Headers: hdr, Cookies: cookies, IsBase64Encoded: !p.text})
	p.pending = append(bytes.TrimSuffix(head.Bytes(), []byte("}\n")), `,"body":"`...)
	return p
}

// ContentType is the Content-Type the runtime client posts the document
// with.
func (p *payload) ContentType() string { return "application/json" }

func (p *payload) Read(b []byte) (int, error) {
	for len(p.pending) == 0 {
		if p.tailed {
			return 0, io.EOF
		}
		p.next()
	}
	n := copy(b, p.pending)
	p.pending = p.pending[n:]
	return n, nil
}

// next encodes the body's next chunk into pending, or the document's end.
func (p *payload) next() {
	if len(p.body) == 0 {
		p.pending, p.tailed = append(p.enc[:0], `"}`...), true
		return
	}
	n := min(len(p.body), payloadChunk)
	if !p.text {
		p.enc = base64.StdEncoding.AppendEncode(p.enc[:0], p.body[:n])
	} else {
		for n < len(p.body) && !utf8.RuneStart(p.body[n]) {
			n-- // a chunk of valid UTF-8 ends on a rune's start
		}
		var buf bytes.Buffer
		buf.Grow(n + n/8 + 8)
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.Encode(string(p.body[:n])) // valid UTF-8: payloadBase64 said so
		s := buf.Bytes()
		p.enc = append(p.enc[:0], s[1:len(s)-2]...) // without the quotes and newline
	}
	p.body, p.pending = p.body[n:], p.enc
}

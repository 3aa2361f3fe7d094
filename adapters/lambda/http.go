package lambda

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"fngateway/core"
	"fngateway/core/async"
	"fngateway/internal/settings"
)

// httpEvent is what the gateway reads of a Function URL or API Gateway HTTP
// API payload 2.0 event; both formats name these fields alike.
type httpEvent struct {
	RawPath         string            `json:"rawPath"`
	RawQueryString  string            `json:"rawQueryString"`
	Cookies         []string          `json:"cookies"`
	Headers         map[string]string `json:"headers"`
	Body            string            `json:"body"`
	IsBase64Encoded bool              `json:"isBase64Encoded"`
	RequestContext  struct {
		DomainName string `json:"domainName"`
		// TimeEpoch is when the platform accepted the request, in
		// milliseconds since the Unix epoch.
		TimeEpoch int64 `json:"timeEpoch"`
		HTTP      struct {
			Method   string `json:"method"`
			SourceIP string `json:"sourceIp"`
		} `json:"http"`
		// Authorizer is set by Lambda itself for a Function URL with
		// AuthType AWS_IAM (and by API Gateway for IAM authorization):
		// the caller whose SigV4 signature it verified. IAM is nil when
		// the event carries none.
		Authorizer struct {
			IAM *struct {
				UserArn string `json:"userArn"`
			} `json:"iam"`
		} `json:"authorizer"`
	} `json:"requestContext"`
}

// callerIdentity is the caller identity the platform verified, as
// async.WithCaller takes it: "aws-iam:<userArn>", or "" when the event
// carries none. It comes from the event, which only Lambda writes, never
// from a header a client could send.
func (e *httpEvent) callerIdentity() string {
	if iam := e.RequestContext.Authorizer.IAM; iam != nil && iam.UserArn != "" {
		return "aws-iam:" + iam.UserArn
	}
	return ""
}

// iamSigned reports whether the platform verified the request's SigV4
// signature (requestContext.authorizer.iam is present).
func (e *httpEvent) iamSigned() bool {
	return e.RequestContext.Authorizer.IAM != nil
}

// ErrBadEvent is wrapped by the error for an HTTP event whose fields cannot
// make a request (a body that is not base64 though it says so, a method or
// path that is not HTTP).
var ErrBadEvent = errors.New("bad HTTP event")

// isFunctionURLDomain reports whether host is a Function URL's own domain.
func isFunctionURLDomain(host string) bool {
	return strings.Contains(host, ".lambda-url.")
}

// newRequest builds the net/http request an HTTP event describes: the raw
// path and query exactly as the client sent them, headers (multi-value ones
// arrive comma-joined, as the payload 2.0 formats join them), the cookies
// joined into one Cookie header, the body decoded, and the client's address;
// its context carries the caller identity Lambda verified, if any
// (async.WithCaller), which scopes the caller's Idempotency-Keys.
func newRequest(ctx context.Context, event []byte) (*http.Request, error) {
	var e httpEvent
	if err := json.Unmarshal(event, &e); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadEvent, err)
	}
	method := e.RequestContext.HTTP.Method
	if !core.IsToken(method) {
		return nil, fmt.Errorf("%w: requestContext.http.method %q is not an HTTP method", ErrBadEvent, method)
	}
	target := escapeRawPath(e.RawPath)
	if target == "" {
		target = "/"
	}
	if e.RawQueryString != "" {
		target += "?" + e.RawQueryString
	}
	u, err := url.ParseRequestURI(target)
	if err != nil || !strings.HasPrefix(target, "/") {
		return nil, fmt.Errorf("%w: rawPath %q with rawQueryString %q is not a request target", ErrBadEvent, e.RawPath, e.RawQueryString)
	}
	if e.RequestContext.TimeEpoch > 0 {
		ctx = core.WithPlatformArrival(ctx, time.UnixMilli(e.RequestContext.TimeEpoch))
	}
	body := []byte(e.Body)
	if e.IsBase64Encoded {
		body, err = base64.StdEncoding.DecodeString(e.Body)
		if err != nil {
			return nil, fmt.Errorf("%w: body is not base64 though isBase64Encoded is true: %v", ErrBadEvent, err)
		}
	}
	r := (&http.Request{
		Method:     method,
		URL:        u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     make(http.Header, len(e.Headers)+1),
		Body:       http.NoBody,
		RequestURI: target,
		RemoteAddr: e.RequestContext.HTTP.SourceIP,
		// Function URLs and HTTP APIs answer HTTPS only.
		TLS: &tls.ConnectionState{},
	}).WithContext(async.WithCaller(ctx, e.callerIdentity()))
	for k, v := range e.Headers {
		if !core.IsToken(k) {
			return nil, fmt.Errorf("%w: header name %q", ErrBadEvent, k)
		}
		r.Header[textproto.CanonicalMIMEHeaderKey(k)] = []string{v}
	}
	if len(e.Cookies) > 0 {
		r.Header["Cookie"] = []string{strings.Join(e.Cookies, "; ")}
	}
	callerCredentials(e.iamSigned()).Strip(r)
	if client := core.ParseHop(r.RemoteAddr); client.IsValid() {
		core.PopPlatformHop(r.Header, client) // the gateway adds the client itself
	}
	r.Host = r.Header.Get("Host")
	if r.Host == "" {
		r.Host = e.RequestContext.DomainName
	}
	delete(r.Header, "Host")
	if len(body) > 0 {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
	}
	delete(r.Header, "Content-Length")
	if r.ContentLength > 0 {
		r.Header["Content-Length"] = []string{strconv.FormatInt(r.ContentLength, 10)}
	}
	return r, nil
}

// escapeRawPath percent-encodes what an event's rawPath may hold that a
// request target's path cannot: '?' and '#' (which would start a query or
// a fragment), spaces, controls and other bytes outside RFC 3986's path
// characters. A '%' is kept: rawPath keeps the client's escaping.
func escapeRawPath(p string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if pathByte(c) {
			if b.Len() > 0 {
				b.WriteByte(c)
			}
			continue
		}
		if b.Len() == 0 {
			b.Grow(len(p) + 8)
			b.WriteString(p[:i])
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	if b.Len() == 0 {
		return p
	}
	return b.String()
}

// pathByte reports whether c may stand as itself in a request target's
// path (RFC 3986 pchar and '/', plus '%' of the escapes already there).
func pathByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~!$&'()*+,;=:@/%", c) >= 0
}

// callerCredentials are where Lambda puts the credential of a caller it verified
// (core.Credentials, stripped from the request before anything else sees
// it): behind a Function URL with AuthType AWS_IAM, the caller's SigV4
// signature, in headers (core.SigV4Headers, in every spelling) or in the
// query string (core.SigV4QueryParams, a presigned Function URL). They
// sign the caller's request to the Function URL, which anyone holding
// them could send again within the signature's window, so no backend,
// record or log may have them; and Authorization, the default
// IdempotencyScopeHeaders, differs on every signed request. Who the
// caller is comes from the event instead (callerIdentity). Without IAM
// the platform checked nothing: the client's headers are its own.
func callerCredentials(iamSigned bool) core.Credentials {
	if !iamSigned {
		return core.Credentials{}
	}
	return iamCredentials
}

var iamCredentials = core.Credentials{Names: core.SigV4Headers, Query: core.SigV4QueryParams}

// serveHTTP answers an HTTP event through the HTTP face, and calls done
// once the response is complete.
func (h *Handler) serveHTTP(ctx context.Context, done context.CancelFunc, event []byte, k kind) (any, error) {
	r, err := newRequest(ctx, event)
	if err != nil {
		done()
		h.logger().ErrorContext(ctx, "lambda event refused", "err", err.Error())
		return nil, err
	}
	if k == kindFunctionURL && h.InvokeMode == settings.InvokeResponseStream {
		return h.stream(r.WithContext(core.WithResponseLimit(r.Context(), StreamedResponse)), done), nil
	}
	defer done()
	r = r.WithContext(core.WithResponseLimit(r.Context(), BufferedResponse))
	w := &bufferedWriter{header: http.Header{}}
	if aborted := serve(h.HTTP, w, r); aborted {
		// The status may already be written: the closest Lambda has to a
		// transfer that breaks is a failed invocation (the client gets 502).
		return nil, errStreamCut
	}
	return w.payload(), nil
}

// errStreamCut ends an invocation whose response body was cut after its
// status was chosen (docs/deadlines.md#deadlines-and-retries): the client must see a broken transfer.
var errStreamCut = errors.New("response body cut after the status was sent")

// serve runs next and reports whether it aborted with http.ErrAbortHandler,
// as net/http's server lets a handler break a response off.
func serve(next http.Handler, w http.ResponseWriter, r *http.Request) (aborted bool) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				panic(v)
			}
			aborted = true
		}
	}()
	next.ServeHTTP(w, r)
	return false
}

// bufferedWriter is an http.ResponseWriter that keeps the whole response.
type bufferedWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *bufferedWriter) Header() http.Header { return w.header }

func (w *bufferedWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *bufferedWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}

// Flush does nothing: the response leaves whole.
func (w *bufferedWriter) Flush() {}

// Grow makes room for n more bytes of body at once, when the HTTP face
// knows the size of the body it is about to write.
func (w *bufferedWriter) Grow(n int) { w.body.Grow(n) }

// payload returns the response as the payload 2.0 document, encoded as
// it is read.
func (w *bufferedWriter) payload() *payload {
	status := w.status
	if status == 0 {
		status = http.StatusOK
	}
	return newPayload(status, w.header, w.body.Bytes())
}

// responseHeaders splits h into the payload 2.0 response's headers (values
// joined by commas) and cookies (the Set-Cookie values, which cannot be
// joined).
func responseHeaders(h http.Header) (map[string]string, []string) {
	out := make(map[string]string, len(h))
	var cookies []string
	for k, v := range h {
		switch {
		case k == "Set-Cookie":
			cookies = append(cookies, v...)
		case strings.HasPrefix(k, http.TrailerPrefix), k == "Trailer":
			// A buffered or prelude-headed answer has no trailers.
		default:
			out[k] = strings.Join(v, ",")
		}
	}
	return out, cookies
}

// stream answers r through a Function URL in RESPONSE_STREAM mode: the
// status, headers and cookies go first, as the prelude Lambda expects, then
// the body as the HTTP face writes it. A body cut after the prelude (an
// aborted handler) ends the stream with an error, so the client sees the
// transfer break, never a second status.
func (h *Handler) stream(r *http.Request, done context.CancelFunc) *events.LambdaFunctionURLStreamingResponse {
	pr, pw := io.Pipe()
	w := &streamWriter{header: http.Header{}, pipe: pw, ready: make(chan struct{})}
	go func() {
		defer done()
		if serve(h.HTTP, w, r) {
			w.WriteHeader(http.StatusBadGateway) // only if nothing was sent yet
			h.flush(r.Context())
			pw.CloseWithError(errStreamCut)
			return
		}
		w.WriteHeader(http.StatusOK)
		h.flush(r.Context())
		pw.Close()
	}()
	<-w.ready
	hdr, cookies := responseHeaders(w.sent)
	return &events.LambdaFunctionURLStreamingResponse{StatusCode: w.status, Headers: hdr, Cookies: cookies, Body: pr}
}

// streamWriter is the http.ResponseWriter of a streamed response. Its
// header is taken when the status is written; every Write goes straight to
// the pipe the runtime client reads.
type streamWriter struct {
	header http.Header
	pipe   *io.PipeWriter
	once   sync.Once
	ready  chan struct{}
	status int
	sent   http.Header
}

func (w *streamWriter) Header() http.Header { return w.header }

func (w *streamWriter) WriteHeader(status int) {
	w.once.Do(func() {
		w.status, w.sent = status, w.header.Clone()
		close(w.ready)
	})
}

func (w *streamWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pipe.Write(p)
}

// Flush does nothing more than Write: every write is already on its way.
func (w *streamWriter) Flush() {}

package core

import (
	"context"
	"net/http"
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
	// Form is how the host carries the answer, which decides its cost;
	// nil counts the body's bytes as they are, status and headers not
	// counted (a Lambda response stream, whose limit is on the body).
	// The host's adapter states it (adapters/lambda: the JSON document of
	// Lambda's payload format 2.0).
	Form PayloadForm
}

// PayloadForm is how a host carries an answer in its payload, when that
// costs more than the body's bytes.
type PayloadForm interface {
	// Meter returns a counter of what an answer whose headers are h (as
	// the host will send them, Set-Cookie included) costs, its body
	// written to it as it arrives, without holding the body. Not safe for
	// concurrent use.
	Meter(h http.Header) PayloadMeter
	// Note says, in a 502 ResponseTooLarge's message, what the limit
	// counts besides the body, starting with a space.
	Note() string
}

// PayloadMeter counts what an answer costs as its body is written to it.
// Write never fails.
type PayloadMeter interface {
	Write(p []byte) (int, error)
	// Least returns the least the answer can cost, whatever bytes follow:
	// once it exceeds a limit, the answer will not fit. With n more bytes
	// announced (a Content-Length), pass them as more; otherwise 0.
	Least(more int64) int64
	// Cost returns what the answer costs once its body is complete, as
	// the host will send it.
	Cost() int64
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

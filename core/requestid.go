package core

import "context"

// MaxRequestID is the longest request id the gateway takes from a trusted
// proxy's X-Request-Id.
const MaxRequestID = 128

// ParseRequestID returns s as a request id, and whether it is one: 1 to
// MaxRequestID characters, each a letter, a digit or one of - _ . : / + = @
// (UUIDs, hex, base64 and the ids load balancers write all fit). Anything
// else is refused whole, never trimmed: the id is written into log lines
// and sent on, so it must be one token that means the same everywhere.
func ParseRequestID(s string) (string, bool) {
	if len(s) == 0 || len(s) > MaxRequestID {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		if !requestIDByte(s[i]) {
			return "", false
		}
	}
	return s, true
}

func requestIDByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '-', '_', '.', ':', '/', '+', '=', '@':
		return true
	}
	return false
}

type requestIDKey struct{}

// WithRequestID returns ctx carrying the request id id, which the log
// handler writes on every line logged with it (docs/observability.md).
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestIDFrom returns the request id ctx carries, or "".
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

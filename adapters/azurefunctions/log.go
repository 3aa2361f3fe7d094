package azurefunctions

import (
	"context"
	"log/slog"
)

// invocationKey is the context key of the host's invocation id.
type invocationKey struct{}

// withInvocation returns ctx carrying the host's invocation id.
func withInvocation(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return context.WithValue(ctx, invocationKey{}, id)
}

// InvocationID returns the Functions host's invocation id of the request
// whose context is ctx, or "".
func InvocationID(ctx context.Context) string {
	id, _ := ctx.Value(invocationKey{}).(string)
	return id
}

// LogHandler wraps h so that every record logged with a request's context
// carries the host's invocationId, which ties the gateway's log lines to
// the invocation in the Functions logs (Application Insights).
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := InvocationID(ctx); id != "" {
		r = r.Clone()
		r.AddAttrs(slog.String("invocationId", id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return logHandler{h.Handler.WithAttrs(as)}
}

func (h logHandler) WithGroup(name string) slog.Handler {
	return logHandler{h.Handler.WithGroup(name)}
}

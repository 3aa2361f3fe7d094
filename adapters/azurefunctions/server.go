// Package azurefunctions is the Azure Functions host: the gateway as a
// custom handler (the Functions host runs the binary and calls it over
// HTTP on 127.0.0.1:FUNCTIONS_CUSTOMHANDLER_PORT).
//
// Two functions are declared in the app files (functions/host.json,
// functions/gateway/function.json, functions/continuation/function.json):
//
//   - gateway: an HTTP trigger on every path, with host.json's
//     customHandler.enableForwardingHttpRequest set and an empty route
//     prefix, so the client's request arrives on its own path and method,
//     headers and body unchanged, and the handler's answer goes back to the
//     client as is. The Server passes it to the shared HTTP face with the
//     invocation's execution limit as its context's deadline.
//   - continuation: a queue trigger on the continuation queue. The host
//     POSTs /continuation with the message in a JSON envelope and settles
//     the message on a 2xx answer; any other status fails the invocation,
//     and the host delivers the message again, up to maxDequeueCount, then
//     moves it to <queue>-poison.
//
// Nothing tells a custom handler its timeout, and an invocation that
// overruns it makes the host restart the whole handler process. So the
// Server bounds every invocation itself (see Limits) and the gateway
// always answers first.
package azurefunctions

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"

	"fngateway/adapters/httpapi"
	"fngateway/core"
	"fngateway/core/async"
)

// Caps returns what this host can do: the process runs on after
// answering, but the Functions host neither knows of nor waits for that
// work, so the queued continuation stays the guarantee; connections cannot
// be upgraded; answers have no size limit (the Functions host documents
// one for requests, 100 MB, none for responses: "Azure Functions HTTP
// trigger", Limits).
func Caps() core.HostCaps {
	return core.HostCaps{Name: "azurefunctions", WorkAfterAnswer: true, Upgrade: false, Response: core.ResponseLimit{}}
}

// ContinuationPath is where the host invokes the continuation function: a
// custom handler's non-HTTP function is called as POST /<function name>.
// On this host the path is reserved (docs/deploy-azure.md#the-two-functions): it never reaches a
// backend, whatever the method.
const ContinuationPath = "/continuation"

// Headers the host adds to every invocation it sends the handler.
const (
	headerInvocationID = "X-Azure-Functions-Invocationid"
	headerHostVersion  = "X-Azure-Functions-Hostversion"
)

// Continuer runs one continuation message: async.Async's Process. It
// returns nil when the message is done with, an error wrapping
// async.ErrBadMessage when it cannot be decoded, and any other error when
// the queue should deliver it again (one wrapping async.ErrNewerFormat among
// them).
type Continuer interface {
	Process(ctx context.Context, msg []byte) error
}

var _ Continuer = (*async.Async)(nil)

// Server serves the Functions host's invocations. Set its fields, then
// call Run once. The zero value is not usable: set Addr and Gateway.
type Server struct {
	// Addr is the listen address, 127.0.0.1:<FUNCTIONS_CUSTOMHANDLER_PORT>.
	Addr string
	// Gateway serves the gateway function's forwarded requests (the
	// shared httpapi.Handler).
	Gateway http.Handler
	// Continuations runs queue-triggered continuations. Nil means async is
	// off: a continuation invocation then fails (503), leaving the message
	// to the queue's retries and poison queue.
	Continuations Continuer
	// Limits bound each invocation; zero fields bound nothing.
	Limits Limits
	// Started is when the process started (zero: unknown). HTTP requests
	// that reach the handler within HandlerStartLimit of it count the load
	// balancer's clock from there (Limits.HTTPDeadline).
	Started time.Time
	// AuthEnabled says App Service Authentication is on for the app
	// (WEBSITE_AUTH_ENABLED, read by the caller): only then were the
	// X-MS-CLIENT-PRINCIPAL* headers set by the platform, and only then is
	// X-MS-CLIENT-PRINCIPAL-ID the caller's identity. False (the zero
	// value) removes them from every request, as a client wrote them.
	AuthEnabled bool
	// Logger receives start-up lines and one line per continuation. Nil
	// discards. Wrap its handler with LogHandler to have the host's
	// invocationId on every line logged with a request's context.
	Logger *slog.Logger
	// Ready, if set, is called with the bound address once listening.
	Ready func(addr net.Addr)

	ownLog httpapi.ClientLog // clientLog's when Gateway has none
}

func (s *Server) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

// Run listens and serves until ctx is done, then shuts down gracefully,
// giving in-flight invocations up to httpapi.ShutdownGrace.
func (s *Server) Run(ctx context.Context) error {
	log := s.logger()
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 30 * time.Second,
		// Handler panics and connection errors show at the default level.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelError),
	}
	if s.Ready != nil {
		s.Ready(ln.Addr())
	}
	log.Info("listening", slog.String("addr", ln.Addr().String()), slog.String("host", Caps().Name))
	return httpapi.Serve(ctx, srv, ln)
}

// ServeHTTP dispatches one call from the Functions host: a continuation
// invocation, the host's readiness ping, or a forwarded client request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	arrival := time.Now()
	invocation := r.Header.Get(headerInvocationID)
	r = r.WithContext(withInvocation(r.Context(), invocation))
	switch {
	case r.URL.Path == ContinuationPath:
		s.serveContinuation(w, r, arrival)
	case invocation == "" && r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		// The host's readiness ping (GET / without invocation headers):
		// answered here, never forwarded to a backend.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(`{"status":"ok","host":"azurefunctions"}` + "\n"))
	default:
		callerCredentials(s.AuthEnabled).Strip(r)
		platformPeer(r)
		ctx := async.WithCaller(r.Context(), principal(r.Header))
		if dl := s.Limits.HTTPDeadline(arrival, s.Started); !dl.IsZero() {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, dl)
			defer cancel()
		}
		s.Gateway.ServeHTTP(w, r.WithContext(ctx))
	}
}

// The headers App Service authentication sets on a request it
// authenticated. When authentication is on, the platform's front end
// removes copies a client sends, so they name a caller the platform
// verified; when it is off nothing does, and the Server removes them
// (callerCredentials). The local host never reads them.
const (
	headerPrincipalID  = "X-Ms-Client-Principal-Id"
	headerPrincipalIDP = "X-Ms-Client-Principal-Idp"
	// principalPrefix starts every one of them: X-MS-CLIENT-PRINCIPAL,
	// -ID, -NAME, -IDP.
	principalPrefix = "X-Ms-Client-Principal"
)

// The places a caller puts an Azure Functions access key: the
// x-functions-key header and the code query parameter.
const (
	headerFunctionKey = "X-Functions-Key"
	queryFunctionKey  = "code"
)

// callerCredentials are what the Functions host and App Service checked
// or set for the gateway (core.Credentials, stripped from every forwarded
// request before anything else sees it, in every spelling of their
// names):
//
//   - the invocation headers, the host's own, not the client's;
//   - the caller's function key (the x-functions-key header, the code
//     query parameter): the host checked it for this app, and a backend
//     holding it could call the app's functions itself;
//   - the X-MS-CLIENT-PRINCIPAL* headers: with App Service Authentication
//     off (authEnabled false) they are whatever the client wrote, and all
//     go; with it on the platform sets them, having removed what a client
//     sent under those names, so its dashed spelling stays — but never a
//     spelling with '_' (X_MS_CLIENT_PRINCIPAL_ID), which the platform
//     neither sets nor removes, and which a CGI or WSGI backend reads as
//     HTTP_X_MS_CLIENT_PRINCIPAL_ID, the platform's header.
func callerCredentials(authEnabled bool) core.Credentials {
	if authEnabled {
		return credentialsAuthOn
	}
	return credentialsAuthOff
}

var (
	hostHeaders        = []string{headerInvocationID, headerHostVersion, headerFunctionKey}
	credentialsAuthOn  = core.Credentials{Names: hostHeaders, Verified: []string{principalPrefix}, Query: []string{queryFunctionKey}}
	credentialsAuthOff = core.Credentials{Names: hostHeaders, Prefixes: []string{principalPrefix}, Query: []string{queryFunctionKey}}
)

// principal returns the caller identity App Service authentication
// verified, as async.WithCaller takes it ("azure-appservice:<provider>:<id>"),
// or "" when the request carries none.
func principal(h http.Header) string {
	id := h.Get(headerPrincipalID)
	if id == "" {
		return ""
	}
	return "azure-appservice:" + h.Get(headerPrincipalIDP) + ":" + id
}

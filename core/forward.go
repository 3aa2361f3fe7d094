package core

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Request is a client request as the gateway forwards it: everything needed
// to send it again, attempt after attempt.
type Request struct {
	// Method, Path and RawQuery are the client's; the backend base URL's
	// path is put in front of Path. Path is the path as the client wrote
	// it, escaped (url.URL.EscapedPath): it reaches the backend with its
	// escaping kept, and a path ConfinePath refuses ends the request with
	// ReasonInvalidPath before any attempt.
	Method   string
	Path     string
	RawQuery string
	// Header holds the client's headers. Forward never modifies it.
	Header http.Header
	// Host is the Host the client asked for; RemoteAddr its address
	// (host:port or host); Proto "http" or "https". They become the
	// X-Forwarded-* headers.
	Host       string
	RemoteAddr string
	Proto      string
	// Body is the buffered body, sent whole by every attempt. When
	// BodyStream is set instead, the body is too large to buffer: it goes
	// to the first attempt only and the request is not retried.
	Body       []byte
	BodyStream io.Reader
	// Trailer, if set, holds the client's request trailers, sent after
	// the body (in chunked framing). For a streamed body its values may
	// arrive only as the body ends, as net/http fills Request.Trailer.
	Trailer http.Header
	// IdempotencyKey is sent on every attempt; ClientKey says the client
	// chose it (which makes POST and PATCH safe to retry after a timeout).
	IdempotencyKey string
	ClientKey      bool
	// Route is the effective route; Budget the request's time.
	Route  *Route
	Budget Budget
	// Upgrade, if set, is the protocol the client asks to switch to (its
	// Upgrade header): the attempt carries Connection: Upgrade and this
	// Upgrade header, and a 101 answer comes back with a body that is also
	// an io.Writer, the tunnel to the backend.
	Upgrade string
	// Informational, if set, is called with each 1xx answer other than 101
	// (100 Continue included) an attempt receives before its final one,
	// from the transport's goroutine while Forward waits; an error fails
	// the attempt.
	Informational func(code int, header textproto.MIMEHeader) error
	// RequestID names the request in every log line and on every attempt
	// (X-Request-Id); "" sends none.
	RequestID string
}

// Result is a backend response the client gets: its status and headers
// arrived within the budget. Response.Body streams the rest under the
// route's idle-gap limit and the execution limit; the caller must close it.
type Result struct {
	Response *http.Response
	Attempts []Attempt
	// Backend is the label of the host that answered (Route.HostLabel),
	// and BackendURL its base URL, for x-Backend-Host and the log.
	Backend, BackendURL string
	// Throttled, when set, says that every attempt answered 429 or 503
	// with a Retry-After and the attempts ran out: it is the shortest
	// Retry-After, after which an async request may run again (requeue,
	// docs/async-api.md#requeue-and-predictive-hand-off).
	Throttled time.Duration
}

// Forwarder runs the attempt loop of docs/deadlines.md#deadlines-and-retries. Its zero value is usable;
// it is safe for concurrent use once its fields are set.
type Forwarder struct {
	// Transport sends attempts. If nil, a shared NewTransport is used.
	Transport http.RoundTripper
	// BackoffBase is the base of the jittered exponential wait between
	// attempts. Zero means no wait.
	BackoffBase time.Duration
	// Stats, if set, counts attempts and the deadlines that cut them.
	Stats *Stats
	// RetryBudget, if set, bounds the retries and hedges in flight on
	// this instance (docs/settings.md#retry-budget). Nil allows every retry.
	RetryBudget *RetryBudget
	// Ejector, if set, tries the hosts that keep failing last (see
	// docs/settings.md#ejecting-a-dead-host). Nil ejects nothing.
	Ejector *Ejector
	// Balancer, if set, orders each route's hosts by its LoadBalance
	// mode (balance.go). Nil tries them in their configured order.
	Balancer *Balancer
	// Authorizers put the credential of each route auth on its attempts.
	// A route whose auth has no entry ends 502 BackendAuthFailed with
	// nothing sent.
	Authorizers map[BackendAuth]Authorizer
	// Observer, if set, records attempts and backoff waits (telemetry).
	Observer Observer
	// Jitter, if set, is the random source of the backoff waits
	// (retryPolicy.Jitter); nil means math/rand/v2.
	Jitter func() float64
}

// policy returns the retry rules of a request on route allowed
// maxAttempts.
func (f *Forwarder) policy(route *Route, maxAttempts int) retryPolicy {
	return retryPolicy{MaxAttempts: maxAttempts, BackoffBase: f.BackoffBase, Jitter: f.Jitter, RetryOn: route.RetryOn}
}

// deadlineError is the cancellation cause of an attempt or stream that a
// deadline ended.
type deadlineError struct{ cause Cause }

func (e deadlineError) Error() string { return "deadline: " + e.cause.String() }

// ErrIdleTimeout is the cause of a response stream cut by the route's idle
// gap limit.
var ErrIdleTimeout = errors.New("response stream idle too long")

// ErrFunctionLimit is the cause of a response stream cut by the execution
// limit.
var ErrFunctionLimit = errors.New("execution limit reached")

// Forward sends req to the route's hosts in order until one answers with a
// status that is not retried, the attempts run out, or a deadline ends the
// request. A backend answer, even a failed one, comes back as a Result; a
// request that ends without one is an *Error.
func (f *Forwarder) Forward(ctx context.Context, req *Request) (*Result, error) {
	rt := f.Transport
	if rt == nil {
		rt = defaultTransport()
	}
	path, err := req.Route.TargetPath(req.Path)
	if err != nil {
		f.Stats.countEnd(ReasonInvalidPath)
		return nil, &Error{Reason: ReasonInvalidPath, Message: "path " + strconv.Quote(trimText(req.Path)) + ": " + err.Error(), Err: err}
	}
	if e := req.Route.Admit(req.Method, req.Header, req.RawQuery); e != nil {
		f.Stats.countEnd(e.Reason) // what the route does not allow is never sent (capability.go)
		return nil, e
	}
	b := req.Budget
	route := req.Route
	// The stream context carries the execution limit for the whole
	// exchange, body included.
	streamCtx, streamCancel := ctx, context.CancelFunc(func() {})
	if !b.Limit.IsZero() {
		streamCtx, streamCancel = context.WithDeadlineCause(ctx, b.Limit, ErrFunctionLimit)
	}
	maxAttempts := max(route.MaxAttempts, 1)
	if req.BodyStream != nil {
		maxAttempts = 1
	}
	f.RetryBudget.begin()
	defer f.RetryBudget.end()
	hosts := f.Ejector.order(route, f.Balancer.order(route), time.Now())
	pol := f.policy(route, maxAttempts)
	if maxAttempts > 1 && hedgeable(req, pol) {
		return f.forwardHedged(ctx, streamCtx, streamCancel, rt, req, path, hosts, pol)
	}
	return f.forwardSequential(ctx, streamCtx, streamCancel, rt, req, path, hosts, pol)
}

// forwardSequential is Forward for a request whose attempts run one after
// the other, each in the caller's goroutine: it drives the attempt loop
// (loop.go) with real attempts and a real backoff timer.
func (f *Forwarder) forwardSequential(ctx, streamCtx context.Context, streamCancel context.CancelFunc, rt http.RoundTripper, req *Request, path target, hosts HostList, pol retryPolicy) (*Result, error) {
	route := req.Route
	var attempts []Attempt
	var throttle throttled
	var ar *attemptResult
	retrying := false // holds a RetryBudget slot
	defer func() {
		if retrying {
			f.RetryBudget.release()
		}
	}()
	l := newLoop(pol, req.Method, req.ClientKey, req.Budget, false)
	now := time.Now()
	act := l.begin(now)
	for {
		switch act.kind {
		case actStart:
			host := hosts[act.i%len(hosts)]
			ar = f.attempt(streamCtx, rt, req, path, host, now, act.i+1, false)
			if retrying {
				f.RetryBudget.release()
				retrying = false
			}
			if ar.authErr != nil {
				streamCancel()
				return nil, f.authFailed(ar.authErr, attempts)
			}
			f.recordHost(route, host, ar)
			throttle.note(ar)
			if attempts == nil {
				// The first entry lives in its attemptResult: one allocation.
				ar.first[0] = ar.record
				attempts = ar.first[:1:1]
			} else {
				attempts = append(attempts, ar.record)
			}
			if ar.clientGone {
				streamCancel()
				ar.close()
				f.Stats.countEnd(ReasonClientGone)
				return nil, &Error{Reason: ReasonClientGone, Attempts: attempts, Err: context.Cause(ctx)}
			}
			now = time.Now()
			act = l.ended(now, act.i, ar.ending(), ar.retryAfter)
		case actSlot:
			var ok bool
			ok, retrying = f.takeSlot(act)
			act = l.slot(now, ok)
		case actWait:
			ar.close() // a retry: the failed attempt is over
			if act.wait > 0 {
				f.observeBackoff(ctx, l.started, act.wait)
				t := time.NewTimer(act.wait)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					streamCancel()
					f.Stats.countEnd(ReasonClientGone)
					return nil, &Error{Reason: ReasonClientGone, Attempts: attempts, Err: context.Cause(ctx)}
				}
			}
			now = time.Now()
			act = l.waited(now)
		case actAnswer:
			return f.deliver(ar, attempts, route, streamCancel), nil
		case actGiveUp:
			if ar.resp != nil {
				res := f.deliver(ar, attempts, route, streamCancel)
				res.Throttled = throttle.after()
				return res, nil
			}
			streamCancel()
			return nil, f.failure(pol, ar.record, attempts)
		case actExpired:
			streamCancel()
			return nil, f.expired(pol, act.cause, attempts, act.i+1)
		default: // actNone and actTimeout come only with attempts side by side (hedged)
			panic("core: the sequential attempt loop got action " + strconv.Itoa(int(act.kind)))
		}
	}
}

// takeSlot answers the attempt loop's actSlot: whether the retry or the
// hedge may start (retrySlot), counted in Stats when it may.
func (f *Forwarder) takeSlot(act loopAction) (ok, held bool) {
	ok, held = f.retrySlot(act.chosen)
	if ok && f.Stats != nil {
		f.Stats.Retries.Add(1)
		if act.hedge {
			f.Stats.Hedges.Add(1)
		}
	}
	return ok, held
}

// observeBackoff reports to the Observer, if any, the wait d that starts
// now, after attempt n.
func (f *Forwarder) observeBackoff(ctx context.Context, n int, d time.Duration) {
	if f.Observer != nil && d > 0 {
		f.Observer.Backoff(ctx, n, time.Now(), d)
	}
}

// attemptResult is the state of one attempt.
type attemptResult struct {
	record     Attempt
	resp       *http.Response
	cancel     context.CancelCauseFunc
	ctx        context.Context
	dial       bool // failed before the request left: always safe to retry
	clientGone bool
	authErr    error // the route's credential could not be had: nothing sent
	retryAfter time.Duration
	out        outgoing      // storage for the attempt's request, allocated with it
	first      [1]Attempt    // storage for the timeline when this is its first entry
	conn       *connTrace    // the backend connection the attempt got, when recorded
	ct         connTrace     // storage for conn, allocated with it
	held       net.Conn      // the connection resp's body is read from, when the transport holds it for that body (heldConn)
	budget     *Budget       // the request's, for chosen
	host       *url.URL      // the host attempted
	window     time.Duration // the attempt's own, for the latency balancer
	elapsed    time.Duration // until the headers, or the failure
}

func (a *attemptResult) close() {
	if a == nil {
		return
	}
	if a.resp != nil {
		// Drain a little so the connection can be reused.
		_, err := io.CopyN(io.Discard, a.resp.Body, 4<<10)
		closeBody(a.resp.Body, a.held, err == io.EOF)
		a.resp = nil
	}
	if a.cancel != nil {
		a.cancel(context.Canceled)
	}
}

// attempt makes one attempt at host, started at start. A hedged attempt
// is cut only by the TTL and the execution limit: its Timeout starts the
// next attempt beside it instead (hedge.go).
func (f *Forwarder) attempt(parent context.Context, rt http.RoundTripper, req *Request, path target, host *url.URL, start time.Time, n int, hedged bool) *attemptResult {
	deadline, cause := req.Budget.Attempt(start)
	window := deadline.Sub(start)
	if hedged {
		deadline, cause = req.Budget.End()
	}
	ctx, cancel := context.WithCancelCause(parent)
	timer := time.AfterFunc(deadline.Sub(start), func() { cancel(deadlineError{cause}) })
	ar := &attemptResult{cancel: cancel, ctx: ctx, record: Attempt{Host: host.Host, Label: req.Route.HostLabel(host)}, budget: &req.Budget, host: host, window: window}
	out := ar.out.build(ar.trace(ctx, rt, req), req, path, host, window)
	if err := f.authorize(ctx, req, out); err != nil {
		timer.Stop()
		cancel(context.Canceled)
		ar.cancel = nil
		ar.authErr = err
		return ar
	}
	if f.Stats != nil {
		f.Stats.Attempts.Add(1)
	}
	if f.Observer != nil {
		end := f.Observer.StartAttempt(ctx, AttemptStart{N: n, Host: host.Host, Method: req.Method, Path: out.URL.Path,
			Scheme: host.Scheme, Budget: window, Cause: cause}, out.Header)
		defer func() { end(ar.record) }()
	}
	resp, err := rt.RoundTrip(out)
	stopped := timer.Stop()
	ar.elapsed = time.Since(start)
	ar.record.DurationMs = durationMs(ar.elapsed)
	if err == nil {
		ar.held = ar.heldConn(out.Method, resp)
	}
	if err == nil && !stopped {
		// The deadline fired as the headers arrived: too late.
		closeBody(resp.Body, ar.held, false)
		resp, err = nil, context.Cause(ctx)
	}
	if err == nil {
		ar.stripRawConnection(resp)
		ar.resp = resp
		ar.record.Outcome = OutcomeStatus
		ar.record.Status = resp.StatusCode
		if ra := resp.Header.Get("Retry-After"); ra != "" { // no clock read for the usual none
			ar.retryAfter = parseRetryAfter(ra, time.Now())
		}
		return ar
	}
	cancel(context.Canceled)
	ar.cancel = nil
	ar.record.Phase = ar.phase()
	var de deadlineError
	switch c := context.Cause(ctx); {
	case errors.As(c, &de):
		ar.record.Cause = de.cause
		ar.record.Outcome = OutcomeTimeout
		ar.record.Failure = FailureTimeout
		if de.cause == CauseFunctionLimit {
			ar.record.Outcome = OutcomeFunctionLimit
		}
		f.Stats.countTimeout(de.cause)
	case errors.Is(c, ErrFunctionLimit):
		ar.record.Cause = CauseFunctionLimit
		ar.record.Outcome = OutcomeFunctionLimit
		ar.record.Failure = FailureTimeout
		f.Stats.countTimeout(CauseFunctionLimit)
	case parent.Err() != nil:
		// The caller ended it: the client left, or cancelled the async
		// request (DELETE). Not the backend's failure.
		ar.clientGone = true
		ar.record.Outcome = OutcomeCancelled
	default:
		ar.record.Outcome = OutcomeConnectError
		ar.record.Failure = classify(err)
		var op *net.OpError
		ar.dial = errors.As(err, &op) && op.Op == "dial"
	}
	return ar
}

// chosen reports whether a deadline the client shortened below the route's
// own cut the attempt (Budget.Chosen).
func (a *attemptResult) chosen() bool { return a.budget.Chosen(a.record.Cause) }

// ending is how the attempt ended, for the retry rules.
func (a *attemptResult) ending() AttemptEnding {
	return AttemptEnding{Record: a.record, Refused: a.dial}
}

// expired ends a request whose time, the deadline c, was over before
// attempt n could start.
func (f *Forwarder) expired(pol retryPolicy, c Cause, attempts []Attempt, n int) *Error {
	e := pol.Expired(c, n)
	e.Attempts = attempts
	f.Stats.countEnd(e.Reason)
	return &e
}

// failure ends a request whose last attempt, ending as last, brought no
// answer.
func (f *Forwarder) failure(pol retryPolicy, last Attempt, attempts []Attempt) *Error {
	e := pol.Ending(last)
	e.Attempts = attempts
	f.Stats.countEnd(e.Reason)
	return &e
}

// deliver hands a backend response to the caller with its body under the
// stream rules: the idle-gap limit and the execution limit.
func (f *Forwarder) deliver(ar *attemptResult, attempts []Attempt, route *Route, streamCancel context.CancelFunc) *Result {
	resp := ar.resp
	ar.resp = nil
	if rwc, ok := resp.Body.(io.ReadWriteCloser); ok && resp.StatusCode == http.StatusSwitchingProtocols {
		resp.Body = &upgradeBody{ReadWriteCloser: rwc, cancel: ar.cancel, streamCancel: streamCancel}
		return &Result{Response: resp, Attempts: attempts, Backend: route.HostLabel(ar.host), BackendURL: baseURLOf(ar.host)}
	}
	// The Result and its body stream are allocated together.
	d := &struct {
		res Result
		sb  streamBody
	}{}
	sb := &d.sb
	sb.body, sb.ctx, sb.cancel, sb.streamCancel, sb.idle, sb.stats = resp.Body, ar.ctx, ar.cancel, streamCancel, route.IdleTimeout, f.Stats
	sb.held = ar.held
	sb.left, sb.limited = route.FirstByteTimeout, route.FirstByteTimeout > 0
	resp.Body = sb
	d.res = Result{Response: resp, Attempts: attempts, Backend: route.HostLabel(ar.host), BackendURL: baseURLOf(ar.host)}
	return &d.res
}

// upgradeBody is the connection to a backend that switched protocols
// (101): reads and writes go to the backend; Close ends the attempt.
type upgradeBody struct {
	io.ReadWriteCloser
	cancel       context.CancelCauseFunc
	streamCancel context.CancelFunc
}

func (u *upgradeBody) Close() error {
	err := u.ReadWriteCloser.Close()
	u.cancel(context.Canceled)
	u.streamCancel()
	return err
}

// streamBody is a response body read under the idle-gap limit: the
// longest silence of the backend between the headers and the first body
// byte (the route's FirstByteTimeout) and between two later bytes
// (IdleTimeout). Its clock runs only while a Read waits on the backend:
// the time the caller spends between two Reads, writing what it read to a
// slow client, is not the backend's silence (docs/deadlines.md#deadlines-and-retries).
type streamBody struct {
	body         io.ReadCloser
	ctx          context.Context
	cancel       context.CancelCauseFunc
	streamCancel context.CancelFunc
	idle         time.Duration // the limit of the gaps after the first byte; zero: none
	stats        *Stats
	held         net.Conn    // the connection the body is read from (attemptResult.held), or nil
	eof          atomic.Bool // a Read returned io.EOF: the transport may reuse held

	mu      sync.Mutex
	timer   *time.Timer   // runs only during a Read
	left    time.Duration // what the current gap has left, when limited
	limited bool          // the current gap has a limit
	closed  bool
}

func (s *streamBody) fire() {
	s.cancel(ErrIdleTimeout)
}

func (s *streamBody) Read(p []byte) (int, error) {
	var start time.Time
	s.mu.Lock()
	if s.limited && !s.closed {
		start = time.Now()
		if s.timer == nil {
			s.timer = time.AfterFunc(s.left, s.fire)
		} else {
			s.timer.Reset(s.left) // at once when nothing is left
		}
	}
	s.mu.Unlock()
	n, err := s.body.Read(p)
	if err == io.EOF {
		s.eof.Store(true)
	}
	if !start.IsZero() {
		s.mu.Lock()
		// A timer that fired has cut the stream; one Close stopped leaves
		// nothing to count.
		if s.timer.Stop() {
			if n > 0 {
				s.left, s.limited = s.idle, s.idle > 0 // a new gap starts
			} else {
				s.left -= time.Since(start)
			}
		}
		s.mu.Unlock()
	}
	if err != nil && err != io.EOF {
		if c := context.Cause(s.ctx); c != nil && c != context.Canceled {
			err = c
		}
	}
	return n, err
}

// Cut reports why the stream was cut, or nil: ErrIdleTimeout or
// ErrFunctionLimit.
func (s *streamBody) Cut() error {
	c := context.Cause(s.ctx)
	if errors.Is(c, ErrIdleTimeout) || errors.Is(c, ErrFunctionLimit) {
		return c
	}
	return nil
}

func (s *streamBody) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
	}
	s.mu.Unlock()
	if c := s.Cut(); c != nil {
		s.stats.countCut(c)
	}
	err := closeBody(s.body, s.held, s.eof.Load())
	s.cancel(context.Canceled)
	s.streamCancel()
	return err
}

// heldConn returns the connection resp's body is read from, when the
// transport holds that connection until the body ends: nil when the
// attempt's connection is not known (HTTP/2, another RoundTripper), or
// when net/http's transport gave it back to its pool with the head (a
// HEAD request, an answer without a body) or handed it over (101).
func (a *attemptResult) heldConn(method string, resp *http.Response) net.Conn {
	if a.conn == nil || a.conn.conn == nil || method == http.MethodHead || resp.ContentLength == 0 ||
		resp.StatusCode == http.StatusSwitchingProtocols {
		return nil
	}
	return a.conn.conn
}

// closeBody closes a backend answer's body and, when its reader did not
// see its end (sawEOF), the connection held for it, before it returns.
// net/http's transport never reuses a connection whose body was closed
// early, but it closes it from its own goroutine after Body.Close has
// returned: a Lambda process frozen between the two would leave the
// backend's work running until the next thaw (docs/deadlines.md#deadlines-and-retries: the upstream
// work is cancelled, not abandoned). held is a headConn: its Close
// returns once the connection is closed, whether this call closed it or
// the transport's, under way, did.
func closeBody(body io.Closer, held net.Conn, sawEOF bool) error {
	err := body.Close()
	if held != nil && !sawEOF {
		held.Close()
	}
	return err
}

// StreamCut reports why a Result's body stream was cut by the gateway:
// ErrIdleTimeout, ErrFunctionLimit, or nil when it was not.
func StreamCut(body io.Reader) error {
	if s, ok := body.(*streamBody); ok {
		return s.Cut()
	}
	return nil
}

// RemoveHopHeaders deletes the hop-by-hop headers from h (isHopHeader),
// including those named by its Connection header.
func RemoveHopHeaders(h http.Header) {
	removeConnectionNamed(h, h["Connection"])
	for k := range h {
		if isHopHeader(k) {
			delete(h, k)
		}
	}
}

// removeConnectionNamed deletes from h the headers named by the values of
// a Connection header.
func removeConnectionNamed(h http.Header, connection []string) {
	for n := range ConnectionNames(connection) {
		h.Del(n)
	}
}

// buildOutgoing makes one attempt's request to host; path is req.Path
// decoded by ConfinePath.
func buildOutgoing(ctx context.Context, req *Request, path string, host *url.URL, window time.Duration) *http.Request {
	return new(outgoing).build(ctx, req, target{req.Path, path}, host, window)
}

// outgoing is storage for one attempt's request: its URL and the values of
// the headers the gateway sets, in one allocation (an attemptResult's).
type outgoing struct {
	url  url.URL
	vals [9]string
	req  http.Request
}

// build is buildOutgoing with o as the request's storage; o must outlive
// the request.
func (o *outgoing) build(ctx context.Context, req *Request, path target, host *url.URL, window time.Duration) *http.Request {
	// Room for the client's headers and the at most seven set below, and
	// User-Agent when the client sent none: a map that grows past its
	// hint (eight fit in the smallest) costs allocations.
	added := 7
	if _, ok := req.Header["User-Agent"]; !ok {
		added++
	}
	h := make(http.Header, len(req.Header)+added)
	for k, v := range req.Header {
		if len(k) >= 3 && strings.EqualFold(k[:3], "s7p") || isHopHeader(k) || k == "Traceparent" || k == "Tracestate" || k == "X-Request-Id" {
			continue
		}
		h[k] = v
	}
	// The client's trace context goes on only when valid (TraceContext).
	if _, ok := req.Header["Traceparent"]; ok {
		if tp, ts := TraceContext(req.Header); tp != "" {
			h["Traceparent"] = []string{tp}
			if ts != "" {
				h["Tracestate"] = []string{ts}
			}
		}
	}
	if a := req.Route; a != nil && a.Auth != nil {
		authHeaders(h, a.Auth) // the client's credential is not the backend's
	}
	removeConnectionNamed(h, req.Header["Connection"]) // RemoveHopHeaders' other half
	// One backing array for the values set here, in o. Each value is its
	// own full slice, so no append can spill into the next.
	vals := o.vals[:0]
	set := func(k, v string) {
		vals = append(vals, v)
		h[k] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	if req.Upgrade != "" {
		h["Connection"] = []string{"Upgrade"}
		h["Upgrade"] = []string{req.Upgrade}
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		set("User-Agent", "") // the transport sends none, rather than its own
	}
	if te := req.Header["Te"]; len(te) > 0 && strings.Contains(strings.ToLower(strings.Join(te, ",")), "trailers") {
		h["Te"] = []string{"trailers"} // gRPC needs it end to end
	}
	if ip := clientIP(req.RemoteAddr); ip != "" {
		if prior := h["X-Forwarded-For"]; len(prior) > 0 {
			ip = strings.Join(prior, ", ") + ", " + ip
		}
		set("X-Forwarded-For", ip)
	}
	// A client's X-Forwarded-Proto and -Host reach core only from a
	// trusted proxy (TrustedProxies.Believe): they describe the request
	// better than this hop does.
	if _, ok := h["X-Forwarded-Proto"]; !ok && req.Proto != "" {
		set("X-Forwarded-Proto", req.Proto)
	}
	if _, ok := h["X-Forwarded-Host"]; !ok && req.Host != "" {
		set("X-Forwarded-Host", req.Host)
	}
	set("Via", addVia(h["Via"]))
	if req.IdempotencyKey != "" {
		set("Idempotency-Key", req.IdempotencyKey)
	}
	if req.RequestID != "" {
		set("X-Request-Id", req.RequestID) // the gateway's, never the client's own
	}
	set("X-Envoy-Expected-Rq-Timeout-Ms", strconv.FormatInt(max(window.Milliseconds(), 1), 10))
	if ct := h.Get("Content-Type"); strings.HasPrefix(ct, "application/grpc") {
		h["Grpc-Timeout"] = []string{grpcTimeout(window)}
	}
	o.url = joinURL(host, path.escaped, path.decoded, req.RawQuery)
	u := &o.url
	var body io.ReadCloser = http.NoBody
	var getBody func() (io.ReadCloser, error)
	var trailer http.Header
	contentLength := int64(0)
	switch {
	case req.BodyStream != nil:
		trailer, body = forwardTrailer(req, io.NopCloser(req.BodyStream))
		contentLength = -1
		if cl, err := strconv.ParseInt(req.Header.Get("Content-Length"), 10, 64); err == nil {
			contentLength = cl
		}
	case len(req.Body) > 0:
		b := req.Body
		body = io.NopCloser(bytes.NewReader(b))
		contentLength = int64(len(b))
		getBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
		if trailer, _ = forwardTrailer(req, nil); trailer != nil {
			contentLength = -1 // trailers need chunked framing
		}
	}
	// The request lives in o: WithContext's copy, made on the stack, is
	// copied there (one allocation fewer per attempt).
	o.req = *(&http.Request{
		Method:        req.Method,
		URL:           u,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          body,
		GetBody:       getBody,
		ContentLength: contentLength,
		Host:          host.Host,
	}).WithContext(ctx)
	out := &o.req
	if contentLength == 0 {
		out.Body = nil
	} else {
		out.Trailer = trailer
	}
	return out
}

// grpcTimeout formats d in gRPC's grpc-timeout syntax: at most eight
// digits and a unit.
func grpcTimeout(d time.Duration) string {
	if d <= 0 {
		return "1n"
	}
	units := []struct {
		unit string
		d    time.Duration
	}{{"n", time.Nanosecond}, {"u", time.Microsecond}, {"m", time.Millisecond}, {"S", time.Second}, {"M", time.Minute}, {"H", time.Hour}}
	for _, u := range units {
		v := d / u.d
		if d%u.d != 0 {
			v++ // round up: never promise less than the window
		}
		if v < 1e8 {
			return strconv.FormatInt(int64(v), 10) + u.unit
		}
	}
	return "99999999H"
}

// NewTransport returns the upstream transport the gateway uses: pooled
// keep-alive connections, no proxy from the environment (requests go only
// to the configured hosts), and no compression of its own, so an answer
// reaches the client byte for byte as the backend sent it.
func NewTransport() *http.Transport {
	t := &http.Transport{
		Proxy:                 nil,
		DialContext:           recordingDial((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext),
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
	}
	t.DialTLSContext = recordingTLSDial(t)
	return t
}

var defaultTransport = sync.OnceValue(func() http.RoundTripper { return NewTransport() })

func trimText(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

func clientIP(remote string) string {
	if remote == "" {
		return ""
	}
	if h, _, err := net.SplitHostPort(remote); err == nil {
		return h
	}
	return remote
}

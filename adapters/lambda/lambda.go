// Package lambda runs the gateway as an AWS Lambda function (runtime
// provided.al2023, binary named bootstrap). It turns each invocation's event
// into a call of the shared HTTP face or of core's continuation engine, and
// nothing more:
//
//   - Function URL and API Gateway HTTP API (payload 2.0) events become plain
//     net/http requests, answered buffered, or streamed through a Function
//     URL with InvokeMode RESPONSE_STREAM;
//   - SQS events carry continuation messages (docs/deploy-aws.md#how-it-runs), answered with
//     the records that failed (events.SQSEventResponse).
//
// The invocation's deadline, which the Lambda runtime client sets on the
// context, is the execution limit: it becomes the request context's
// deadline. Lambda freezes the process as soon as an invocation returns, so
// this host declares no work after the answer (Caps).
package lambda

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	awslambda "github.com/aws/aws-lambda-go/lambda"

	"fngateway/core"
	"fngateway/core/async"
	"fngateway/internal/settings"
)

// APIGatewayLimit is API Gateway's integration timeout: an HTTP API stops
// waiting for the function after 30 s, whatever the function's own timeout.
const APIGatewayLimit = 30 * time.Second

// Caps returns what the Lambda host can do when its Function URL answers
// buffered (CapsFor(settings.InvokeBuffered)).
func Caps() core.HostCaps { return CapsFor(settings.InvokeBuffered) }

// CapsFor returns what the Lambda host can do with a Function URL in the
// given invoke mode: nothing after the answer, no connection upgrades, and
// answers no larger than the mode allows (BufferedResponse,
// StreamedResponse). API Gateway events are answered buffered in either
// mode; the handler sets their limit on each request.
func CapsFor(mode settings.InvokeMode) core.HostCaps {
	c := core.HostCaps{Name: "lambda", WorkAfterAnswer: false, Upgrade: false, Response: BufferedResponse}
	if mode == settings.InvokeResponseStream {
		c.Response = StreamedResponse
	}
	return c
}

// BufferedResponse is the limit of a buffered answer (Function URL
// BUFFERED, API Gateway): "The maximum payload size is 6 MB" (AWS Lambda
// Developer Guide, "Invoking a response streaming enabled function using
// Lambda function URLs"; "Lambda quotas": 6 MB each for request and
// response, synchronous). The payload is the JSON response document, the
// body in it a JSON string or base64 as payloadMeter.Base64 chooses
// (newPayload); Lambda refuses a larger one (413 from the Runtime API, and
// the client gets a bare 502). 6 MiB, the smaller
// reading of "6 MB" that Lambda's own error message states (6291556 bytes).
var BufferedResponse = core.ResponseLimit{MaxBytes: 6 << 20, Whole: true, Form: jsonPayload{}}

// StreamedResponse is the limit of a streamed answer (Function URL
// RESPONSE_STREAM): "The maximum response payload size is 200 MB" (same
// page), raised from 20 MB on 31 July 2025 ("AWS Lambda response streaming
// now supports 200 MB response payloads", AWS What's New). The body
// streams as it is; 200,000,000 bytes, the smaller reading, leaves room
// for the prelude of status and headers.
var StreamedResponse = core.ResponseLimit{MaxBytes: 200_000_000, Whole: false}

// Continuer runs one continuation message. *async.Async is one: Process
// returns nil when the message is done with, an error wrapping
// async.ErrBadMessage when it is malformed, and any other error when it
// should be delivered again.
type Continuer interface {
	Process(ctx context.Context, msg []byte) error
}

var _ Continuer = (*async.Async)(nil)

// Handler answers Lambda invocations. Set its fields before the first
// invocation; it is safe for concurrent use afterwards.
type Handler struct {
	// HTTP is the gateway's HTTP face (httpapi.Handler). Required.
	HTTP http.Handler
	// Continuations runs the continuation messages of SQS events. Nil (async
	// off) fails every record, so that the queue keeps them.
	Continuations Continuer
	// InvokeMode is the Function URL's invoke mode; the zero value is
	// BUFFERED. API Gateway events are always answered buffered.
	InvokeMode settings.InvokeMode
	// Limit, if positive, shortens every invocation to at most this long
	// (FunctionTimeoutSecs set below the function's own timeout).
	Limit time.Duration
	// Check, if set, is called on the first invocation with the function's
	// timeout as that invocation's deadline tells it (whole seconds, rounded up): the
	// settings are checked against it when the environment did not say it
	// at start-up. Its error fails that invocation and every later one
	// until a later deadline tells a longer timeout (the first was read
	// late), when Check is called again with that one; once it has
	// returned nil it is not called again. Nil checks nothing.
	Check func(functionTimeout time.Duration) error
	// Queue, if set, is the queue the SQS events come from (AsyncQueue).
	// A record whose continuation failed transiently is hidden on it for
	// Redelivery's wait (ChangeMessageVisibility) before it is listed as a
	// batch item failure, so that SQS delivers it again after that wait
	// rather than after the queue's whole visibility timeout. Nil leaves
	// every failed record to the visibility timeout.
	Queue async.VisibilityExtender
	// Redelivery is the wait before a failed continuation's next delivery;
	// it never exceeds the invocation's own time limit, which Lambda keeps
	// within the queue's visibility timeout. The zero value uses
	// async.Redelivery's defaults.
	Redelivery async.Redelivery
	// Logger receives failed records and undecodable events. Nil discards.
	Logger *slog.Logger
	// Flush, if set, is called before each invocation returns (for a
	// streamed response, before its stream ends) with the invocation's
	// context: Lambda may freeze the process as soon as it has returned,
	// so telemetry must be out by then. It must return in bounded time.
	Flush func(ctx context.Context)

	checkMu     sync.Mutex
	checked     bool          // Check returned nil
	checkedWith time.Duration // the longest timeout Check was called with
	checkErr    error         // what Check returned with checkedWith
}

// Start runs the Lambda runtime loop with h. It does not return.
func Start(h *Handler) {
	awslambda.Start(h.Invoke)
}

// ErrUnsupportedEvent is wrapped by the error Invoke returns for an event it
// does not serve (API Gateway REST payload 1.0, other event sources).
var ErrUnsupportedEvent = errors.New("unsupported event")

// kind is what an event is, told by its shape.
type kind int

const (
	kindUnknown kind = iota
	kindFunctionURL
	kindAPIGateway
	kindSQS
)

// probe holds the fields that tell events apart.
type probe struct {
	Records []struct {
		EventSource string `json:"eventSource"`
	} `json:"Records"`
	Version        string `json:"version"`
	HTTPMethod     string `json:"httpMethod"`
	RequestContext struct {
		DomainName string `json:"domainName"`
		HTTP       struct {
			Method string `json:"method"`
		} `json:"http"`
	} `json:"requestContext"`
}

// classify tells the kind of a raw event. An HTTP payload 2.0 event is a
// Function URL one when its requestContext.domainName is a Function URL
// domain (<url-id>.lambda-url.<region>.on.aws; Function URLs have no custom
// domains of their own); any other payload 2.0 event came through API
// Gateway, whose 30 s integration limit then applies.
func classify(event []byte) (kind, error) {
	var p probe
	if err := json.Unmarshal(event, &p); err != nil {
		return kindUnknown, fmt.Errorf("%w: not a JSON object: %v", ErrUnsupportedEvent, err)
	}
	switch {
	case len(p.Records) > 0:
		for i, r := range p.Records {
			if r.EventSource != "aws:sqs" {
				return kindUnknown, fmt.Errorf("%w: Records[%d].eventSource %q, want aws:sqs", ErrUnsupportedEvent, i, r.EventSource)
			}
		}
		return kindSQS, nil
	case p.Version == "2.0" && p.RequestContext.HTTP.Method != "":
		if isFunctionURLDomain(p.RequestContext.DomainName) {
			return kindFunctionURL, nil
		}
		return kindAPIGateway, nil
	case p.HTTPMethod != "":
		return kindUnknown, fmt.Errorf("%w: API Gateway payload format 1.0; configure the integration with payload format 2.0", ErrUnsupportedEvent)
	}
	return kindUnknown, fmt.Errorf("%w: neither an HTTP payload 2.0 event nor an SQS event", ErrUnsupportedEvent)
}

// Invoke answers one invocation with the raw event. Its result is a
// buffered payload format 2.0 response (a reader of its JSON document, the
// same for Function URLs and API Gateway), an
// *events.LambdaFunctionURLStreamingResponse or an events.SQSEventResponse.
func (h *Handler) Invoke(ctx context.Context, event json.RawMessage) (any, error) {
	if h.Check != nil {
		if err := h.check(ctx); err != nil {
			return nil, err
		}
	}
	k, err := classify(event)
	if err != nil {
		h.logger().ErrorContext(ctx, "lambda event refused", "err", err.Error())
		return nil, err
	}
	ctx, cancel := h.bound(ctx, k)
	if k == kindSQS {
		defer cancel()
		defer h.flush(ctx)
		return h.serveSQS(ctx, event)
	}
	// serveHTTP calls cancel once the response is complete, which for a
	// streamed one is after Invoke has returned (its stream flushes).
	res, err := h.serveHTTP(ctx, cancel, event, k)
	if _, streamed := res.(*events.LambdaFunctionURLStreamingResponse); !streamed {
		h.flush(ctx)
	}
	return res, err
}

// check calls Check with the function's timeout as ctx's deadline tells it
// if that is longer than any deadline told before, and returns what the
// last call returned.
func (h *Handler) check(ctx context.Context) error {
	h.checkMu.Lock()
	defer h.checkMu.Unlock()
	if h.checked {
		return nil
	}
	dl, ok := ctx.Deadline()
	if !ok {
		return h.checkErr
	}
	d := functionTimeout(time.Until(dl))
	if d <= h.checkedWith {
		return h.checkErr
	}
	h.checkedWith = d
	h.checkErr = h.Check(d)
	if h.checkErr != nil {
		h.logger().ErrorContext(ctx, "settings do not fit the function's timeout", "err", h.checkErr.Error())
	}
	h.checked = h.checkErr == nil
	return h.checkErr
}

// functionTimeout is the function's timeout that an invocation with left
// to run tells: left rounded up to whole seconds. Lambda's timeout is a
// whole number of seconds
// (<https://docs.aws.amazon.com/lambda/latest/api/API_CreateFunction.html#lambda-CreateFunction-request-Timeout>)
// and the runtime API gives only the invocation's absolute deadline
// (Lambda-Runtime-Deadline-Ms), never the timeout nor when the invocation
// began (<https://docs.aws.amazon.com/lambda/latest/dg/runtimes-api.html#runtimes-api-next>);
// the deadline is read after the runtime has handed the invocation over,
// so left is the timeout less that delay, and rounding up gives the
// timeout whenever the delay is under a second. A longer delay (a loaded
// host) gives a second or more less; the Handler keeps the longest
// timeout its invocations have told.
func functionTimeout(left time.Duration) time.Duration {
	return (left + time.Second - 1).Truncate(time.Second)
}

func (h *Handler) flush(ctx context.Context) {
	if h.Flush != nil {
		h.Flush(ctx)
	}
}

// bound returns ctx with the invocation's execution limit: the runtime's
// deadline, shortened by Limit and, for API Gateway events, by the
// integration timeout.
func (h *Handler) bound(ctx context.Context, k kind) (context.Context, context.CancelFunc) {
	d := h.Limit
	if k == kindAPIGateway && (d <= 0 || d > APIGatewayLimit) {
		d = APIGatewayLimit
	}
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

func (h *Handler) logger() *slog.Logger {
	if h.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return h.Logger
}

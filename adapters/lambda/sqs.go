package lambda

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"fngateway/core/async"
)

// errNoAsync fails the records of an SQS event that reached a gateway with
// async off: the queue keeps them (and, in the end, its dead-letter queue).
var errNoAsync = errors.New("async is off (AsyncModeEnabled=false): no continuation can run")

// serveSQS runs each record's continuation under the invocation's deadline,
// one after the other, and lists the records that failed (malformed,
// transiently failed, or in a newer release's format) as batch item
// failures, so that SQS delivers only those again (the event source mapping
// needs ReportBatchItemFailures). Records for unknown or finished requests
// succeed. Nothing fails the whole batch: an event that does not decode as
// SQS lists every record it names. A record that failed transiently or came
// from a newer release is first hidden for its redelivery wait (redeliver),
// so that it comes back after that wait.
func (h *Handler) serveSQS(ctx context.Context, event []byte) (events.SQSEventResponse, error) {
	// The waits never outlast the invocation's time limit: Lambda refuses
	// an event source mapping whose queue's visibility timeout is shorter
	// than the function's timeout, so a wait within it never delays a
	// delivery past what the visibility timeout would have.
	span := time.Duration(-1)
	if dl, ok := ctx.Deadline(); ok {
		span = time.Until(dl)
	}
	var e events.SQSEvent
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	if err := json.Unmarshal(event, &e); err != nil {
		// classify decoded Records already; only a field of the wrong type
		// gets here. Without message ids there is nothing to list.
		h.logger().ErrorContext(ctx, "sqs event does not decode", "err", err.Error())
		return resp, fmt.Errorf("%w: SQS event: %v", ErrUnsupportedEvent, err)
	}
	for _, rec := range e.Records {
		err := errNoAsync
		if h.Continuations != nil {
			err = h.Continuations.Process(ctx, []byte(rec.Body))
		}
		if err == nil {
			continue
		}
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
		kind := "transient"
		switch {
		case errors.Is(err, async.ErrBadMessage):
			kind = "malformed"
		case errors.Is(err, async.ErrNewerFormat):
			// Written by a newer release (a version shift, a rollback):
			// left on the queue, as a transient failure, for a version
			// that can read it.
			kind = "newer-format"
		}
		attrs := []any{"messageId", rec.MessageId, "failure", kind, "err", err.Error()}
		if kind != "malformed" && h.Continuations != nil {
			if wait, ok := h.redeliver(ctx, rec, span); ok {
				attrs = append(attrs, "retryInMs", wait.Milliseconds())
			}
		}
		h.logger().WarnContext(ctx, "continuation record failed", attrs...)
	}
	return resp, nil
}

// redeliverTimeout bounds the ChangeMessageVisibility call of redeliver.
const redeliverTimeout = 2 * time.Second

// redeliver hides rec, whose continuation failed transiently, for its
// redelivery wait (h.Redelivery for its ApproximateReceiveCount, at most
// span when span is not negative) and reports the wait. Without a Queue, or
// when the change fails (it is logged), it reports false: the record then
// comes back after the queue's visibility timeout, as SQS does for every
// failed record. The change is made even when ctx has ended (an interrupted
// continuation), within redeliverTimeout and the invocation's deadline.
func (h *Handler) redeliver(ctx context.Context, rec events.SQSMessage, span time.Duration) (time.Duration, bool) {
	if h.Queue == nil {
		return 0, false
	}
	n, _ := strconv.Atoi(rec.Attributes["ApproximateReceiveCount"])
	wait := h.Redelivery.Wait(n)
	if span >= 0 {
		wait = min(wait, span)
	}
	end := time.Now().Add(redeliverTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(end) && time.Until(dl) > 0 {
		end = dl
	}
	cctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), end)
	defer cancel()
	if _, err := h.Queue.Extend(cctx, async.Message{ID: rec.MessageId, Receipt: rec.ReceiptHandle}, wait); err != nil {
		h.logger().WarnContext(ctx, "continuation record left to the visibility timeout", "messageId", rec.MessageId, "err", err.Error())
		return 0, false
	}
	return wait, true
}

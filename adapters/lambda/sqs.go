package lambda

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"fngateway/core/async"
)

// errNoAsync fails the records of an SQS event that reached a gateway with
// async off: the queue keeps them (and, in the end, its dead-letter queue).
var errNoAsync = errors.New("async is off (AsyncModeEnabled=false): no continuation can run")

// serveSQS runs each record's continuation under the invocation's deadline,
// one after the other, and lists the records that failed (malformed or
// transiently failed) as batch item failures, so that SQS delivers only
// those again (the event source mapping needs ReportBatchItemFailures).
// Records for unknown or finished requests succeed. Nothing fails the whole
// batch: an event that does not decode as SQS lists every record it names.
func (h *Handler) serveSQS(ctx context.Context, event []byte) (events.SQSEventResponse, error) {
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
		if errors.Is(err, async.ErrBadMessage) {
			kind = "malformed"
		}
		h.logger().WarnContext(ctx, "continuation record failed", "messageId", rec.MessageId, "failure", kind, "err", err.Error())
	}
	return resp, nil
}

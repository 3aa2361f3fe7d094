package tests

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"fngateway/core/async"
	"fngateway/internal/emulators"
)

// sqsDelivery is the SQS event of one received message, as the event source
// mapping sends it: its id, body, receipt handle and receive count.
func sqsDelivery(tb testing.TB, m types.Message) []byte {
	tb.Helper()
	e := sample(tb, "sqs-event.json")
	rec := e["Records"].([]any)[0].(map[string]any)
	rec["messageId"], rec["body"], rec["receiptHandle"] = *m.MessageId, *m.Body, *m.ReceiptHandle
	delete(rec, "md5OfBody")
	attrs := rec["attributes"].(map[string]any)
	attrs["ApproximateReceiveCount"] = m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)]
	b, err := json.Marshal(e)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestLambdaContinuationRetry: under the Lambda emulator, a continuation
// that fails transiently (its S3 store is down) is listed as a batch item
// failure and comes back after its backoff — the first one drawn within
// [async.DefaultRedeliveryBase/2, async.DefaultRedeliveryBase] — instead of
// after the in-flight message's visibility (here 300 s, as the event source
// mapping's 6 × a 50 s function timeout would hide it). Lower bound: no
// receive that ended before the invocation started plus the backoff's least
// got it. Upper bound: the first receive that starts after the invocation
// ended plus the backoff's most gets it (fauxqs checks visibility deadlines
// at every receive, so it adds no granularity).
func TestLambdaContinuationRetry(t *testing.T) {
	t.Parallel()
	v := emulators.StartVersitygw(t)
	fq := emulators.StartFauxqs(t)
	be := newAsyncBackend(t) // never released: the request is async at the trigger
	env := lambdaS3SQSEnv(t, be.URL, v, fq)
	env["AWS_LAMBDA_FUNCTION_TIMEOUT"] = "50"
	queueURL := env["AsyncQueue"]
	f := startFunction(t, binary, env)

	a, body, _ := f.invokeHTTP(t, httpEvent(t, "lambda-urls-request.json", httpRequest{
		method: "POST", rawPath: "/reports/retry",
		headers: map[string]string{"s7pasyncmode": "true", "x-userprofile": "u1", "idempotency-key": "key-retry-1"},
		body:    []byte("payload-retry"),
	}))
	if a.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d, want 202: %s", a.StatusCode, body)
	}

	ctx := t.Context()
	sq := sqsClient(fq)
	const visibility = 300 // s
	receive := func() []types.Message {
		t.Helper()
		out, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &queueURL, MaxNumberOfMessages: 1, VisibilityTimeout: visibility,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount}})
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		return out.Messages
	}
	var first types.Message
	for deadline := time.Now().Add(loadMargin); ; {
		if got := receive(); len(got) == 1 {
			first = got[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no continuation message within %v", loadMargin)
		}
		time.Sleep(50 * time.Millisecond) // polling a queue with a deadline
	}

	// The store goes down: the continuation cannot claim its record.
	v.Stop()
	before := time.Now()
	failed := f.invokeSQS(t, sqsDelivery(t, first))
	after := time.Now()
	if len(failed) != 1 || failed[0] != *first.MessageId {
		t.Fatalf("batch item failures %v; want the message %s\n%s", failed, *first.MessageId, f.rie.Log())
	}
	least, most := async.DefaultRedeliveryBase/2, async.DefaultRedeliveryBase
	for {
		start := time.Now()
		got := receive()
		end := time.Now()
		if len(got) == 1 {
			if end.Before(before.Add(least)) {
				t.Fatalf("delivered again %v after the invocation started; want not before %v", end.Sub(before), least)
			}
			if n := got[0].Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)]; n != "2" {
				t.Errorf("ApproximateReceiveCount %s; want 2", n)
			}
			t.Logf("delivered again %v after the failed invocation ended (backoff within [%v, %v])", end.Sub(after), least, most)
			return
		}
		if !start.Before(after.Add(most)) {
			t.Fatalf("not delivered again %v after the failed invocation ended; want it back within %v (not after the %d s visibility)\n%s",
				start.Sub(after), most, visibility, f.rie.Log())
		}
		time.Sleep(100 * time.Millisecond) // polling a queue against a derived bound
	}
}

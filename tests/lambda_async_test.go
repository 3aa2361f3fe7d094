package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"fngateway/internal/emulators"
)

// asyncBackend answers a request with a binary body once the test has
// released its path (release): an order of events, such as "after the
// 202", not a race between a delay and the trigger. It counts calls and the
// calls whose request was cancelled before the answer.
type asyncBackend struct {
	*httptest.Server
	calls, cancelled atomic.Int32
	releases         // release(path) lets the requests for path be answered
}

// asyncResult is the body asyncBackend answers: every byte value.
var asyncResult = func() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}()

func newAsyncBackend(tb testing.TB) *asyncBackend {
	b := &asyncBackend{}
	stop := make(chan struct{})
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.calls.Add(1)
		io.ReadAll(r.Body)
		select {
		case <-b.of(r.URL.Path):
		case <-stop: // the test is over
			return
		case <-r.Context().Done():
			b.cancelled.Add(1)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusOK)
		w.Write(asyncResult)
	}))
	tb.Cleanup(func() { close(stop); b.Server.Close() })
	return b
}

// sqsEvent varies aws-lambda-go's SQS sample: one record per message id and
// body.
func sqsEvent(tb testing.TB, records ...[2]string) []byte {
	tb.Helper()
	e := sample(tb, "sqs-event.json")
	proto := e["Records"].([]any)[0].(map[string]any)
	var recs []any
	for _, r := range records {
		rec := map[string]any{}
		for k, v := range proto {
			rec[k] = v
		}
		rec["messageId"], rec["body"] = r[0], r[1]
		delete(rec, "md5OfBody")
		recs = append(recs, rec)
	}
	e["Records"] = recs
	b, err := json.Marshal(e)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// invokeSQS sends an SQS event and returns the ids of its batch item
// failures.
func (f *function) invokeSQS(tb testing.TB, event []byte) []string {
	tb.Helper()
	out, _ := f.invoke(tb, event)
	var resp struct {
		BatchItemFailures []struct {
			ItemIdentifier string `json:"itemIdentifier"`
		} `json:"batchItemFailures"`
	}
	if err := json.Unmarshal(out, &resp); err != nil || resp.BatchItemFailures == nil {
		tb.Fatalf("answer %q is not an SQSEventResponse (%v)\n%s", out, err, f.rie.Log())
	}
	ids := []string{}
	for _, r := range resp.BatchItemFailures {
		ids = append(ids, r.ItemIdentifier)
	}
	return ids
}

// TestLambdaAsyncS3SQS: the async flow of the Lambda host on S3
// (versitygw) and SQS (fauxqs), the function frozen between invocations:
// the 202 stops the in-flight attempt; the continuation read from the SQS
// queue and delivered as an SQS event in a later invocation writes the
// result; the status URI, invoked as a Function URL event, answers 303 to a
// presigned URL with the exact body; a duplicate delivery changes nothing;
// a malformed record is the only batch item failure.
func TestLambdaAsyncS3SQS(t *testing.T) {
	t.Parallel()
	v := emulators.StartVersitygw(t)
	fq := emulators.StartFauxqs(t)
	be := newAsyncBackend(t) // held until the test has the 202
	env := lambdaS3SQSEnv(t, be.URL, v, fq)
	// The 202 is due at the 300 ms trigger; the execution limit (less the
	// 1 s margin) would hand the request off too, but only after the
	// trigger plus loadMargin, which tells the two apart.
	const trigger = 300 * time.Millisecond
	env["AsyncTriggerTimeout"] = strconv.Itoa(int(trigger / time.Millisecond))
	env["AWS_LAMBDA_FUNCTION_TIMEOUT"] = strconv.Itoa(int((trigger + loadMargin + 5*time.Second) / time.Second))
	queueURL := env["AsyncQueue"]
	f := startFunction(t, binary, env)

	// 1. The submission: 202 at the trigger, and the attempt in flight is
	// cancelled before the answer (the process is frozen right after it).
	a, body, took := f.invokeHTTP(t, httpEvent(t, "lambda-urls-request.json", httpRequest{
		method: "POST", rawPath: "/reports/lambda",
		headers: map[string]string{"s7pasyncmode": "true", "x-userprofile": "u1", "idempotency-key": "key-lambda-1"},
		body:    []byte("payload-123"),
	}))
	be.release("/reports/lambda") // the continuation's attempt is answered
	if a.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d, want 202: %s", a.StatusCode, body)
	}
	if took < trigger || took > trigger+loadMargin {
		t.Errorf("202 after %v; want at the %v trigger (the backend still holds the request; the execution limit is %s s)", took, trigger, env["AWS_LAMBDA_FUNCTION_TIMEOUT"])
	}
	var acc acceptedDoc
	if err := json.Unmarshal(body, &acc); err != nil || acc.ID == "" {
		t.Fatalf("202 body %q: %v", body, err)
	}
	if a.Headers["Location"] != acc.StatusURI || a.Headers["X-Data-Blob-Uri"] != acc.DataBlobURI {
		t.Errorf("202 headers %v do not match its body %s", a.Headers, body)
	}
	// Frozen now: what the backend sees was sent before the answer, and
	// cancelled. On a loaded machine the trigger can fire before the
	// attempt reaches the backend at all: then it sees nothing.
	for deadline := time.Now().Add(loadMargin); be.cancelled.Load() != be.calls.Load() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond) // polling a counter with a deadline
	}
	if c := be.calls.Load(); c > 1 || be.cancelled.Load() != c {
		t.Errorf("backend calls %d, cancelled %d: want the attempt in flight, if it arrived, cancelled by the 202", c, be.cancelled.Load())
	}

	// 2. The continuation message, as the SQS event source mapping reads it.
	ctx := context.Background()
	sq := sqsClient(fq)
	msgID, msgBody, receipt := receiveContinuation(t, sq, queueURL)
	if want := fmt.Sprintf(`{"v":1,"id":"%s"}`, acc.ID); msgBody != want {
		t.Fatalf("continuation message %q, want %q", msgBody, want)
	}

	// 3. Delivered in a later invocation: the result is written.
	inline := be.calls.Load()
	if failed := f.invokeSQS(t, sqsEvent(t, [2]string{msgID, msgBody})); len(failed) != 0 {
		t.Fatalf("batch item failures %v, want none\n%s", failed, f.rie.Log())
	}
	if _, err := sq.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &queueURL, ReceiptHandle: &receipt}); err != nil {
		t.Fatalf("delete the continuation: %v", err)
	}
	if got := be.calls.Load(); got != inline+1 {
		t.Errorf("backend calls %d, want %d (the cancelled ones and the continuation's)", got, inline+1)
	}

	// 4. The status URI, invoked as a Function URL event: 303 to a
	// presigned URL that returns the exact body.
	su, err := url.Parse(acc.StatusURI)
	if err != nil {
		t.Fatal(err)
	}
	status := func() (httpAnswer, []byte) {
		a, b, _ := f.invokeHTTP(t, httpEvent(t, "lambda-urls-request.json", httpRequest{method: "GET", rawPath: su.EscapedPath()}))
		return a, b
	}
	sa, sb := status()
	loc := sa.Headers["Location"]
	if sa.StatusCode != http.StatusSeeOther || loc == "" {
		t.Fatalf("status URI: %d %s, want 303", sa.StatusCode, sb)
	}
	resp, data, _ := Do(t, "GET", loc, nil, "")
	if resp.StatusCode != http.StatusOK || !bytes.Equal(data, asyncResult) {
		t.Errorf("presigned data URL: %d %x, want 200 and the backend's exact body", resp.StatusCode, data)
	}
	// The header URI from the 202, invoked as a Function URL event: 307
	// to a URL presigned at that moment.
	hu, err := url.Parse(acc.HeaderBlobURI)
	if err != nil || hu.Path != "/_gateway/async/"+acc.ID+"/headers" {
		t.Fatalf("header URI %q: want a gateway result URL", acc.HeaderBlobURI)
	}
	readHeader := func() []byte {
		t.Helper()
		ha, hb, _ := f.invokeHTTP(t, httpEvent(t, "lambda-urls-request.json", httpRequest{method: "GET", rawPath: hu.EscapedPath(), rawQuery: hu.RawQuery}))
		if ha.StatusCode != http.StatusTemporaryRedirect || ha.Headers["Location"] == "" {
			t.Fatalf("header URI: %d %s, want 307", ha.StatusCode, hb)
		}
		_, b, _ := Do(t, "GET", ha.Headers["Location"], nil, "")
		return b
	}
	header1 := readHeader()

	// The status monitor, invoked as Function URL events: Succeeded, with
	// the status URI as its resource; a DELETE once finished changes
	// nothing and answers the same document.
	for _, method := range []string{"GET", "DELETE"} {
		path := su.EscapedPath()
		if method == "GET" {
			path += "/operation"
		}
		oa, ob, _ := f.invokeHTTP(t, httpEvent(t, "lambda-urls-request.json", httpRequest{method: method, rawPath: path}))
		var op operationDoc
		if oa.StatusCode != http.StatusOK || json.Unmarshal(ob, &op) != nil || op.Status != "Succeeded" || op.ID != acc.ID ||
			!strings.HasSuffix(op.ResourceLocation, su.EscapedPath()) || oa.Headers["X-Attempts"] == "" {
			t.Errorf("%s %s: %d %v %s; want 200 Succeeded with resourceLocation the status URI", method, path, oa.StatusCode, oa.Headers, ob)
		}
	}

	// 5. A duplicate delivery is acknowledged and changes nothing.
	if failed := f.invokeSQS(t, sqsEvent(t, [2]string{msgID, msgBody})); len(failed) != 0 {
		t.Errorf("duplicate delivery: batch item failures %v, want none", failed)
	}
	header2 := readHeader()
	if !bytes.Equal(header1, header2) || len(header1) == 0 {
		t.Errorf("the header blob changed after a duplicate delivery:\n%s\n%s", header1, header2)
	}
	if got := be.calls.Load(); got != inline+1 {
		t.Errorf("backend calls %d after a duplicate, want %d", got, inline+1)
	}
	// The SQS invocation that wrote the result logged its end, once.
	if ends := endLines(f.rie.Log(), acc.ID); len(ends) != 1 || !strings.Contains(ends[0], `"state":"succeeded"`) || !strings.Contains(ends[0], `"attempts":1`) {
		t.Errorf("async end lines for %s = %q; want one, succeeded, 1 attempt (the one cut by the hand-off is not counted)", acc.ID, ends)
	}

	// 6. One malformed record in a batch is the only failure; its
	// neighbours (a finished and an unknown request) succeed.
	failed := f.invokeSQS(t, sqsEvent(t,
		[2]string{"m-done", msgBody},
		[2]string{"m-bad", "not a continuation"},
		[2]string{"m-unknown", `{"v":1,"id":"0123456789abcdef0123456789abcdef"}`},
	))
	if fmt.Sprint(failed) != "[m-bad]" {
		t.Errorf("batch item failures %v, want [m-bad]", failed)
	}

	// 7. Cancelled while its continuation waits on SQS: nobody holds the
	// request, so the DELETE's own invocation writes the cancellation; the
	// status URI answers 409 Canceled, and the message, delivered later,
	// reaches no backend and changes nothing.
	t.Run("cancelled while queued", func(t *testing.T) {
		a, body, _ := f.invokeHTTP(t, httpEvent(t, "lambda-urls-request.json", httpRequest{
			method: "POST", rawPath: "/reports/cancelled",
			headers: map[string]string{"s7pasyncmode": "true", "x-userprofile": "u1"},
			body:    []byte("payload-123"),
		}))
		var acc acceptedDoc
		if a.StatusCode != http.StatusAccepted || json.Unmarshal(body, &acc) != nil {
			t.Fatalf("status %d, want 202: %s", a.StatusCode, body)
		}
		calls := be.calls.Load()
		su, _ := url.Parse(acc.StatusURI)
		invoke := func(method, path string) (httpAnswer, []byte) {
			a, b, _ := f.invokeHTTP(t, httpEvent(t, "lambda-urls-request.json", httpRequest{method: method, rawPath: path}))
			return a, b
		}
		da, db := invoke("DELETE", su.EscapedPath())
		var op operationDoc
		if da.StatusCode != http.StatusAccepted || json.Unmarshal(db, &op) != nil || op.Status != "Canceled" {
			t.Errorf("DELETE: %d %s; want 202 with the document, Canceled (nobody held the request)", da.StatusCode, db)
		}
		sa, sb := invoke("GET", su.EscapedPath())
		if sa.StatusCode != http.StatusConflict || sa.Headers["X-Gateway-Error"] != "Canceled" {
			t.Errorf("status URI: %d %v %s; want 409 Canceled", sa.StatusCode, sa.Headers, sb)
		}
		// The DELETE's invocation ended it, and logged so.
		if ends := endLines(f.rie.Log(), acc.ID); len(ends) != 1 || !strings.Contains(ends[0], `"state":"canceled"`) || !strings.Contains(ends[0], `"code":"Canceled"`) {
			t.Errorf("async end lines for %s = %q; want one, canceled", acc.ID, ends)
		}
		id, msg, receipt := receiveContinuation(t, sq, queueURL)
		if !strings.Contains(msg, acc.ID) {
			t.Fatalf("continuation %q is not for %s", msg, acc.ID)
		}
		if failed := f.invokeSQS(t, sqsEvent(t, [2]string{id, msg})); len(failed) != 0 {
			t.Errorf("batch item failures %v, want none", failed)
		}
		if _, err := sq.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &queueURL, ReceiptHandle: &receipt}); err != nil {
			t.Fatal(err)
		}
		if got := be.calls.Load(); got != calls {
			t.Errorf("backend calls %d after the delivery, want %d: a cancelled request is not sent", got, calls)
		}
		if sa2, sb2 := invoke("GET", su.EscapedPath()); sa2.StatusCode != sa.StatusCode || !bytes.Equal(sb, sb2) {
			t.Errorf("the result changed after the delivery: %d %s", sa2.StatusCode, sb2)
		}
	})

	// 8. With a hanging backend, the execution limit (minus the margin:
	// limitSettings) hands the request off: 202 before the timeout, never
	// "Task timed out". The margin (loadMargin) is the room for the
	// hand-off's writes to versitygw and fauxqs on a loaded machine.
	t.Run("function limit hands off", func(t *testing.T) {
		hang, cancelled := silentBackend(t)
		env := lambdaS3SQSEnv(t, hang.URL, v, fq)
		env["AWS_LAMBDA_FUNCTION_TIMEOUT"], env["FunctionLimitMarginMs"] = limitSettings()
		delete(env, "AsyncTriggerTimeout") // the default 10 s: the limit comes first
		f := startFunction(t, binary, env)
		f.warm(t)
		a, body, took := f.invokeHTTP(t, httpEvent(t, "lambda-urls-request.json", httpRequest{
			method: "POST", rawPath: "/reports/limit",
			headers: map[string]string{"s7pasyncmode": "true", "x-userprofile": "u1", "s7pttl": "60"},
			body:    []byte("payload"),
		}))
		if a.StatusCode != http.StatusAccepted {
			t.Fatalf("status %d, want 202: %s", a.StatusCode, body)
		}
		// At the limit less the margin, not before; the emulator judges
		// the timeout itself (below).
		if took < limitAnswer-500*time.Millisecond {
			t.Errorf("202 after %v, want at about %v (the limit less the margin)", took, limitAnswer)
		}
		// Frozen now: what the backend sees was sent before the answer.
		select {
		case <-cancelled:
		case <-time.After(loadMargin):
			t.Errorf("the backend's request was not cancelled by the hand-off")
		}

		// The continuation runs in a later invocation under the same limit:
		// the attempt it cannot finish is checkpointed, cancelled, and handed
		// on to a new message, before the timeout.
		var acc acceptedDoc
		if err := json.Unmarshal(body, &acc); err != nil {
			t.Fatal(err)
		}
		id, msg, receipt := receiveContinuation(t, sq, queueURL)
		if !strings.Contains(msg, acc.ID) {
			t.Fatalf("continuation %q is not for %s", msg, acc.ID)
		}
		if failed := f.invokeSQS(t, sqsEvent(t, [2]string{id, msg})); len(failed) != 0 {
			t.Errorf("checkpointed continuation: batch item failures %v, want none", failed)
		}
		select {
		case <-cancelled:
		case <-time.After(loadMargin):
			t.Errorf("the continuation's attempt was not cancelled at the limit")
		}
		if _, err := sq.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &queueURL, ReceiptHandle: &receipt}); err != nil {
			t.Fatal(err)
		}
		if _, next, _ := receiveContinuation(t, sq, queueURL); next != msg {
			t.Errorf("after the checkpoint the queue holds %q, want a new %q", next, msg)
		}
		sa, sb, _ := f.invokeHTTP(t, httpEvent(t, "lambda-urls-request.json", httpRequest{method: "GET", rawPath: "/_gateway/async/" + acc.ID}))
		if sa.StatusCode != http.StatusAccepted || !strings.Contains(string(sb), `"checkpoints":1`) {
			t.Errorf("status after a checkpoint: %d %s, want pending with one checkpoint", sa.StatusCode, sb)
		}
		if strings.Contains(f.rie.Log(), "Task timed out") {
			t.Errorf("the emulator reported a timeout:\n%s", f.rie.Log())
		}
	})

	// 8. With a store that accepts connections but never answers, the
	// hand-off gives up in time: 503 AsyncUnavailable before the timeout.
	// It gives up half the margin before the timeout (the other half is
	// the room to answer) or 10 s after it began, whichever comes first:
	// with a 10 s timeout and an 8 s margin, at 6 s, the half margin's
	// bound, leaving 4 s; without that bound it would give up at 12 s,
	// past the timeout.
	t.Run("store hangs at the function limit", func(t *testing.T) {
		hang, _ := silentBackend(t)
		hole := blackHole(t)
		env := lambdaS3SQSEnv(t, hang.URL, v, fq)
		env["AWS_LAMBDA_FUNCTION_TIMEOUT"], env["FunctionLimitMarginMs"] = "10", "8000"
		env["AWS_ENDPOINT_URL_S3"] = "http://" + hole
		delete(env, "AsyncTriggerTimeout")
		f := startFunction(t, binary, env)
		a, body, _ := f.invokeHTTP(t, httpEvent(t, "lambda-urls-request.json", httpRequest{
			method: "POST", rawPath: "/reports/down",
			headers: map[string]string{"s7pasyncmode": "true", "x-userprofile": "u1", "s7pttl": "60"},
			body:    []byte("payload"),
		}))
		if a.StatusCode != http.StatusServiceUnavailable || a.Headers["X-Gateway-Error"] != "AsyncUnavailable" {
			t.Errorf("answer %d %s, want 503 AsyncUnavailable", a.StatusCode, body)
		}
		if strings.Contains(f.rie.Log(), "Task timed out") {
			t.Errorf("the emulator reported a timeout:\n%s", f.rie.Log())
		}
	})
}

// blackHole listens on loopback, accepts connections and never answers.
func blackHole(tb testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	tb.Cleanup(func() {
		l.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// sqsClient is an SQS client of the fauxqs server f, as the SQS event
// source mapping reads the queue.
func sqsClient(f *emulators.Fauxqs) *sqs.Client {
	return sqs.NewFromConfig(sdkaws.Config{
		Region:      emulators.FauxqsRegion,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
	}, func(o *sqs.Options) { o.BaseEndpoint = sdkaws.String(f.Endpoint()) })
}

// receiveContinuation reads the next continuation message as the SQS event
// source mapping would (it stays in flight for a minute), within
// loadMargin: it is queued at once.
func receiveContinuation(tb testing.TB, sq *sqs.Client, queueURL string) (id, body, receipt string) {
	tb.Helper()
	deadline := time.Now().Add(loadMargin)
	for time.Now().Before(deadline) {
		out, err := sq.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &queueURL, MaxNumberOfMessages: 1, WaitTimeSeconds: 1, VisibilityTimeout: 60})
		if err != nil {
			tb.Fatalf("receive a continuation: %v", err)
		}
		for _, m := range out.Messages {
			return sdkaws.ToString(m.MessageId), sdkaws.ToString(m.Body), sdkaws.ToString(m.ReceiptHandle)
		}
	}
	tb.Fatalf("no continuation message on %s within %v", queueURL, loadMargin)
	return "", "", ""
}

// endLines returns the "async request ended" log lines of request id in
// log.
func endLines(log, id string) []string {
	var out []string
	for line := range strings.SplitSeq(log, "\n") {
		if strings.Contains(line, `"msg":"async request ended"`) && strings.Contains(line, `"async":"`+id+`"`) {
			out = append(out, line)
		}
	}
	return out
}

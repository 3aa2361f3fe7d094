package lambda

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"fngateway/core/async"
	"fngateway/infra/filestore"
	"fngateway/internal/testutil"
)

// TestSQSNewerFormat: an SQS record whose continuation message, or the
// async record it names, is in a format version newer than this build reads
// (a newer function version beside this one, or rolled back from) is a
// batch item failure, hidden for its redelivery wait like a transient
// failure, and logged as left for a newer version; the async record is not
// marked corrupt. Before, the message was "malformed" (left to the
// visibility timeout, then the dead-letter queue) and a newer record was
// settled as corrupt: its request never ran.
func TestSQSNewerFormat(t *testing.T) {
	fs, err := filestore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id, idMsg := testutil.PutNewerRecord(t, fs, "")
	var logs bytes.Buffer
	x := &extender{}
	h := &Handler{HTTP: echo, Continuations: &async.Async{Store: fs, Queue: fs}, Queue: x,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
	out, err := h.Invoke(ctx, sqsEvent(t,
		sqsRecord("newer-message", testutil.NewerMessage, 1),
		sqsRecord("newer-record", idMsg, 1)))
	if err != nil {
		t.Fatal(err)
	}
	var failed []string
	for _, f := range out.(events.SQSEventResponse).BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	if got := strings.Join(failed, ","); got != "newer-message,newer-record" {
		t.Errorf("batch item failures = %s; want newer-message,newer-record", got)
	}
	if len(x.got) != 2 {
		t.Errorf("visibility changes %v; want both records hidden for their redelivery wait", x.got)
	}
	if n := strings.Count(logs.String(), `"failure":"newer-format"`); n != 2 {
		t.Errorf("%d lines with failure newer-format; want 2; logs:\n%s", n, logs.String())
	}
	if _, _, err := fs.Get(ctx, "gateway/corrupt/"+id); err == nil {
		t.Errorf("the record was marked corrupt")
	}
}

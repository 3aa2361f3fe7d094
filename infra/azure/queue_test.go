package azure_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"

	"fngateway/core/async"
	"fngateway/infra/azure"
	"fngateway/internal/emulators"
	"fngateway/internal/testutil"
)

// rawQueue is a plain SDK client on the named queue, to look at what
// travels on the wire.
func rawQueue(tb testing.TB, az *emulators.Azurite, name string) *azqueue.QueueClient {
	tb.Helper()
	q, err := azqueue.NewQueueClientFromConnectionString(az.ConnectionString(), name, nil)
	if err != nil {
		tb.Fatalf("azqueue client: %v", err)
	}
	return q
}

// receiveOne polls q until it returns a message.
func receiveOne(tb testing.TB, q *azure.Queue, visibility, timeout time.Duration) async.Message {
	tb.Helper()
	ctx := testutil.Context(tb)
	var got async.Message
	testutil.Eventually(tb, timeout, "receive a message", func() bool {
		msgs, err := q.Receive(ctx, 1, visibility)
		if err != nil {
			tb.Fatalf("Receive: %v", err)
		}
		if len(msgs) > 1 {
			tb.Fatalf("Receive(1) returned %d messages", len(msgs))
		}
		if len(msgs) == 1 {
			got = msgs[0]
			return true
		}
		return false
	})
	return got
}

// TestQueue runs what is specific to the Azure Queue and the Notifier
// against one Azurite (wire format, message size, names); the semantics
// core relies on are checked by core/async/porttest in TestQueuePort. Subtests
// use their own queues and run in parallel.
func TestQueue(t *testing.T) {
	t.Parallel()
	az := emulators.StartAzurite(t)
	acct := newAccount(t, az)
	newQueue := func(t *testing.T) (*azure.Queue, string) {
		t.Helper()
		name := testutil.UniqueName("q")
		q, err := acct.Queue(name)
		if err != nil {
			t.Fatalf("Queue(%q): %v", name, err)
		}
		return q, name
	}

	t.Run("WireFormat", func(t *testing.T) {
		t.Parallel()
		ctx := testutil.Context(t)
		q, name := newQueue(t)
		if msgs, err := q.Receive(ctx, 5, time.Second); err != nil || msgs == nil || len(msgs) != 0 {
			t.Fatalf("Receive on a missing queue = %v, %v; want an empty slice", msgs, err)
		}
		body := []byte(`{"id":"r1","step":2}` + "\x00\xff")
		if err := q.Enqueue(ctx, body, 0); err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		// On the wire the text is base64, as the queue trigger expects.
		peek, err := rawQueue(t, az, name).PeekMessage(ctx, nil)
		if err != nil || len(peek.Messages) != 1 {
			t.Fatalf("PeekMessage = %v, %v; want one message", peek.Messages, err)
		}
		if got, want := *peek.Messages[0].MessageText, base64.StdEncoding.EncodeToString(body); got != want {
			t.Fatalf("message text %q, want base64 %q", got, want)
		}
		// Time-to-live -1: the message never expires (the default is 7 days).
		if exp := peek.Messages[0].ExpirationTime; exp == nil || exp.Before(time.Now().AddDate(1, 0, 0)) {
			t.Fatalf("message expires at %v, want never", exp)
		}
		m := receiveOne(t, q, 30*time.Second, 5*time.Second)
		if !bytes.Equal(m.Body, body) {
			t.Fatalf("received %q, want %q", m.Body, body)
		}
		if err := q.Complete(ctx, m); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		if err := q.Complete(ctx, m); !errors.Is(err, async.ErrNotFound) {
			t.Fatalf("Complete again: error = %v, want ErrNotFound", err)
		}
	})

	t.Run("BatchWithUndecodable", func(t *testing.T) {
		t.Parallel()
		ctx := testutil.Context(t)
		q, name := newQueue(t)
		if err := q.Enqueue(ctx, []byte("good"), 0); err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		if _, err := rawQueue(t, az, name).EnqueueMessage(ctx, "not base64!", nil); err != nil {
			t.Fatalf("raw enqueue: %v", err)
		}
		var bodies []string
		testutil.Eventually(t, 5*time.Second, "receive both messages", func() bool {
			msgs, err := q.Receive(ctx, 32, 30*time.Second)
			if err != nil {
				t.Fatalf("Receive: %v", err)
			}
			for _, m := range msgs {
				bodies = append(bodies, string(m.Body))
			}
			return len(bodies) == 2
		})
		if got := strings.Join(bodies, "|"); got != "good|not base64!" && got != "not base64!|good" {
			t.Fatalf("bodies %q; want the decoded one and the raw text", bodies)
		}
	})

	t.Run("MessageSize", func(t *testing.T) {
		t.Parallel()
		ctx := testutil.Context(t)
		q, _ := newQueue(t)
		if err := q.Enqueue(ctx, bytes.Repeat([]byte{0xab}, azure.MaxMessageSize), 0); err != nil {
			t.Fatalf("Enqueue of MaxMessageSize bytes: %v", err)
		}
		m := receiveOne(t, q, 30*time.Second, 5*time.Second)
		if len(m.Body) != azure.MaxMessageSize {
			t.Fatalf("received %d bytes, want %d", len(m.Body), azure.MaxMessageSize)
		}
		if err := q.Enqueue(ctx, make([]byte, azure.MaxMessageSize+1), 0); err == nil {
			t.Fatal("Enqueue of MaxMessageSize+1 bytes: no error")
		}
	})

	t.Run("Extend", func(t *testing.T) {
		t.Parallel()
		ctx := testutil.Context(t)
		q, _ := newQueue(t)
		body := []byte(`{"v":1,"id":"0123456789abcdef0123456789abcdef"}`)
		if err := q.Enqueue(ctx, body, 0); err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		m := receiveOne(t, q, time.Minute, 5*time.Second)
		// A longer hide issues a new receipt; the old one is stale.
		m2, err := q.Extend(ctx, m, 2*time.Minute)
		if err != nil || m2.Receipt == m.Receipt || string(m2.Body) != string(body) {
			t.Fatalf("Extend = %+v, %v; want a new receipt, the same body", m2, err)
		}
		if msgs, err := q.Receive(ctx, 1, time.Second); err != nil || len(msgs) != 0 {
			t.Fatalf("Receive while extended = %v, %v; want none", msgs, err)
		}
		if _, err := q.Extend(ctx, m, time.Minute); !errors.Is(err, async.ErrNotFound) {
			t.Errorf("Extend with a stale receipt = %v; want async.ErrNotFound", err)
		}
		// Zero shows it again at once, body unchanged.
		if _, err := q.Extend(ctx, m2, 0); err != nil {
			t.Fatalf("Extend(0): %v", err)
		}
		m3 := receiveOne(t, q, time.Minute, 5*time.Second)
		if string(m3.Body) != string(body) || m3.DequeueCount != 2 {
			t.Errorf("redelivered %q (count %d); want the same body, count 2", m3.Body, m3.DequeueCount)
		}
		m4, err := q.Extend(ctx, m3, time.Minute)
		if err != nil {
			t.Fatalf("Extend: %v", err)
		}
		if err := q.Complete(ctx, m4); err != nil {
			t.Errorf("Complete with the extended receipt: %v", err)
		}
	})

	t.Run("InvalidQueueName", func(t *testing.T) {
		t.Parallel()
		for _, name := range []string{"", "ab", "Upper", "a_b", "-ab", "ab-", "a--b", strings.Repeat("a", 64)} {
			if _, err := acct.Queue(name); err == nil || !strings.Contains(err.Error(), `"`+name+`"`) {
				t.Errorf("Queue(%q) error = %v, want one naming it", name, err)
			}
		}
	})

	t.Run("Notify", func(t *testing.T) {
		t.Parallel()
		ctx := testutil.Context(t)
		n := acct.Notifier()
		topic := testutil.UniqueName("topic")
		body := []byte(`{"RequestGuid":"abc","Status":"Queued","Timestamp":"2026-01-01T00:00:00Z","topicName":"` + topic + `"}`)
		if err := n.Notify(ctx, topic, body); err != nil {
			t.Fatalf("Notify: %v", err)
		}
		peek, err := rawQueue(t, az, topic).PeekMessage(ctx, nil)
		if err != nil || len(peek.Messages) != 1 {
			t.Fatalf("PeekMessage = %v, %v; want one message", peek.Messages, err)
		}
		got, err := base64.StdEncoding.DecodeString(*peek.Messages[0].MessageText)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("topic message %q (base64 error %v), want base64 of %q", *peek.Messages[0].MessageText, err, body)
		}
		for _, bad := range []string{"Bad_Topic", "x", "a--b"} {
			if err := n.Notify(ctx, bad, body); err == nil || !strings.Contains(err.Error(), bad) {
				t.Errorf("Notify(%q) error = %v, want one naming the topic", bad, err)
			}
		}
	})

	// NoCreate (the Functions host): a missing queue is an error naming it
	// and stays missing; a queue Terraform made is sent to.
	t.Run("NotifyNoCreate", func(t *testing.T) {
		t.Parallel()
		ctx := testutil.Context(t)
		n := acct.Notifier()
		n.NoCreate = true
		missing := testutil.UniqueName("missing")
		err := n.Notify(ctx, missing, []byte("x"))
		if err == nil || !strings.Contains(err.Error(), "queue "+missing+" does not exist") {
			t.Fatalf("Notify to a missing queue: %v; want an error naming it", err)
		}
		if _, err := rawQueue(t, az, missing).GetProperties(ctx, nil); err == nil {
			t.Fatalf("queue %s exists after Notify with NoCreate", missing)
		}
		made := testutil.UniqueName("made")
		if _, err := rawQueue(t, az, made).Create(ctx, nil); err != nil {
			t.Fatalf("Create: %v", err)
		}
		if err := n.Notify(ctx, made, []byte("x")); err != nil {
			t.Fatalf("Notify to a queue Terraform made: %v", err)
		}
	})
}

package azure

import (
	"context"
	"encoding/base64"
	"fmt"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2/queueerror"

	"fngateway/core/async"
)

var _ async.DeadLetters = (*PoisonQueue)(nil)

// PoisonSuffix ends the name of a queue's poison queue: the Functions
// host moves a message that failed maxDequeueCount deliveries (5 by
// default) from <queue> to <queue>-poison ("Azure Queue storage trigger
// for Azure Functions", Poison messages).
const PoisonSuffix = "-poison"

// PoisonQueue is a queue's poison queue as its dead letters. Make it with
// Account.PoisonQueue; it is safe for concurrent use.
type PoisonQueue struct {
	q *queueClient
	// texts keeps each listed message's text under its id and pop receipt
	// (a batch may share one receipt), which
	// Release writes back unchanged.
	mu    sync.Mutex
	texts map[string]string
}

// PoisonQueue returns the poison queue of the account's queue named queue
// (the AsyncQueue setting): <queue>-poison.
func (a *Account) PoisonQueue(queue string) (*PoisonQueue, error) {
	name := queue + PoisonSuffix
	if err := checkName("queue", name); err != nil {
		return nil, fmt.Errorf("azure poison queue: %w", err)
	}
	return &PoisonQueue{q: newQueueClient(a.queueSvc, name), texts: map[string]string{}}, nil
}

// Name returns the poison queue's name.
func (p *PoisonQueue) Name() string { return p.q.name }

// List dequeues up to max messages, 32 at a time, each hidden for hold
// (rounded up to whole seconds, at least 1 s), until the queue has no
// visible one. The service has no way to page through a queue without
// dequeuing (Peek Messages returns the first 32 only), so each listing
// counts in the poison queue's own DequeueCount; Deliveries is that count
// less this listing's dequeue. SentAt is the message's insertion time: when
// the host moved it to the poison queue. A missing poison queue holds
// nothing. A text that is not base64 is returned raw, as Queue.Receive does.
func (p *PoisonQueue) List(ctx context.Context, max int, hold time.Duration) ([]async.DeadLetter, error) {
	out := []async.DeadLetter{}
	seen := map[string]bool{}
	for len(out) < max {
		resp, err := p.q.client.DequeueMessages(ctx, &azqueue.DequeueMessagesOptions{
			NumberOfMessages:  to.Ptr(int32(min(max-len(out), maxReceive))),
			VisibilityTimeout: to.Ptr(seconds(hold, 1)),
		})
		if queueerror.HasCode(err, queueerror.QueueNotFound) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("receive from %s: %w", p.q.name, err)
		}
		if len(resp.Messages) == 0 {
			break
		}
		for _, m := range resp.Messages {
			if m == nil || seen[deref(m.MessageID)] {
				continue
			}
			seen[deref(m.MessageID)] = true
			text := deref(m.MessageText)
			d := async.DeadLetter{ID: deref(m.MessageID), Receipt: deref(m.PopReceipt), Body: []byte(text)}
			if body, err := base64.StdEncoding.DecodeString(text); err == nil {
				d.Body = body
			}
			if m.DequeueCount != nil {
				d.Deliveries = int(*m.DequeueCount) - 1
			}
			if m.InsertionTime != nil {
				d.SentAt = m.InsertionTime.UTC()
			}
			p.mu.Lock()
			p.texts[d.ID+"\x00"+d.Receipt] = text
			p.mu.Unlock()
			out = append(out, d)
		}
	}
	return out, nil
}

// Delete deletes the listed message d.
func (p *PoisonQueue) Delete(ctx context.Context, d async.DeadLetter) error {
	p.forget(d)
	if _, err := p.q.client.DeleteMessage(ctx, d.ID, d.Receipt, nil); err != nil {
		return fmt.Errorf("delete message %s from %s: %w", d.ID, p.q.name, err)
	}
	return nil
}

// Release makes the listed message d visible again at once, its text
// unchanged (Update Message with a zero visibility timeout).
func (p *PoisonQueue) Release(ctx context.Context, d async.DeadLetter) error {
	text, ok := p.forget(d)
	if !ok {
		text = base64.StdEncoding.EncodeToString(d.Body)
	}
	_, err := p.q.client.UpdateMessage(ctx, d.ID, d.Receipt, text, &azqueue.UpdateMessageOptions{VisibilityTimeout: to.Ptr(int32(0))})
	if err != nil {
		return fmt.Errorf("release message %s in %s: %w", d.ID, p.q.name, err)
	}
	return nil
}

func (p *PoisonQueue) forget(d async.DeadLetter) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := d.ID + "\x00" + d.Receipt
	t, ok := p.texts[k]
	delete(p.texts, k)
	return t, ok
}

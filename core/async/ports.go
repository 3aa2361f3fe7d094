package async

import (
	"context"
	"errors"
	"io"
	"time"
)

// The ports: what core calls, implemented in infra/ (file store, Azure Blob
// and Queue, S3, SQS). Keys are "<container>/<name>": the first path segment
// names a container (an Azure container, an S3 prefix, a directory), the rest
// a blob within it. Containers are created on first use when missing.

// ErrNotFound is returned by a Store for a key that holds nothing.
var ErrNotFound = errors.New("not found")

// ErrCorruptRecord is wrapped by the error a Store returns for an object it
// holds but cannot read as one: bytes that are not what it wrote, an empty or
// truncated file, a symlink or another file that is not a regular one. Core
// wraps the same sentinel for a record whose content does not decode, so a
// caller branches on one error whatever layer found the damage: the request
// is terminal (its status URI answers 500 CorruptRecord and its message is
// settled), never retried as a transient failure.
var ErrCorruptRecord = errors.New("corrupt record")

// ErrConflict is returned by a conditional write that lost: the object
// changed since the version given, or exists where it must not.
var ErrConflict = errors.New("conditional write conflict")

// Store keeps continuation records (small JSON documents written with
// optimistic concurrency) and blobs (request and result bodies, streamed).
// Implementations are safe for concurrent use.
type Store interface {
	// Get returns the object at key and its version (an ETag).
	// It returns ErrNotFound when nothing is there, and an error wrapping
	// ErrCorruptRecord when what is there cannot be read as an object.
	Get(ctx context.Context, key string) (data []byte, version string, err error)
	// Put writes data at key if the object's current version is ifVersion,
	// or, when ifVersion is "", only if nothing is there yet. It returns the
	// new version, or ErrConflict when the condition does not hold.
	Put(ctx context.Context, key string, data []byte, ifVersion string) (version string, err error)
	// WriteBlob streams r into the blob at key without holding it all in
	// memory. The blob appears whole or not at all. With create set it
	// fails with ErrConflict if the blob exists; otherwise it replaces it.
	WriteBlob(ctx context.Context, key string, r io.Reader, contentType string, create bool) error
	// OpenBlob opens the blob at key for reading; ErrNotFound if missing.
	OpenBlob(ctx context.Context, key string) (io.ReadCloser, error)
	// SignURL returns a read-only URL for the one blob at key, valid until
	// expiry. It may be relative ("/_gateway/blobs/…") when the gateway
	// serves the blob itself; the HTTP adapter makes it absolute.
	SignURL(ctx context.Context, key string, expiry time.Time) (string, error)
}

// Message is one delivery of a queued continuation.
type Message struct {
	// ID identifies the message; Receipt proves this delivery (a pop
	// receipt, a receipt handle) and is what Complete needs.
	ID, Receipt string
	// Body is the payload given to Enqueue, decoded from any transport
	// encoding (such as the base64 the Functions queue trigger expects).
	Body []byte
	// DequeueCount counts deliveries of this message, this one included.
	DequeueCount int
}

// Queue carries continuations between invocations. Delivery is at least
// once: a received message that is not completed before its visibility
// timeout is delivered again. Implementations are safe for concurrent use.
type Queue interface {
	// Enqueue adds a message that becomes visible after delay.
	Enqueue(ctx context.Context, body []byte, delay time.Duration) error
	// Receive returns up to max visible messages and hides each for
	// visibility. It returns an empty slice, not an error, when none wait.
	Receive(ctx context.Context, max int, visibility time.Duration) ([]Message, error)
	// Complete deletes a received message.
	Complete(ctx context.Context, m Message) error
}

// VisibilityExtender is implemented by queues whose received messages can
// stay hidden for longer while they are worked on, so that a worker may
// receive with a short visibility and renew it as a heartbeat: a message
// whose worker died comes back within seconds. The local worker finds it by
// type assertion; on the cloud hosts the platform owns the visibility.
type VisibilityExtender interface {
	// Extend hides the received message m for visibility from now (zero:
	// visible again at once) and returns m with the Receipt that its next
	// Extend or Complete needs (a queue may issue a new one). A message
	// that is gone, or was received again since, is an error wrapping
	// ErrNotFound or ErrConflict: its worker no longer holds it.
	Extend(ctx context.Context, m Message, visibility time.Duration) (Message, error)
}

// Notifier sends lifecycle notifications to a named topic: a queue of that
// name on the store's own service, or a JSON-lines file for the file store.
type Notifier interface {
	Notify(ctx context.Context, topic string, body []byte) error
}

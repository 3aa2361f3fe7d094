package async

// The async commit protocol of Async (Submit, Process, Finish).
//
// This file holds no code: it is the design note beside the engine, kept
// in Go so that it moves with the code it describes. The record's states
// and the store layout are in record.go and async.go.
//
// A serverless invocation cannot keep working after it answers, so Submit
// makes the request durable, in this order: the request body blob
// (gateway/requests/<id>), the record in state queued
// (gateway/records/<id>.json), the queue message {"v":1,"id":…}, and, when
// the client gave an Idempotency-Key, the idempotency index entry
// (gateway/idempotency/<hex sha256 of profile, key and caller>, see
// idempotency.key). Only then does it
// return the Accepted the 202 is made of. Every queue delivery runs Process;
// the queue delivers at least once, so Process may run twice for one message,
// concurrently, or after a crash.
//
// Exactly one result. The result of request <id> is two blobs in its result
// container: the data blob <id>/data (the backend's body, or the error
// document) and the header blob <id>/headers.json. The commit protocol:
//
//  1. Claim: a conditional write (Put with the version read) sets the
//     record's lease to a fresh owner token. Of two racing workers exactly
//     one wins; the other re-reads, finds the winner's live lease, leaves a
//     message delayed to the lease's end and acknowledges its delivery. (It
//     does not merely acknowledge: its delivery may be the holder's own
//     message, redelivered, and completing it would leave none.)
//  2. The holder checks that no header blob exists (an earlier holder may have
//     committed and died before updating the record), runs the attempts,
//     re-reads the record to check that its token still holds the claim, and
//     streams the data blob, replacing any left by a holder that died before
//     committing. A renewer extends the lease while the holder works, within
//     the invocation's deadline; a lost lease cancels the work, and an
//     interrupted blob write leaves nothing (blobs appear whole or not at
//     all).
//  3. It checks its claim again, then creates the header blob with
//     create=true. This is the commit point: at most one header blob can
//     ever exist, so at most one result. A holder whose create fails with
//     ErrConflict writes nothing more.
//  4. It marks the record succeeded, failed or expired (conditional write,
//     whoever holds the lease: the header blob decides), releasing the
//     claim, and sends the final notification.
//
// At least one result follows because a record that is not done always has
// a message on its way or a holder whose message comes back if it dies:
// Submit enqueues before answering; a worker does not acknowledge its
// delivery until it has committed, checkpointed and enqueued a successor, or
// left a delayed message for a live lease; the submitting process of an
// inflight claim has a message delayed to its lease's end.
//
// A crash between any two steps: before 1, or between 1 and 3, the lease
// lapses (it is bounded by the invocation's deadline and renewed only while
// its holder lives) and the redelivered message's worker takes over and
// sends the request again with the same Idempotency-Key, replacing any data
// blob the dead holder left. Between 3 and 4, the next worker finds the
// header blob after claiming and only marks the record done from it. After 4,
// every delivery finds the record done and is acknowledged.
//
// Residual limit: blob stores offer no fencing of blob writes by lease. A
// holder frozen for longer than its lease (its renewer frozen with it) in the
// middle of its data write could land that body after a successor's. The
// header blob stays unique; both bodies answer the same request, sent with
// the same Idempotency-Key.
//
// Submissions that fail. A failure before the record is written leaves at
// most an orphan body blob, which no record names. A failed enqueue leaves
// a record without a message: Submit marks it abandoned (a conditional
// write), so that a message the queue accepted after all finds it abandoned
// and is acknowledged; Status reports it as not found, since its id was
// never given out. Should a worker already have claimed it, the message did
// go out and the hand-off is durable: Submit answers Accepted after all. Only
// if the store also refuses the abandon write can a message the queue
// reported as failed, but delivered, run the request: the client got 503 and
// no id, as with any 5xx after a request was forwarded. The idempotency index
// is written last, so an entry always names a record whose message went out;
// a lookup that finds its record missing or abandoned takes the entry over.
// Two submissions racing with one new key both write records and messages;
// the one that loses the index abandons its record and answers with the
// winner's Accepted (should a worker have claimed the loser's record
// already, the backend sees the request twice, with the same key).

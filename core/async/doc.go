// Package async is the gateway's async continuation engine (docs/async-api.md),
// over the deadline engine of package core: a request that outlasts its
// invocation is made durable, answered 202 Accepted, and continued in later
// invocations until it has one result. It depends on core (Request, Router,
// Forwarder, Profile, Error, Stats, Observer); core never imports it.
//
// The layout, arrows pointing down (each part uses only those below it):
//
//   - Async is the façade the hosts call, and holds the settings, the
//     ports and the state shared between calls (the notifier's queue, the
//     cancel listeners). Run answers or hands off (run.go), Submit makes a
//     hand-off durable and Status reads a request (async.go), Process
//     continues a queue message and Finish settles an in-process claim
//     (process.go), OpenResult and ResultURL read a result (status.go,
//     resulturl.go), Cancel asks a request to stop (cancel.go),
//     MessageProfile tells a worker whose turn a message is (fair.go) and
//     FlushNotifications drains the sender at shutdown. Each call builds
//     an engine and hands the work to the types below; beside these
//     methods Async has only engine, triggerTimeout and finishInProcess
//     (which waits for an in-process attempt and calls Finish).
//   - handoff (handoff.go) makes a request durable, in the order of the
//     commit protocol (protocol.go): body, record, message, idempotency
//     entry; it abandons the record of a submission that failed.
//   - worker (process.go) claims a request (step 1 of the protocol),
//     rebuilds it from its record and hands it to a continuation.
//   - continuation (commit.go) is one request's processing while its claim
//     is held: it owns the rest of the protocol (check the claim, data
//     blob, header blob, record, final notification) and the hand-on,
//     requeue and lost-lease decisions; commitCancel (cancel.go) writes a
//     cancellation by the same steps.
//   - engine (engine.go) is what handoff, worker and continuation share
//     (each embeds it): the ports and settings, defaults applied, the
//     hooks, and the parts below, as one plain value.
//   - sender and notifier (notify.go) send lifecycle notifications: in the
//     background, one sender, in order, at most 1,024 waiting; one more is
//     dropped, counted and reported, never sent out of turn.
//   - idempotency (scope.go) is the index of clients' Idempotency-Keys,
//     scoped to their caller: key, lookup, index and replay.
//   - records (records.go) reads and writes the records with optimistic
//     concurrency (load, update) and keeps a claim's lease (keepLease, the
//     heartbeat).
//   - cancelListeners (cancel.go) tells the continuations running on this
//     instance that their client cancelled.
//   - The record and its state machine (record.go, state.go) are plain
//     values and transitions, tested as tables without any I/O.
//   - The ports (ports.go: Store, Queue, Notifier, VisibilityExtender) are
//     what the engine calls; infra/ implements them (ReadObject and
//     OpenObject serve stores that stream objects), and porttest states
//     their semantics once as a conformance suite every implementation
//     runs. Continuations (continuations.go) bounds the work one instance
//     keeps going, on every host.
//   - Redriver (deadletters.go), beside the façade, is the dead-letter
//     command's: it reads the records through the Store and sends back
//     what its DeadLetters port holds, by one rule (Decide: finished is
//     acknowledged, expired is reported, the rest is sent).
//
// Nothing outside this package needs its internals: hosts use the façade,
// the ports and the exported values (State, StatusView, Accepted, Claim,
// WithCaller); the dead-letter command uses Redriver.
package async

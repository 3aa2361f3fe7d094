// Package async is the gateway's async continuation engine (CONTRACT §6),
// over the deadline engine of package core: a request that outlasts its
// invocation is made durable, answered 202 Accepted, and continued in later
// invocations until it has one result. It depends on core (Request, Router,
// Forwarder, Profile, Error, Stats, Observer); core never imports it.
//
// The layout, arrows pointing one way (each file uses only those below it):
//
//   - Async (async.go, run.go, process.go, status.go, cancel.go) is the
//     façade the hosts call: Run answers or hands off, Process continues a
//     queue message, Finish settles an in-process claim, Status and
//     OpenResult read a request, Cancel asks it to stop. It owns no state
//     of its own beyond its settings; the work is done by the small types
//     below it.
//   - notifier (notify.go) sends lifecycle notifications: in order per
//     request, bounded, reporting what it drops.
//   - The idempotency index (scope.go), leases (process.go's keepLease,
//     state.go's claim and renew) and the cancel listeners (cancel.go) each
//     own one concern.
//   - The record and its state machine (record.go, state.go) are plain
//     values and transitions, tested as tables without any I/O; protocol.go
//     describes the commit protocol wrapped around them.
//   - The ports (ports.go: Store, Queue, Notifier, VisibilityExtender) are
//     what the engine calls; infra/ implements them, and porttest states
//     their semantics once as a conformance suite every implementation
//     runs. Continuations (continuations.go) bounds the work one instance
//     keeps going.
//
// Nothing outside this package needs its internals: hosts use the façade,
// the ports and the exported values (State, StatusView, Accepted, Claim).
package async

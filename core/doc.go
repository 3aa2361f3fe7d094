// Package core is the platform-neutral heart of the gateway, its deadline
// engine: routes (Route, Router) and their wire form, the deadline arithmetic (TTL, per-attempt Timeout, the
// host's execution limit less a margin), the retry policy and the attempt
// loop that forwards a request to a route's hosts, and the Observer port it
// reports to. The async engine, which hands a request on and continues it in
// later invocations, lives in core/async: it depends on core, never the
// other way round.
//
// Rules of use:
//   - core imports nothing from adapters/, infra/ or any cloud SDK. Hosts
//     (adapters/) turn a platform's request and time budget into a Request
//     and a context deadline; infra/ implements the ports (core/async's
//     Store, Queue and Notifier).
//   - Core reads time budgets only from ctx.Deadline(), its routes and the
//     options it is built with; it never reads the environment or the
//     settings (internal/settings builds routes and options from them).
//   - Core returns errors (sentinels such as ErrFunctionLimit, or *Error with a
//     Reason); adapters map them to status codes and log them.
//
// Values documented as read-only after construction (Router,
// Forwarder) may be shared by goroutines.
package core

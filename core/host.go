package core

// HostCaps states what the host running the gateway can do. Each adapter
// (adapters/local, adapters/azurefunctions, adapters/lambda) sets it once at
// start-up; core and the shared HTTP face read it instead of asking which
// platform they run on, as net/http's optional interfaces (http.Flusher,
// http.Hijacker) let a handler discover what a connection supports.
//
// The zero value is the most restrictive host: no work after the answer, no
// connection upgrades. A HostCaps is a plain value,
// safe to copy and to read from many goroutines.
type HostCaps struct {
	// Name names the host in logs and errors: "local", "azurefunctions",
	// "lambda".
	Name string
	// WorkAfterAnswer reports whether the process may go on working after
	// it has answered a request. Local: yes. Azure Functions: yes, best
	// effort (the host neither knows of nor waits for that work, so the
	// queued continuation stays the guarantee). Lambda: no, the process is
	// frozen the moment the invocation returns.
	WorkAfterAnswer bool
	// Upgrade reports whether the host can hand a client connection over to
	// a tunnel after a 101 Switching Protocols (WebSocket). Hosts that
	// cannot refuse upgrade requests clearly.
	Upgrade bool
	// Response is the largest answer the host can send, and how it counts
	// one (ResponseLimit). The zero value sets no limit: local, and Azure
	// Functions, whose host documents none for HTTP responses.
	Response ResponseLimit
}

package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"fngateway/core"
)

// stamp sets what every answer says of how it was served (docs/settings.md#per-request-headers):
// x-Backend-Host, the label of the host that answered or, for a
// gateway-made answer, was tried last (none when no host was tried), and
// x-Gateway-Latency-Ms, the milliseconds from arrival to these headers.
// The log line gets both, and the host's URL.
func (lg *requestLog) stamp(hdr http.Header, attempts []core.Attempt, res *core.Result) {
	switch {
	case res != nil:
		lg.backend, lg.backendURL = res.Backend, res.BackendURL
	case len(attempts) > 0:
		last := attempts[len(attempts)-1]
		lg.backend, lg.backendURL = last.Label, last.Host
	}
	if lg.backend != "" {
		hdr["X-Backend-Host"] = []string{lg.backend}
	}
	lg.latencyMs = time.Since(lg.arrival).Milliseconds()
	hdr["X-Gateway-Latency-Ms"] = []string{strconv.FormatInt(lg.latencyMs, 10)}
}

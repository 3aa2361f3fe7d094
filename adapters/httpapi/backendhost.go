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
	lg.latencyMs = time.Since(lg.arrival).Milliseconds()
	vals := lg.vals
	if len(vals) < 3 || lg.stamped {
		// A second stamp (a refused answer after the relayed one's) must
		// not change values an earlier header map may still hold.
		vals = make([]string, 3)
	}
	lg.stamped = true
	if lg.backend != "" {
		vals[1] = lg.backend
		hdr["X-Backend-Host"] = vals[1:2:2]
	}
	vals[2] = strconv.FormatInt(lg.latencyMs, 10)
	hdr["X-Gateway-Latency-Ms"] = vals[2:3:3]
}

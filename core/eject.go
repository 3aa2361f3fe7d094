package core

import (
	"net/url"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// The route defaults of outlier ejection (docs/settings.md#ejecting-a-dead-host).
const (
	// defaultEjectAfterFailures is the count of consecutive connection
	// failures or timeouts that ejects a host.
	defaultEjectAfterFailures = 5
	// defaultEjectFor is the length of a first ejection; each repeat
	// doubles it, up to maxEjectFactor times.
	defaultEjectFor = 30 * time.Second
	maxEjectFactor  = 10
)

// Ejector is outlier detection per route, as Envoy's consecutive gateway
// failures with base_ejection_time: a host whose attempts fail at
// connection level or by their Timeout Route.EjectAfterFailures times in a
// row is ejected for Route.EjectFor, doubled on each repeat ejection (one
// with no success since the last) up to ten times. An ejected host is
// tried after the others rather than skipped, so a route whose hosts are
// all ejected still tries them all; any answer from a host resets its
// count, and an answer below 500 (other than 429) restores it at once.
//
// State is per instance: each Lambda execution environment, each Azure
// instance and each local process learns on its own. The zero value is
// ready; a nil *Ejector ejects nothing. Methods are safe for concurrent use.
type Ejector struct {
	mu      sync.Mutex
	hosts   map[ejectKey]*hostHealth
	n       atomic.Int64 // hosts ejected at the last look: none means no lock to order
	tracked atomic.Int64 // len(hosts): none means no lock to note a success
}

type ejectKey struct{ route, host string }

type hostHealth struct {
	failures   int       // consecutive, since the last answer or ejection
	until      time.Time // ejected before this instant
	ejections  int       // consecutive ejections without a success
	ejectedFor time.Duration
}

// ejectedHost names a host ejected from a route, for /_gateway/stats.
type ejectedHost struct {
	Route string    `json:"route"`
	Host  string    `json:"host"`
	Until time.Time `json:"until"`
}

// order returns hosts, the route's hosts in its balancing order
// (Balancer.order), in the order to try them at now: the hosts in service
// in that order, then the ejected ones, soonest back first. It returns
// hosts itself when none is ejected.
func (e *Ejector) order(route *Route, hosts HostList, now time.Time) HostList {
	if e == nil || route.EjectAfterFailures < 0 || e.n.Load() == 0 {
		return hosts
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var in, out HostList
	for i, h := range hosts {
		hh := e.hosts[ejectKey{route.Prefix, h.Host}]
		if hh == nil || !now.Before(hh.until) {
			if out != nil {
				in = append(in, h)
			}
			continue
		}
		if out == nil {
			in = append(make(HostList, 0, len(hosts)), hosts[:i]...)
		}
		out = append(out, h)
	}
	if out == nil {
		e.recount(now) // the ejections have ended
		return hosts
	}
	sort.SliceStable(out, func(i, j int) bool {
		return e.hosts[ejectKey{route.Prefix, out[i].Host}].until.Before(e.hosts[ejectKey{route.Prefix, out[j].Host}].until)
	})
	return append(in, out...)
}

// recordHost tells the Ejector how ar, an attempt at host, ended. An
// attempt cut by a deadline the client shortened below the route's own
// (S7PTimeout, S7PTTL) is not recorded: a client cannot eject a healthy
// host for every other client by asking for less time than it needs.
func (f *Forwarder) recordHost(route *Route, host *url.URL, ar *attemptResult) {
	if ar.clientGone || ar.authErr != nil || ar.chosen() {
		return // not the host's doing
	}
	f.observeAttempt(route, host, ar)
	if f.Ejector == nil {
		return
	}
	if !f.Ejector.record(route, host, &ar.record, time.Now()) {
		return
	}
	ar.record.Ejected = true
	if f.Stats != nil {
		f.Stats.Ejections.Add(1)
	}
}

// record notes how an attempt at host on route ended at now, and reports
// whether that ejected the host.
func (e *Ejector) record(route *Route, host *url.URL, rec *Attempt, now time.Time) bool {
	if e == nil || route.EjectAfterFailures < 0 {
		return false
	}
	failed := rec.Outcome == OutcomeConnectError || rec.Outcome == OutcomeTimeout && rec.Cause == CauseTimeout
	answered := rec.Outcome == OutcomeStatus
	if !failed && (!answered || e.tracked.Load() == 0) {
		return false // cut by a deadline, not the host's doing; or no host to restore
	}
	k := ejectKey{route.Prefix, host.Host}
	e.mu.Lock()
	defer e.mu.Unlock()
	hh := e.hosts[k]
	if hh == nil {
		if !failed {
			return false // the usual case: a healthy host answers
		}
		if e.hosts == nil {
			e.hosts = map[ejectKey]*hostHealth{}
		}
		hh = &hostHealth{}
		e.hosts[k] = hh
		e.tracked.Store(int64(len(e.hosts)))
	}
	ejected := now.Before(hh.until)
	if answered {
		hh.failures = 0
		if rec.Status < 500 && rec.Status != 429 {
			if ejected {
				hh.until = time.Time{}
			}
			delete(e.hosts, k)
			e.tracked.Store(int64(len(e.hosts)))
		}
		e.recount(now)
		return false
	}
	if ejected {
		return false // tried as a last resort and failed again: already out
	}
	hh.failures++
	if hh.failures < route.EjectAfterFailures {
		return false
	}
	base := route.EjectFor
	if base <= 0 {
		base = defaultEjectFor
	}
	d := base << min(hh.ejections, 4)
	d = min(d, maxEjectFactor*base)
	hh.ejections++
	hh.failures = 0
	hh.ejectedFor = d
	hh.until = now.Add(d)
	e.recount(now)
	return true
}

// recount refreshes the fast path's count; e.mu is held.
func (e *Ejector) recount(now time.Time) {
	n := 0
	for _, hh := range e.hosts {
		if now.Before(hh.until) {
			n++
		}
	}
	e.n.Store(int64(n))
}

// Ejected returns the hosts ejected at now, by route and host.
func (e *Ejector) Ejected(now time.Time) []ejectedHost {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.recount(now)
	out := []ejectedHost{}
	for k, hh := range e.hosts {
		if now.Before(hh.until) {
			out = append(out, ejectedHost{Route: k.route, Host: k.host, Until: hh.until})
		}
	}
	slices.SortFunc(out, func(a, b ejectedHost) int {
		if a.Route != b.Route {
			if a.Route < b.Route {
				return -1
			}
			return 1
		}
		if a.Host < b.Host {
			return -1
		}
		if a.Host > b.Host {
			return 1
		}
		return 0
	})
	return out
}

package core

import (
	"errors"
	"math"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// This file is host selection (docs/settings.md#balancing-between-hosts: LoadBalanceMode, route key
// loadBalance): the order in which one request tries its route's hosts,
// as SimpleL7Proxy's LoadBalanceMode orders them (docs/settings.md) and as
// Caddy's selectionpolicies.go picks an upstream. The order is a value's
// method (LoadBalance.order); the per-instance state it reads — each
// route's round-robin counter and each host's latency average — lives in a
// Balancer, like the Ejector's health.

// LoadBalance is a balancing mode. The zero value is BalancePriority.
type LoadBalance uint8

// The balancing modes.
const (
	// BalancePriority tries the hosts in their configured order: failover.
	BalancePriority LoadBalance = iota
	// BalanceLatency tries the host with the lowest recent latency (an
	// exponentially weighted average per host) first; a host not yet
	// measured comes before every measured one, and one request in
	// sixteen takes the hosts in turn, so each host's average stays
	// current.
	BalanceLatency
	// BalanceRoundRobin starts each request at the next host in turn.
	BalanceRoundRobin
	// BalanceRandom tries the hosts in a random order.
	BalanceRandom
)

var balanceNames = [...]string{"priority", "latency", "roundrobin", "random"}

func (m LoadBalance) String() string {
	if int(m) < len(balanceNames) {
		return balanceNames[m]
	}
	return "LoadBalance(" + strconv.Itoa(int(m)) + ")"
}

// errLoadBalance is the error of a mode that is none of the four.
var errLoadBalance = errors.New("want priority, latency, roundrobin or random")

// Decode parses s, for envconfig.
func (m *LoadBalance) Decode(s string) error {
	i := slices.Index(balanceNames[:], strings.ToLower(strings.TrimSpace(s)))
	if i < 0 {
		return errLoadBalance
	}
	*m = LoadBalance(i)
	return nil
}

// latencyProbeEvery is how often a BalanceLatency route's request takes
// the hosts in turn instead, so each host's average stays current: one in
// sixteen.
const latencyProbeEvery = 16

// ewmaWeight is the weight of a new latency sample in a host's average:
// about the last ten answers count.
const ewmaWeight = 0.2

// Balancer holds the per-instance state the balancing modes read: a
// round-robin counter per route and a latency average per route and host.
// Each Lambda execution environment, Azure instance and local process
// learns on its own, as the Ejector does. The zero value is ready; a nil
// *Balancer orders every route by priority. Methods are safe for
// concurrent use.
type Balancer struct {
	mu  sync.RWMutex
	rr  map[string]*atomic.Uint64
	lat map[ejectKey]*atomic.Uint64 // math.Float64bits of the average, in ms; 0: not measured
}

// order returns the hosts of route in the order its mode tries them. It
// returns route.Hosts itself for BalancePriority (and for a single host),
// a new slice otherwise.
func (b *Balancer) order(route *Route) HostList {
	hosts := route.Hosts
	if b == nil || route.LoadBalance == BalancePriority || len(hosts) < 2 {
		return hosts
	}
	out := make(HostList, len(hosts))
	mode := route.LoadBalance
	var turn uint64
	if mode != BalanceRandom {
		turn = b.counter(route.Prefix).Add(1) - 1
	}
	if mode == BalanceLatency && turn%latencyProbeEvery == latencyProbeEvery-1 {
		// A probe: without it a host measured slow once would never be
		// measured again, however fast it has become.
		mode, turn = BalanceRoundRobin, turn/latencyProbeEvery
	}
	switch mode {
	case BalanceRoundRobin:
		start := int(turn % uint64(len(hosts)))
		n := copy(out, hosts[start:])
		copy(out[n:], hosts[:start])
	case BalanceRandom:
		copy(out, hosts)
		rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	case BalanceLatency:
		copy(out, hosts)
		var avg [8]float64
		lat := avg[:0]
		b.mu.RLock()
		for _, h := range hosts {
			var ms float64
			if v := b.lat[ejectKey{route.Prefix, h.Host}]; v != nil {
				ms = math.Float64frombits(v.Load())
			}
			lat = append(lat, ms)
		}
		b.mu.RUnlock()
		// Insertion sort, stable: a route has a handful of hosts.
		for i := 1; i < len(out); i++ {
			for j := i; j > 0 && lat[j] < lat[j-1]; j-- {
				lat[j], lat[j-1] = lat[j-1], lat[j]
				out[j], out[j-1] = out[j-1], out[j]
			}
		}
	default:
		return hosts
	}
	return out
}

func (b *Balancer) counter(route string) *atomic.Uint64 {
	b.mu.RLock()
	c := b.rr[route]
	b.mu.RUnlock()
	if c != nil {
		return c
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if c = b.rr[route]; c == nil {
		if b.rr == nil {
			b.rr = map[string]*atomic.Uint64{}
		}
		c = new(atomic.Uint64)
		b.rr[route] = c
	}
	return c
}

// observe adds the latency d of an attempt at host on route to the host's
// average. Only routes in BalanceLatency keep one.
func (b *Balancer) observe(route *Route, host *url.URL, d time.Duration) {
	if b == nil || route.LoadBalance != BalanceLatency {
		return
	}
	ms := max(float64(d)/float64(time.Millisecond), 0.001) // 0 means "not measured"
	k := ejectKey{route.Prefix, host.Host}
	b.mu.RLock()
	v := b.lat[k]
	b.mu.RUnlock()
	if v == nil {
		b.mu.Lock()
		if v = b.lat[k]; v == nil {
			if b.lat == nil {
				b.lat = map[ejectKey]*atomic.Uint64{}
			}
			v = new(atomic.Uint64)
			b.lat[k] = v
		}
		b.mu.Unlock()
	}
	for {
		old := v.Load()
		avg := ms
		if old != 0 {
			avg = ewmaWeight*ms + (1-ewmaWeight)*math.Float64frombits(old)
		}
		if v.CompareAndSwap(old, math.Float64bits(avg)) {
			return
		}
	}
}

// observeAttempt feeds the latency balancer how an attempt at host ended:
// an answer's time to its headers; a timeout or a connection failure
// counts as the whole window the attempt had, so a failing host moves
// back. recordHost calls it only for attempts that say something of the
// host (not a lost hedge, a client gone, a deadline the client chose).
func (f *Forwarder) observeAttempt(route *Route, host *url.URL, ar *attemptResult) {
	if f.Balancer == nil || route.LoadBalance != BalanceLatency {
		return
	}
	d := ar.elapsed
	switch ar.record.Outcome {
	case OutcomeStatus:
	case OutcomeTimeout, OutcomeConnectError:
		d = max(d, ar.window)
	default:
		return
	}
	f.Balancer.observe(route, host, d)
}

// HostLabel returns the label of host on route, for x-Backend-Host: the
// label the operator gave it (Hosts=primary=http://a), or else its
// position in the route's list ("0", "1", …). Never its URL.
func (r *Route) HostLabel(host *url.URL) string {
	if host.Fragment != "" {
		return host.Fragment
	}
	for i, h := range r.Hosts {
		if h == host {
			return positionLabel(i)
		}
	}
	return "?"
}

var positionLabels = [...]string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}

func positionLabel(i int) string {
	if i < len(positionLabels) {
		return positionLabels[i]
	}
	return strconv.Itoa(i)
}

// validLabel reports whether s may label a host: 1 to 64 letters, digits,
// '.', '_' and '-' (a header value and a log field as it is).
func validLabel(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// baseURLOf returns host's base URL as configured, without its label.
func baseURLOf(host *url.URL) string {
	u := *host
	u.Fragment = ""
	return u.String()
}

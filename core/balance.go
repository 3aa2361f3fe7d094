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
// round-robin counter (and the orders made) per route and a latency average per route and host.
// Each Lambda execution environment, Azure instance and local process
// learns on its own, as the Ejector does. The zero value is ready; a nil
// *Balancer orders every route by priority. Methods are safe for
// concurrent use.
type Balancer struct {
	mu  sync.RWMutex
	rr  map[string]*routeBalance
	lat map[ejectKey]*atomic.Uint64 // math.Float64bits of the average, in ms; 0: not measured
}

// order returns the hosts of route in the order its mode tries them. It
// returns route.Hosts itself for BalancePriority (and for a single host),
// else a list shared by every request that gets the same order
// (routeBalance.list): callers only read it.
func (b *Balancer) order(route *Route) HostList {
	hosts := route.Hosts
	if b == nil || route.LoadBalance == BalancePriority || len(hosts) < 2 {
		return hosts
	}
	var idx [maxOrderHosts]uint8
	perm := idx[:]
	if len(hosts) > len(idx) {
		perm = make([]uint8, len(hosts))
	}
	perm = perm[:len(hosts)]
	for i := range perm {
		perm[i] = uint8(i)
	}
	rb := b.route(route.Prefix)
	mode := route.LoadBalance
	var turn uint64
	if mode != BalanceRandom {
		turn = rb.turn.Add(1) - 1
	}
	if mode == BalanceLatency && turn%latencyProbeEvery == latencyProbeEvery-1 {
		// A probe: without it a host measured slow once would never be
		// measured again, however fast it has become.
		mode, turn = BalanceRoundRobin, turn/latencyProbeEvery
	}
	switch mode {
	case BalanceRoundRobin:
		start := int(turn % uint64(len(hosts)))
		for i := range perm {
			perm[i] = uint8((start + i) % len(hosts))
		}
	case BalanceRandom:
		rand.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	case BalanceLatency:
		var avg [maxOrderHosts]float64
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
		for i := 1; i < len(perm); i++ {
			for j := i; j > 0 && lat[j] < lat[j-1]; j-- {
				lat[j], lat[j-1] = lat[j-1], lat[j]
				perm[j], perm[j-1] = perm[j-1], perm[j]
			}
		}
	default:
		return hosts
	}
	return rb.list(hosts, perm)
}

// maxOrderHosts is the most hosts a route may have for its orders to be
// kept (routeBalance.list): eight 8-bit positions in a uint64.
const maxOrderHosts = 8

// maxOrderLists bounds the orders kept per route: every rotation and
// every latency order of a few hosts, not every shuffle of eight.
const maxOrderLists = 32

// routeBalance is a route's balancing state: its turn counter and the
// orders of its hosts made so far.
type routeBalance struct {
	turn   atomic.Uint64
	orders atomic.Pointer[orderLists]
}

// orderLists are orders of one list of hosts, each kept so that the next
// request in the same order takes it without allocating. Never changed
// once published: a new order publishes a copy.
type orderLists struct {
	hosts HostList   // the route's list they order: a reload makes a new one
	keys  []uint64   // each order's positions, 8 bits each, first lowest
	lists []HostList // the orders, as keys
}

// list returns hosts in the order perm gives their positions.
func (rb *routeBalance) list(hosts HostList, perm []uint8) HostList {
	if len(perm) > maxOrderHosts {
		return pick(hosts, perm)
	}
	var key uint64
	for i, p := range perm {
		key |= uint64(p) << (8 * i)
	}
	ol := rb.orders.Load()
	if ol != nil && len(ol.hosts) == len(hosts) && &ol.hosts[0] == &hosts[0] {
		for i, k := range ol.keys {
			if k == key {
				return ol.lists[i]
			}
		}
	} else {
		ol = &orderLists{hosts: hosts}
	}
	out := pick(hosts, perm)
	if len(ol.keys) < maxOrderLists {
		next := &orderLists{hosts: hosts, keys: append(ol.keys[:len(ol.keys):len(ol.keys)], key),
			lists: append(ol.lists[:len(ol.lists):len(ol.lists)], out)}
		rb.orders.Store(next) // a concurrent store may win: its order comes again
	}
	return out
}

func pick(hosts HostList, perm []uint8) HostList {
	out := make(HostList, len(perm))
	for i, p := range perm {
		out[i] = hosts[p]
	}
	return out
}

func (b *Balancer) route(prefix string) *routeBalance {
	b.mu.RLock()
	rb := b.rr[prefix]
	b.mu.RUnlock()
	if rb != nil {
		return rb
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if rb = b.rr[prefix]; rb == nil {
		if b.rr == nil {
			b.rr = map[string]*routeBalance{}
		}
		rb = new(routeBalance)
		b.rr[prefix] = rb
	}
	return rb
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

// baseURLOf returns host's base URL as configured, without its label. A
// host's URL is never changed once parsed, so the string is made once per
// host and kept (every answer's Result names it).
func baseURLOf(host *url.URL) string {
	if v, ok := baseURLs.m.Load(host); ok {
		return v.(string)
	}
	u := *host
	u.Fragment = ""
	s := u.String()
	if baseURLs.n.Add(1) > maxBaseURLs {
		// Hosts replaced by reloads would otherwise stay here for good.
		baseURLs.m.Clear()
		baseURLs.n.Store(1)
	}
	baseURLs.m.Store(host, s)
	return s
}

// maxBaseURLs bounds baseURLs: far more hosts than any settings list.
const maxBaseURLs = 1024

// baseURLs caches baseURLOf: *url.URL to string, and about how many.
var baseURLs struct {
	m sync.Map
	n atomic.Int64
}

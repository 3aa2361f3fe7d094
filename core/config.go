package core

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"time"
)

// SettingError reports a setting that does not parse or cannot nest with the
// others. Its message is one line naming the setting, its value and what is
// expected.
type SettingError struct {
	Name  string
	Value string
	Want  string
}

func (e *SettingError) Error() string {
	v := e.Value
	if len(v) > 200 {
		v = v[:200] + "…"
	}
	return fmt.Sprintf("setting %s=%q: %s", e.Name, v, e.Want)
}

// MaxSeconds bounds every duration setting and header: ten years.
const MaxSeconds = 10 * 365 * 24 * 3600

// HostList is a comma-separated list of backend base URLs.
type HostList []*url.URL

// Decode parses s, for envconfig.
func (h *HostList) Decode(s string) error {
	var out HostList
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return errors.New("want one or more comma-separated base URLs, no element empty, such as http://10.0.0.5:8000,https://api.example.com")
		}
		u, err := parseLabeledHost(part)
		if err != nil {
			return err
		}
		out = append(out, u)
	}
	if len(out) == 0 {
		return errors.New("want one or more comma-separated base URLs, such as http://10.0.0.5:8000,https://api.example.com")
	}
	*h = out
	return nil
}

func parseHost(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("want base URLs of the form http(s)://host[:port][/path], got %q", s)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// parseLabeledHost parses one host, "[label=]base URL": a label of
// letters, digits, '.', '_' and '-' names the host in x-Backend-Host and
// the log (Route.HostLabel); it is kept in the URL's Fragment, which a base
// URL never has (parseHost refuses one).
func parseLabeledHost(s string) (*url.URL, error) {
	label, rest, ok := strings.Cut(s, "=")
	if !ok || strings.Contains(label, ":") || strings.Contains(label, "/") {
		return parseHost(s)
	}
	if !validLabel(label) {
		return nil, fmt.Errorf("host label %q: want 1 to 64 letters, digits, '.', '_' and '-', as in primary=http://10.0.0.5:8000", trimKey(label))
	}
	u, err := parseHost(strings.TrimSpace(rest))
	if err != nil {
		return nil, err
	}
	u.Fragment = label
	return u, nil
}

// String lists the hosts as written in the setting.
func (h HostList) String() string {
	s := make([]string, len(h))
	for i, u := range h {
		s[i] = baseURLOf(u)
		if u.Fragment != "" {
			s[i] = u.Fragment + "=" + s[i]
		}
	}
	return strings.Join(s, ",")
}

// CheckRetryStatus refuses a status that may not move on to the next host.
func CheckRetryStatus(n int) error {
	if n < 400 || n > 599 {
		return fmt.Errorf("status %d: want statuses from 400 to 599; a 2xx answer, or any other that is not a failure, always goes to the client", n)
	}
	return nil
}

// Route overrides the default route for requests whose path falls under
// Prefix, segment by segment ("/a" takes "/a" and "/a/…", not "/ab").
// Zero fields inherit the gateway-level setting.
type Route struct {
	Prefix           string
	Hosts            HostList
	TTL              time.Duration
	Timeout          time.Duration
	MaxAttempts      int
	Stream           bool
	FirstByteTimeout time.Duration
	IdleTimeout      time.Duration
	// LoadBalance orders the hosts a request tries; it holds
	// LoadBalanceMode unless the route's loadBalance set it
	// (LoadBalanceSet). RetryOn are the statuses that move on to the next
	// host; nil means RetryOnStatusCodes. StripPrefix removes Prefix from
	// the path before the host's base path is put in front of it
	// (StrippedPath).
	LoadBalance    LoadBalance
	LoadBalanceSet bool
	RetryOn        []int
	StripPrefix    bool
	// Async, when set, overrides whether the route may go async at all.
	Async *bool
	// HedgeOnPerTryTimeout starts the next attempt beside one whose
	// Timeout fired instead of cancelling it (see hedge.go).
	HedgeOnPerTryTimeout bool
	// EjectAfterFailures is the count of consecutive connection failures
	// or timeouts that ejects a host (see Ejector); zero means the
	// default, defaultEjectAfterFailures, and a negative value never
	// ejects. EjectFor is the first ejection's length; zero means
	// defaultEjectFor.
	EjectAfterFailures int
	EjectFor           time.Duration
	// Auth, if set, is the backend credential every attempt carries
	// (see BackendAuth and Forwarder.Authorizers).
	Auth *BackendAuth
	// Methods, if set, are the only methods the route allows; nil means
	// GET and HEAD on a route with Auth, every method otherwise (see
	// Admit).
	Methods []string
	// AllowHeaders and AllowQuery name the client headers of a control
	// namespace (x-amz-*, x-ms-*; "x-amz-meta-*" for a prefix) and the
	// query parameters ("name" or "name=value") a route with Auth lets
	// through beyond its service's rule (see Admit).
	AllowHeaders []string
	AllowQuery   []string
}

// routeJSON is the wire form of a Route in the Routes setting.
type routeJSON struct {
	Prefix             string   `json:"prefix"`
	Hosts              []string `json:"hosts"`
	TTLSecs            *float64 `json:"ttlSecs"`
	TimeoutMs          *int64   `json:"timeoutMs"`
	MaxAttempts        *int64   `json:"maxAttempts"`
	Stream             bool     `json:"stream"`
	FirstByteTimeoutMs *int64   `json:"firstByteTimeoutMs"`
	IdleTimeoutMs      *int64   `json:"idleTimeoutMs"`
	Async              *bool    `json:"async"`
	// Upstream policy: hedging, ejection and the backend credential.
	HedgeOnPerTryTimeout bool         `json:"hedgeOnPerTryTimeout"`
	EjectAfterFailures   *int64       `json:"ejectAfterFailures"`
	EjectForMs           *int64       `json:"ejectForMs"`
	Auth                 *BackendAuth `json:"auth"`
	// The capability: what a client may ask of the route (capability.go).
	Methods      []string `json:"methods"`
	AllowHeaders []string `json:"allowHeaders"`
	AllowQuery   []string `json:"allowQuery"`
	// Host selection, retried statuses and the path (balance.go).
	LoadBalance *string `json:"loadBalance"`
	RetryOn     []int   `json:"retryOn"`
	StripPrefix bool    `json:"stripPrefix"`
}

// ParseRoutes parses the Routes setting: a JSON array of route objects.
// Unknown keys, duplicate prefixes and non-positive durations are errors.
func ParseRoutes(data []byte) ([]Route, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var raw []routeJSON
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("want a JSON array of routes ({\"prefix\":\"/api\",\"hosts\":[…],\"ttlSecs\":…}): %v", err)
	}
	if dec.More() {
		return nil, errors.New("want one JSON array of routes, found more after it")
	}
	seen := map[string]bool{}
	out := make([]Route, 0, len(raw))
	for i, rj := range raw {
		r := Route{Prefix: rj.Prefix, Stream: rj.Stream, Async: rj.Async}
		where := fmt.Sprintf("route %d (prefix %q)", i, rj.Prefix)
		if !strings.HasPrefix(rj.Prefix, "/") {
			return nil, fmt.Errorf("%s: want a prefix starting with /", where)
		}
		if err := checkPrefix(rj.Prefix); err != nil {
			return nil, fmt.Errorf("%s: %v", where, err)
		}
		if seen[rj.Prefix] {
			return nil, fmt.Errorf("%s: prefix appears twice; want unique prefixes", where)
		}
		seen[rj.Prefix] = true
		for _, h := range rj.Hosts {
			u, err := parseLabeledHost(h)
			if err != nil {
				return nil, fmt.Errorf("%s: hosts: %v", where, err)
			}
			r.Hosts = append(r.Hosts, u)
		}
		if rj.Hosts != nil && len(r.Hosts) == 0 {
			return nil, fmt.Errorf("%s: hosts: want at least one base URL, or leave hosts out to use Hosts", where)
		}
		if rj.TTLSecs != nil {
			v := *rj.TTLSecs
			if v > MaxSeconds {
				return nil, fmt.Errorf("%s: ttlSecs: want at most ten years (%d s), the longest TTL the gateway accepts", where, MaxSeconds)
			}
			if !(v > 0) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("%s: ttlSecs: want a positive number of seconds", where)
			}
			r.TTL = time.Duration(v * float64(time.Second))
			if r.TTL <= 0 {
				// Zero would mean "inherit DefaultTTLSecs".
				return nil, fmt.Errorf("%s: ttlSecs %v rounds to zero; want at least 0.000000001 (1 ns)", where, v)
			}
		}
		ms := func(name string, p *int64) (time.Duration, error) {
			if p == nil {
				return 0, nil
			}
			if *p > MaxSeconds*1000 {
				return 0, fmt.Errorf("%s: %s: want at most ten years (%d ms), the longest duration the gateway accepts", where, name, int64(MaxSeconds)*1000)
			}
			if *p <= 0 {
				return 0, fmt.Errorf("%s: %s: want a positive whole number of milliseconds", where, name)
			}
			return time.Duration(*p) * time.Millisecond, nil
		}
		var err error
		if r.Timeout, err = ms("timeoutMs", rj.TimeoutMs); err != nil {
			return nil, err
		}
		if r.FirstByteTimeout, err = ms("firstByteTimeoutMs", rj.FirstByteTimeoutMs); err != nil {
			return nil, err
		}
		if r.IdleTimeout, err = ms("idleTimeoutMs", rj.IdleTimeoutMs); err != nil {
			return nil, err
		}
		if rj.MaxAttempts != nil {
			if *rj.MaxAttempts <= 0 || *rj.MaxAttempts > MaxAttemptsLimit {
				return nil, fmt.Errorf("%s: maxAttempts: want a whole number from 1 to %d", where, MaxAttemptsLimit)
			}
			r.MaxAttempts = int(*rj.MaxAttempts)
		}
		if rj.LoadBalance != nil {
			if err := r.LoadBalance.Decode(*rj.LoadBalance); err != nil {
				return nil, fmt.Errorf("%s: loadBalance %q: %v", where, trimKey(*rj.LoadBalance), err)
			}
			r.LoadBalanceSet = true
		}
		if rj.RetryOn != nil {
			if len(rj.RetryOn) == 0 {
				return nil, fmt.Errorf("%s: retryOn: want at least one status, or leave retryOn out to use RetryOnStatusCodes", where)
			}
			for _, n := range rj.RetryOn {
				if err := CheckRetryStatus(n); err != nil {
					return nil, fmt.Errorf("%s: retryOn: %v", where, err)
				}
			}
			r.RetryOn = slices.Clone(rj.RetryOn)
		}
		r.StripPrefix = rj.StripPrefix
		if err := r.parsePolicy(&rj); err != nil {
			return nil, fmt.Errorf("%s: %v", where, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// AsyncConfig is a user profile's async-config.
type AsyncConfig struct {
	Enabled       bool   `json:"enabled"`
	ContainerName string `json:"containername"`
	Topic         string `json:"topic"`
}

// Profile is one entry of UserProfiles. Any key other than userId and
// async-config (and, inside it, enabled, containername and topic) is
// refused, naming it: a misspelt key must not pass for an absent one.
type Profile struct {
	UserID string      `json:"userId"`
	Async  AsyncConfig `json:"async-config"`
}

// ParseProfiles parses a JSON array of user profiles keyed by userId.
func ParseProfiles(data []byte) (map[string]Profile, error) {
	var raw []Profile
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("want a JSON array of profiles ({\"userId\":…,\"async-config\":{…}}): %v", err)
	}
	if err := unknownProfileKeys(data); err != nil {
		return nil, err
	}
	out := map[string]Profile{}
	for i, p := range raw {
		if p.UserID == "" {
			return nil, fmt.Errorf("profile %d: want a non-empty userId", i)
		}
		if _, dup := out[p.UserID]; dup {
			return nil, fmt.Errorf("profile %d: userId %q appears twice", i, p.UserID)
		}
		if c := p.Async.ContainerName; c != "" && !ValidContainer(c) {
			return nil, fmt.Errorf("profile %q: async-config.containername %q: want 3-63 lowercase letters, digits and single hyphens", p.UserID, c)
		}
		if why := ReservedContainer(p.Async.ContainerName); why != "" {
			return nil, fmt.Errorf("profile %q: async-config.containername %q is reserved (%s): want a container of the profile's own", p.UserID, p.Async.ContainerName, why)
		}
		out[p.UserID] = p
	}
	return out, nil
}

// unknownProfileKeys returns an error naming the first key of a profile
// (data, a JSON array of objects that decodes as []Profile) that the
// gateway does not read, or nil.
func unknownProfileKeys(data []byte) error {
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("want a JSON array of profiles ({\"userId\":…,\"async-config\":{…}}): %v", err)
	}
	for i, keys := range raw {
		where := fmt.Sprintf("profile %d", i)
		var id string
		if json.Unmarshal(keys["userId"], &id) == nil && id != "" {
			where = fmt.Sprintf("profile %q", trimKey(id))
		}
		if k := firstUnknown(keys, "userId", "async-config"); k != "" {
			return fmt.Errorf("%s: unknown key %q; want userId and async-config", where, trimKey(k))
		}
		var ac map[string]json.RawMessage
		if v, ok := keys["async-config"]; ok && json.Unmarshal(v, &ac) == nil {
			if k := firstUnknown(ac, "enabled", "containername", "topic"); k != "" {
				return fmt.Errorf("%s: unknown key async-config.%q; want enabled, containername and topic", where, trimKey(k))
			}
		}
	}
	return nil
}

// firstUnknown returns the first key of m, in sorted order, that is not
// one of known (matched exactly: encoding/json would match userid too, so
// that spelling counts as unknown), or "".
func firstUnknown(m map[string]json.RawMessage, known ...string) string {
	var bad []string
	for k := range m {
		if !slices.Contains(known, k) {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return ""
	}
	slices.Sort(bad)
	return bad[0]
}

// trimKey bounds a key or id quoted in an error.
func trimKey(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// StateContainer is the container of the async engine's state: records,
// request bodies and the idempotency index (core/async's key prefixes).
const StateContainer = "gateway"

// ReservedContainer says why no profile's results may go to container c,
// or returns "" when they may: the gateway's state container
// (StateContainer), the Azure module's deployment package container
// (app-package), and the Azure Functions host's own containers
// (azure-webjobs-hosts, azure-webjobs-secrets: every azure-webjobs-
// name) in the storage account the gateway shares with it.
func ReservedContainer(c string) string {
	switch {
	case c == StateContainer:
		return "the gateway's state: records, request bodies, the idempotency index"
	case c == "app-package":
		return "the Azure module's deployment package"
	case strings.HasPrefix(c, "azure-webjobs-"):
		return "the Azure Functions host's own"
	}
	return ""
}

// ValidContainer reports whether s is a valid container name: 3 to 63
// lowercase letters, digits and single hyphens, neither first nor last (an
// Azure container's rules, which S3 prefixes and directories also meet).
func ValidContainer(s string) bool {
	if len(s) < 3 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' || strings.Contains(s, "--") {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// DefaultMaxContinuations is MaxContinuations' default: the continuations
// one instance works on at once.
const DefaultMaxContinuations = 16

// Router resolves request paths to effective routes. Build it once with
// NewRouter; it is safe for concurrent use.
type Router struct {
	routes []*Route // effective, longest prefix first
	def    *Route
}

// NewRouter precomputes the effective routes: each of routes with its
// unset fields filled from def, the gateway-level route, which also serves
// the paths no prefix takes. def's Hosts, TTL, Timeout, MaxAttempts,
// LoadBalance and RetryOn are read; zero MaxAttempts means one attempt per
// host of the route.
func NewRouter(routes []Route, def Route) *Router {
	rt := &Router{def: effectiveRoute(routes, def, "\x00")}
	for _, r := range routes {
		rt.routes = append(rt.routes, effectiveRoute(routes, def, r.Prefix))
	}
	// Longest prefix first.
	for i := 1; i < len(rt.routes); i++ {
		for j := i; j > 0 && len(rt.routes[j].Prefix) > len(rt.routes[j-1].Prefix); j-- {
			rt.routes[j], rt.routes[j-1] = rt.routes[j-1], rt.routes[j]
		}
	}
	return rt
}

// effectiveRoute returns the effective route for path: the longest
// matching prefix of routes with unset fields filled from def, or the
// default route. It never returns nil.
func effectiveRoute(routes []Route, def Route, path string) *Route {
	var best *Route
	for i := range routes {
		r := &routes[i]
		if matchPrefix(path, r.Prefix) && (best == nil || len(r.Prefix) > len(best.Prefix)) {
			best = r
		}
	}
	eff := Route{Prefix: "/"}
	if best != nil {
		eff = *best
	}
	if len(eff.Hosts) == 0 {
		eff.Hosts = def.Hosts
	}
	if eff.TTL == 0 {
		eff.TTL = def.TTL
	}
	if eff.Timeout == 0 {
		eff.Timeout = def.Timeout
	}
	if eff.MaxAttempts == 0 {
		eff.MaxAttempts = def.MaxAttempts
	}
	if eff.MaxAttempts == 0 {
		eff.MaxAttempts = len(eff.Hosts)
	}
	if eff.FirstByteTimeout == 0 {
		eff.FirstByteTimeout = eff.IdleTimeout
	}
	if !eff.LoadBalanceSet {
		eff.LoadBalance = def.LoadBalance
	}
	if eff.RetryOn == nil {
		eff.RetryOn = def.RetryOn
	}
	if eff.EjectAfterFailures == 0 {
		eff.EjectAfterFailures = defaultEjectAfterFailures
	}
	if eff.EjectFor == 0 {
		eff.EjectFor = defaultEjectFor
	}
	return &eff
}

// Match returns the effective route for path. It never returns nil.
func (rt *Router) Match(path string) *Route {
	for _, r := range rt.routes {
		if matchPrefix(path, r.Prefix) {
			return r
		}
	}
	return rt.def
}

package azurefunctions

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"fngateway/core"
)

// The Functions host's own numbers, as its ScriptJobHostOptionsSetup sets
// them. (The host's HTTP client towards the handler waits functionTimeout
// plus a minute, so it never cuts an invocation first.)
const (
	// ConsumptionDefault is functionTimeout's default on the Consumption
	// plan (WEBSITE_SKU=Dynamic); ConsumptionMax its largest value there.
	ConsumptionDefault = 5 * time.Minute
	ConsumptionMax     = 10 * time.Minute
	// PlanDefault is functionTimeout's default on every other plan (Flex
	// Consumption, Premium, Dedicated), which also accept -1, unbounded.
	PlanDefault = 30 * time.Minute
	// HTTPLimit caps an HTTP-triggered invocation: the front end's load
	// balancer drops a request that has not answered within 230 s
	// ("Function app timeout duration": "230 seconds is the maximum amount
	// of time that an HTTP triggered function can take to respond to a
	// request ... because of the default idle timeout of Azure Load
	// Balancer"). Its clock starts when the front end takes the request,
	// before the handler sees it: see HTTPLead.
	HTTPLimit = 230 * time.Second
	// HTTPLead is how long the load balancer's clock may have run before the
	// handler sees a request, which nothing the handler is given tells (the
	// host forwards only X-Azure-Functions-InvocationId and -HostVersion; no
	// documented App Service header carries the front end's arrival time):
	// the front end's routing, a cold start (instance allocation, package
	// mount, host start) and the host's forwarding. It is cited, not
	// measured: Microsoft documents no bound on a cold start and advises
	// measuring the deployed app; the host's maintainers have looked into
	// cold starts of 29.4 s (azure-webjobs-sdk-script#838). The host itself
	// queues no HTTP request by default (host.json extensions.http
	// maxConcurrentRequests and maxOutstandingRequests unbounded), so a warm
	// request has waited far less.
	HTTPLead = 30 * time.Second
	// HandlerStartLimit is how long the host waits for a custom handler to
	// listen before it gives up on the process (HttpWorkerOptions'
	// InitializationTimeout in the host's source): a request the host held
	// during the handler's start reaches it within that much of its start.
	HandlerStartLimit = 30 * time.Second
)

// Setting names read from the environment.
const (
	envFunctionTimeout = "AzureFunctionsJobHost__functionTimeout"
	envAppRoot         = "FUNCTIONS_APP_ROOT_PATH"
	envSKU             = "WEBSITE_SKU"
)

// Limits are the execution limits of this host's invocations. The zero
// value means no limit.
type Limits struct {
	// Function is functionTimeout as the host applies it (zero when
	// unbounded).
	Function time.Duration
	// Invocation bounds a queue-triggered invocation: Function (or
	// FunctionTimeoutSecs, when shorter); zero when unbounded.
	Invocation time.Duration
	// HTTP bounds an HTTP-triggered invocation: Invocation, capped by
	// HTTPLimit. Never zero.
	HTTP time.Duration
	// Source says where Function came from, for the start-up log line.
	Source string
	// Warning, if set, should be logged once at start-up (the limit is a
	// plan default rather than a configured value).
	Warning string
}

// HTTPDeadline returns the deadline of an HTTP invocation that reached the
// handler at arrival, in a process started at started (zero: unknown): the
// earlier of the host's limit, arrival plus l.HTTP, and the load
// balancer's, HTTPLimit counted from HTTPLead before the request reached
// the handler. A request that arrives within HandlerStartLimit of the
// process's start may have waited through it (the host holds requests
// until the handler listens), so its load-balancer clock is counted from
// HTTPLead before the process started instead: the handler's own start-up
// is measured, not guessed. Zero l.HTTP means no deadline (the zero time).
func (l Limits) HTTPDeadline(arrival, started time.Time) time.Time {
	if l.HTTP <= 0 {
		return time.Time{}
	}
	start := arrival
	if !started.IsZero() && started.Before(arrival) && arrival.Before(started.Add(HandlerStartLimit)) {
		start = started
	}
	host := arrival.Add(l.HTTP)
	lb := start.Add(HTTPLimit - HTTPLead)
	if lb.Before(host) {
		return lb
	}
	return host
}

// LoadLimits works out the execution limits the way the Functions host
// does: AzureFunctionsJobHost__functionTimeout (it overrides host.json),
// else functionTimeout in host.json under FUNCTIONS_APP_ROOT_PATH, else the
// plan's default from WEBSITE_SKU. lookup reads the environment
// (os.LookupEnv). A value that does not parse, or that the plan does not
// allow, is a *core.SettingError naming it.
func LoadLimits(lookup func(string) (string, bool)) (Limits, error) {
	sku, _ := lookup(envSKU)
	dynamic := sku == "Dynamic"
	var (
		l      Limits
		raw    string
		name   string
		source string
		found  bool
	)
	if v, ok := lookup(envFunctionTimeout); ok {
		raw, name, source, found = v, envFunctionTimeout, "app setting "+envFunctionTimeout, true
	} else if root, ok := lookup(envAppRoot); ok && root != "" {
		path := filepath.Join(root, "host.json")
		v, ok, err := hostJSONTimeout(path)
		if err != nil {
			return Limits{}, &core.SettingError{Name: "functionTimeout", Value: path, Want: err.Error()}
		}
		if ok {
			raw, name, source, found = v, "functionTimeout", "host.json", true
		}
	}
	if !found {
		l.Function, l.Source = PlanDefault, "the plan default"
		if dynamic {
			l.Function = ConsumptionDefault
		}
		l.Warning = fmt.Sprintf("no functionTimeout in %s or host.json: assuming the default of the plan WEBSITE_SKU=%q names, %s", envFunctionTimeout, sku, l.Function)
	} else {
		d, err := ParseTimeSpan(raw)
		if err != nil {
			return Limits{}, &core.SettingError{Name: name, Value: raw, Want: err.Error()}
		}
		switch {
		case d == Unbounded && dynamic:
			return Limits{}, &core.SettingError{Name: name, Value: raw, Want: "want at most 00:10:00: -1 (unbounded) is not allowed on the Consumption plan (WEBSITE_SKU=Dynamic)"}
		case d == Unbounded:
			d = 0
		case d < time.Second:
			return Limits{}, &core.SettingError{Name: name, Value: raw, Want: "want at least 00:00:01, or -1 for unbounded"}
		case dynamic && d > ConsumptionMax:
			return Limits{}, &core.SettingError{Name: name, Value: raw, Want: "want at most 00:10:00 on the Consumption plan (WEBSITE_SKU=Dynamic)"}
		}
		l.Function, l.Source = d, source
	}
	l.Invocation = l.Function
	l.HTTP = HTTPLimit
	if l.Invocation > 0 {
		l.HTTP = min(l.Invocation, HTTPLimit)
	}
	return l, nil
}

// hostJSONTimeout reads functionTimeout from the host.json at path. It
// reports false when the file or the key is absent (or null).
func hostJSONTimeout(path string) (string, bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("want a readable host.json: %v", err)
	}
	var h struct {
		FunctionTimeout *string `json:"functionTimeout"`
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return "", false, fmt.Errorf("want host.json to be JSON with a string functionTimeout: %v", err)
	}
	if h.FunctionTimeout == nil {
		return "", false, nil
	}
	return *h.FunctionTimeout, true, nil
}

// Unbounded is what ParseTimeSpan returns for "-1": no limit, on the plans
// that allow it. (.NET reads "-1" as minus one day.)
const Unbounded = -24 * time.Hour

// maxTimeSpan bounds what ParseTimeSpan accepts: ten years, like every
// other duration setting.
const maxTimeSpan = 10 * 365 * 24 * time.Hour

var errTimeSpan = errors.New("want a timespan hh:mm:ss or d.hh:mm:ss (such as 00:10:00), or -1 for unbounded")

// ParseTimeSpan parses a .NET TimeSpan as host.json's functionTimeout is
// written: [d.]hh:mm[:ss[.fffffff]] with hh < 24 and mm, ss < 60, or a
// whole number of days. The only negative value accepted is "-1" (minus one
// day, which the host reads as unbounded); it returns Unbounded.
func ParseTimeSpan(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "-1" {
		return Unbounded, nil
	}
	if s == "" || s[0] == '-' || s[0] == '+' {
		return 0, errTimeSpan
	}
	num := func(t string, max int64) (int64, bool) {
		if t == "" || len(t) > 8 {
			return 0, false
		}
		for _, c := range t {
			if c < '0' || c > '9' {
				return 0, false
			}
		}
		n, err := strconv.ParseInt(t, 10, 64)
		return n, err == nil && n <= max
	}
	parts := strings.Split(s, ":")
	if len(parts) == 1 {
		days, ok := num(s, 3650)
		if !ok {
			return 0, errTimeSpan
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	if len(parts) > 3 {
		return 0, errTimeSpan
	}
	var days int64
	hh := parts[0]
	if d, h, ok := strings.Cut(hh, "."); ok {
		n, ok := num(d, 3650)
		if !ok {
			return 0, errTimeSpan
		}
		days, hh = n, h
	}
	h, ok1 := num(hh, 23)
	m, ok2 := num(parts[1], 59)
	if !ok1 || !ok2 || len(hh) > 2 || len(parts[1]) > 2 {
		return 0, errTimeSpan
	}
	var sec, frac int64
	if len(parts) == 3 {
		ss, fs, hasFrac := strings.Cut(parts[2], ".")
		n, ok := num(ss, 59)
		if !ok || len(ss) > 2 {
			return 0, errTimeSpan
		}
		sec = n
		if hasFrac {
			if len(fs) > 7 {
				return 0, errTimeSpan
			}
			f, ok := num(fs, 9999999)
			if !ok {
				return 0, errTimeSpan
			}
			for range 7 - len(fs) {
				f *= 10
			}
			frac = f // ticks of 100 ns
		}
	}
	d := time.Duration(days)*24*time.Hour + time.Duration(h)*time.Hour + time.Duration(m)*time.Minute +
		time.Duration(sec)*time.Second + time.Duration(frac)*100
	if d > maxTimeSpan {
		return 0, errTimeSpan
	}
	return d, nil
}

// FormatTimeSpan writes d as ParseTimeSpan reads it: [d.]hh:mm:ss[.fffffff]
// (Unbounded as "-1"). d is truncated to 100 ns ticks.
func FormatTimeSpan(d time.Duration) string {
	if d == Unbounded {
		return "-1"
	}
	if d < 0 {
		d = 0
	}
	ticks := int64(d / 100)
	frac := ticks % 10_000_000
	secs := ticks / 10_000_000
	days, secs := secs/86400, secs%86400
	s := fmt.Sprintf("%02d:%02d:%02d", secs/3600, secs/60%60, secs%60)
	if days > 0 {
		s = strconv.FormatInt(days, 10) + "." + s
	}
	if frac > 0 {
		s += fmt.Sprintf(".%07d", frac)
	}
	return s
}

// LookupEnv reads an app setting as the Functions host does: by exact name,
// else by the same name in any case (.NET configuration keys are
// case-insensitive, so AZUREFUNCTIONSJOBHOST__FUNCTIONTIMEOUT counts too).
func LookupEnv(name string) (string, bool) {
	if v, ok := os.LookupEnv(name); ok {
		return v, true
	}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

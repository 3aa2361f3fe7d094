package core

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Settings is the gateway's configuration, one field per app setting of
// docs/settings.md#settings. Field names are the setting names; the struct tags carry the
// documented defaults, read by the edge (functions/) with envconfig. Each
// field type parses its own text form (it has a Decode method) and says what
// it expects when the text is wrong.
//
// A Settings value is read-only once validated and may be shared by
// goroutines.
type Settings struct {
	// Hosts are the backends of the default route, tried in this order.
	Hosts HostList `required:"true"`
	// Routes are per-path-prefix overrides of the default route.
	Routes Routes
	// DefaultTTLSecs bounds a whole request, every attempt included.
	DefaultTTLSecs Seconds `default:"300"`
	// Timeout bounds one attempt, fresh for each.
	Timeout Millis `default:"1200000"`
	// MaxAttempts is the number of attempts per request; zero means one per
	// host of the route.
	MaxAttempts Count
	// RetryBackoffMs is the base of the jittered exponential backoff.
	RetryBackoffMs Millis `default:"25"`
	// MaxRetryBodyBytes is the largest request body buffered so it can be
	// resent; larger bodies stream to the first attempt and are not retried.
	MaxRetryBodyBytes Count `default:"10485760"`
	// MaxBufferedBytes is the process-wide budget for buffered request
	// bodies; a body that does not fit streams to a single attempt.
	MaxBufferedBytes Count `default:"134217728"`
	// ClientBodyTimeoutMs is the longest silence between two reads of a
	// request body; the TTL bounds a buffered upload as a whole too.
	ClientBodyTimeoutMs Millis `default:"30000"`
	// PublicBaseURL, if set, is the public base of the status URIs and
	// gateway-served result URLs in answers; empty means the request's own
	// Host and scheme.
	PublicBaseURL BaseURL
	// FunctionLimitMarginMs is kept free before the host's execution limit,
	// to answer or hand off to async.
	FunctionLimitMarginMs Millis `default:"1000"`

	// AsyncModeEnabled is the gateway-level async switch.
	AsyncModeEnabled Bool `default:"false"`
	// AsyncTriggerTimeout is how long an async-eligible request may wait
	// for its answer before it is answered 202.
	AsyncTriggerTimeout Millis `default:"10000"`
	// AsyncTimeout is one attempt's window once a request is async.
	AsyncTimeout Millis `default:"1800000"`
	// AsyncTTLSecs is an async request's expiry from arrival.
	AsyncTTLSecs Seconds `default:"86400"`
	// AsyncPollMaxSecs caps the Retry-After of a pending async request,
	// which grows with the request's age (docs/async-api.md).
	AsyncPollMaxSecs Seconds `default:"30"`
	// UserProfiles are selected by the X-UserProfile header.
	UserProfiles Profiles
	// AsyncStore names where continuation records and results live.
	AsyncStore string `default:"file:.gateway-data"`
	// AsyncQueue names where continuations are enqueued; empty follows
	// AsyncStore.
	AsyncQueue string
	// AzureWebJobsStorage is the storage account connection string.
	AzureWebJobsStorage string
	// NotificationTopicArns lists, comma-separated, the ARNs of the SNS
	// FIFO topics lifecycle notifications go to when AsyncStore is s3://
	// (the Terraform module writes those it creates); a topic without one
	// is created when missing, except on Lambda, where it stops the
	// start-up. Empty: none. The edge parses it (infra/aws).
	NotificationTopicArns string

	// MaxContinuations bounds the continuations one instance works on at
	// once, in-process finishes after a 202 included; beyond it they wait
	// on the queue.
	MaxContinuations Count `default:"16"`
	// MaxContinuationsPerProfile caps the continuation slots one profile
	// holds on an instance; the rest of its work waits on the queue
	// without holding back other profiles'. Zero (unset) means half of
	// MaxContinuations, rounded up (see ContinuationsPerProfile).
	MaxContinuationsPerProfile Count
	// IdempotencyScopeHeaders are the request headers whose values
	// (hashed, never stored in clear) scope an Idempotency-Key and the
	// right to cancel, with the profile, when the platform verified no
	// caller identity (a verified identity is the scope alone).
	IdempotencyScopeHeaders HeaderNames `default:"Authorization"`
	// AsyncInlineResultBytes is the largest finished async result the
	// status URI answers itself; a larger successful one is answered 303
	// to its signed data URL. At most MaxAsyncInlineResultBytes.
	AsyncInlineResultBytes Count `default:"1048576"`

	// FunctionTimeoutSecs is the execution limit to stay inside; zero
	// means the host's own (none for the local host).
	FunctionTimeoutSecs Seconds
	// InvokeMode is the Lambda Function URL's invoke mode, so the function
	// answers in the form Lambda expects; other hosts ignore it.
	InvokeMode InvokeMode `default:"BUFFERED"`
	// ListenAddr is the local host's listen address.
	ListenAddr string `default:"127.0.0.1:8080"`
	// TrustedProxies are the peers whose forwarding headers are believed;
	// none when unset (the adapters state the platform's own front end).
	TrustedProxies TrustedProxies

	// RetryBudgetPercent and RetryBudgetMinConcurrency bound the retries
	// and hedges in flight on an instance to max(min, percent × requests
	// in flight) (see RetryBudget). The percent is at most 100.
	RetryBudgetPercent        Count `default:"20"`
	RetryBudgetMinConcurrency Count `default:"3"`

	// EmfNamespace, if set, is the CloudWatch namespace of the Embedded
	// Metric Format metrics the per-request log line then carries.
	EmfNamespace EmfNamespace
	// GatewayEndpointLogLevel is the level of the log line of each request
	// to the gateway's own endpoints (/_gateway/: status and operation
	// URIs, stats, health, result reads); debug silences them.
	GatewayEndpointLogLevel LogLevel `default:"info"`

	// MaxResponseHeaderBytes bounds the header section of a backend's
	// answer (the upstream transport's MaxResponseHeaderBytes): an answer
	// whose status line and headers pass it fails its attempt (502
	// BackendUnavailable once the attempts are spent), never relayed.
	// 1 MiB, net/http's DefaultMaxHeaderBytes for a request's headers.
	MaxResponseHeaderBytes Count `default:"1048576"`

	// Host selection, retried statuses and predictive hand-off (issue 33;
	// docs/settings.md). LoadBalanceMode orders the hosts a request tries
	// (a route's loadBalance overrides it).
	LoadBalanceMode LoadBalance `default:"priority"`
	// RetryOnStatusCodes are the backend statuses that move on to the next
	// host; every other status goes to the client (a route's retryOn
	// overrides it). Never a 2xx.
	RetryOnStatusCodes StatusCodes `default:"429,502,503,504"`
	// AsyncPredictWindow, when set, turns predictive hand-off on: a
	// route's last AsyncPredictWindow async-eligible requests are kept,
	// and while their p90 latency is above AsyncTriggerTimeout the next
	// ones are handed off at once (see async.Predictor). Zero: off.
	AsyncPredictWindow Count
}

// MaxAsyncInlineResultBytes bounds AsyncInlineResultBytes: 4 MiB, which
// base64 turns into 5.6 MB, inside Lambda's 6 MB buffered answer.
const MaxAsyncInlineResultBytes = 4 << 20

// DefaultSettings returns the documented defaults of docs/settings.md#settings, read
// from the `default` struct tags of Settings — the one source of defaults,
// which the edge's envconfig reads too. Fields without a default (Hosts
// among them) are zero.
func DefaultSettings() Settings {
	var s Settings
	v := reflect.ValueOf(&s).Elem()
	t := v.Type()
	for i := range t.NumField() {
		def, ok := t.Field(i).Tag.Lookup("default")
		if !ok {
			continue
		}
		f := v.Field(i)
		if d, ok := f.Addr().Interface().(interface{ Decode(string) error }); ok {
			if err := d.Decode(def); err != nil {
				panic("core: default of " + t.Field(i).Name + ": " + err.Error())
			}
			continue
		}
		if f.Kind() != reflect.String {
			panic("core: no decoder for the default of " + t.Field(i).Name)
		}
		f.SetString(def)
	}
	return s
}

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

// maxSeconds bounds every duration setting and header: ten years.
const maxSeconds = 10 * 365 * 24 * 3600

// Seconds is a positive duration written in seconds, decimals allowed.
// The zero value means "not set".
type Seconds time.Duration

// Decode parses s, for envconfig.
func (d *Seconds) Decode(s string) error {
	v, err := parseDecimalSeconds(s)
	if errors.Is(err, errBeyondCap) {
		return fmt.Errorf("want at most ten years (%d s), the longest duration the gateway accepts", maxSeconds)
	}
	if err != nil || v <= 0 {
		return errors.New("want a positive number of seconds, such as 300 or 2.5")
	}
	*d = Seconds(v)
	return nil
}

// D returns d as a time.Duration.
func (d Seconds) D() time.Duration { return time.Duration(d) }

// Millis is a positive duration written in whole milliseconds.
// The zero value means "not set".
type Millis time.Duration

// Decode parses s, for envconfig.
func (d *Millis) Decode(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err == nil && n > maxSeconds*1000 || errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(strings.TrimSpace(s), "-") {
		return fmt.Errorf("want at most ten years (%d ms), the longest duration the gateway accepts", int64(maxSeconds)*1000)
	}
	if err != nil || n <= 0 {
		return errors.New("want a positive whole number of milliseconds, such as 30000")
	}
	*d = Millis(time.Duration(n) * time.Millisecond)
	return nil
}

// D returns d as a time.Duration.
func (d Millis) D() time.Duration { return time.Duration(d) }

// Count is a positive whole number. The zero value means "not set".
type Count int64

// Decode parses s, for envconfig.
func (c *Count) Decode(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 {
		return errors.New("want a positive whole number")
	}
	*c = Count(n)
	return nil
}

// InvokeMode is a Lambda Function URL's invoke mode: InvokeBuffered (the
// default) or InvokeResponseStream.
type InvokeMode string

// The invoke modes of a Lambda Function URL.
const (
	InvokeBuffered       InvokeMode = "BUFFERED"
	InvokeResponseStream InvokeMode = "RESPONSE_STREAM"
)

// Decode parses s, for envconfig.
func (m *InvokeMode) Decode(s string) error {
	switch v := InvokeMode(strings.TrimSpace(s)); v {
	case InvokeBuffered, InvokeResponseStream:
		*m = v
		return nil
	}
	return errors.New("want BUFFERED or RESPONSE_STREAM")
}

// Bool is true or false.
type Bool bool

// Decode parses s, for envconfig.
func (b *Bool) Decode(s string) error {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "1":
		*b = true
	case "false", "0":
		*b = false
	default:
		return errors.New("want true or false")
	}
	return nil
}

// BaseURL is an absolute http(s) URL without query or fragment, kept
// without its trailing slash. The zero value means "not set".
type BaseURL string

// Decode parses s, for envconfig.
func (b *BaseURL) Decode(s string) error {
	s = strings.TrimSpace(s)
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != "" {
		return errors.New("want an absolute http(s) URL without query or fragment, such as https://api.example.com/gateway")
	}
	*b = BaseURL(strings.TrimRight(s, "/"))
	return nil
}

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
		s[i] = BaseURLOf(u)
		if u.Fragment != "" {
			s[i] = u.Fragment + "=" + s[i]
		}
	}
	return strings.Join(s, ",")
}

// StatusCodes is a comma-separated list of HTTP statuses that move an
// attempt on to the next host (RetryOnStatusCodes): each from 400 to 599,
// so that a success or a redirect is never retried.
type StatusCodes []int

// Decode parses s, for envconfig.
func (c *StatusCodes) Decode(s string) error {
	var out StatusCodes
	for part := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil {
			return errors.New("want comma-separated HTTP statuses from 400 to 599, such as 429,502,503,504")
		}
		if err := checkRetryStatus(n); err != nil {
			return err
		}
		out = append(out, n)
	}
	*c = out
	return nil
}

// checkRetryStatus refuses a status that may not move on to the next host.
func checkRetryStatus(n int) error {
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
	// default, DefaultEjectAfterFailures, and a negative value never
	// ejects. EjectFor is the first ejection's length; zero means
	// DefaultEjectFor.
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

// Routes is the JSON array of the Routes setting.
type Routes []Route

// Decode parses s, for envconfig.
func (rs *Routes) Decode(s string) error {
	r, err := ParseRoutes([]byte(s))
	if err != nil {
		return err
	}
	*rs = r
	return nil
}

// ParseRoutes parses the Routes setting: a JSON array of route objects.
// Unknown keys, duplicate prefixes and non-positive durations are errors.
func ParseRoutes(data []byte) (Routes, error) {
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
	out := make(Routes, 0, len(raw))
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
			if v > maxSeconds {
				return nil, fmt.Errorf("%s: ttlSecs: want at most ten years (%d s), the longest TTL the gateway accepts", where, maxSeconds)
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
			if *p > maxSeconds*1000 {
				return 0, fmt.Errorf("%s: %s: want at most ten years (%d ms), the longest duration the gateway accepts", where, name, int64(maxSeconds)*1000)
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
				if err := checkRetryStatus(n); err != nil {
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

// Profiles is the UserProfiles setting: a JSON array, or file:<path> of one.
type Profiles map[string]Profile

// Decode parses s, for envconfig.
func (p *Profiles) Decode(s string) error {
	data := []byte(s)
	if path, ok := strings.CutPrefix(s, "file:"); ok {
		b, err := readProfilesFile(path)
		if err != nil {
			return fmt.Errorf("want a readable JSON file of profiles: %v", err)
		}
		data = b
	}
	out, err := ParseProfiles(data)
	if err != nil {
		return err
	}
	*p = out
	return nil
}

// ParseProfiles parses a JSON array of user profiles keyed by userId.
func ParseProfiles(data []byte) (Profiles, error) {
	var raw []Profile
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("want a JSON array of profiles ({\"userId\":…,\"async-config\":{…}}): %v", err)
	}
	if err := unknownProfileKeys(data); err != nil {
		return nil, err
	}
	out := Profiles{}
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

// Validate checks that the settings can nest under the execution limit
// limit (zero: none). explicit reports whether a setting was given rather
// than defaulted: only given values are held against the limit, since
// defaults are bounded by it at run time anyway.
func (s *Settings) Validate(limit time.Duration, explicit func(name string) bool) error {
	if len(s.Hosts) == 0 {
		return &SettingError{Name: "Hosts", Want: "want one or more comma-separated base URLs (required)"}
	}
	if err := s.validateLimits(); err != nil {
		return err
	}
	if limit > 0 && s.FunctionLimitMarginMs.D() >= limit {
		return &SettingError{Name: "FunctionLimitMarginMs", Value: ms(s.FunctionLimitMarginMs.D()),
			Want: fmt.Sprintf("want less than the execution limit of %s", limit)}
	}
	usable := limit - s.FunctionLimitMarginMs.D()
	if limit > 0 {
		if explicit("Timeout") && s.Timeout.D() > usable {
			return &SettingError{Name: "Timeout", Value: ms(s.Timeout.D()),
				Want: fmt.Sprintf("want at most %d ms: the execution limit %s minus the %s margin", usable.Milliseconds(), limit, s.FunctionLimitMarginMs.D())}
		}
		for _, r := range s.Routes {
			if r.Timeout > usable {
				return &SettingError{Name: "Routes", Value: fmt.Sprintf("prefix %q timeoutMs %d", r.Prefix, r.Timeout.Milliseconds()),
					Want: fmt.Sprintf("want timeoutMs at most %d: the execution limit %s minus the %s margin", usable.Milliseconds(), limit, s.FunctionLimitMarginMs.D())}
			}
		}
		if bool(s.AsyncModeEnabled) && explicit("AsyncTriggerTimeout") && s.AsyncTriggerTimeout.D() > usable {
			return &SettingError{Name: "AsyncTriggerTimeout", Value: ms(s.AsyncTriggerTimeout.D()),
				Want: fmt.Sprintf("want at most %d ms, so the 202 is sent before the execution limit", usable.Milliseconds())}
		}
	}
	if bool(s.AsyncModeEnabled) && s.AsyncTTLSecs.D() < s.AsyncTriggerTimeout.D() {
		return &SettingError{Name: "AsyncTTLSecs", Value: strconv.FormatFloat(s.AsyncTTLSecs.D().Seconds(), 'f', -1, 64),
			Want: "want at least AsyncTriggerTimeout, or nothing could ever go async"}
	}
	if s.MaxContinuationsPerProfile > s.MaxContinuations && s.MaxContinuations > 0 {
		return &SettingError{Name: "MaxContinuationsPerProfile", Value: strconv.FormatInt(int64(s.MaxContinuationsPerProfile), 10),
			Want: fmt.Sprintf("want at most MaxContinuations (%d)", s.MaxContinuations)}
	}
	if s.AsyncInlineResultBytes > MaxAsyncInlineResultBytes {
		return &SettingError{Name: "AsyncInlineResultBytes", Value: strconv.FormatInt(int64(s.AsyncInlineResultBytes), 10),
			Want: fmt.Sprintf("want at most %d bytes, so that an inline result fits a Lambda buffered answer (6 MB) once base64-encoded", MaxAsyncInlineResultBytes)}
	}
	if !strings.HasPrefix(s.AsyncStore, "file:") && s.AsyncStore != "azure" && !strings.HasPrefix(s.AsyncStore, "s3://") {
		return &SettingError{Name: "AsyncStore", Value: s.AsyncStore, Want: "want file:<dir>, azure or s3://<bucket>[/<prefix>]"}
	}
	if s.AsyncStore == "file:" {
		return &SettingError{Name: "AsyncStore", Value: s.AsyncStore, Want: "want a directory after file:"}
	}
	if s.RetryBudgetPercent > 100 {
		return &SettingError{Name: "RetryBudgetPercent", Value: strconv.FormatInt(int64(s.RetryBudgetPercent), 10), Want: "want a whole percentage from 1 to 100"}
	}
	return nil
}

// DefaultMaxContinuations is MaxContinuations' default: the continuations
// one instance works on at once.
const DefaultMaxContinuations = 16

// ContinuationsPerProfile returns MaxContinuationsPerProfile, or, when it
// is not set, half of MaxContinuations rounded up (MaxContinuations'
// default when that is not set either).
func (s *Settings) ContinuationsPerProfile() int {
	if s.MaxContinuationsPerProfile > 0 {
		return int(s.MaxContinuationsPerProfile)
	}
	n := int(s.MaxContinuations)
	if n <= 0 {
		n = DefaultMaxContinuations
	}
	return (n + 1) / 2
}

// HeaderNames is a comma-separated list of HTTP header names, kept
// canonicalised (IdempotencyScopeHeaders). The zero value means "not set".
// A header whose value differs on every request of one caller (Date,
// X-Amz-Date, X-Amz-Content-Sha256, …) or that the gateway removes
// (X-Amz-Security-Token, X-Functions-Key) is refused: it can never scope.
type HeaderNames []string

// Decode parses s, for envconfig.
func (h *HeaderNames) Decode(s string) error {
	names, err := ParseHeaderNames(s)
	if err != nil {
		return fmt.Errorf("want comma-separated HTTP header names, such as Authorization,X-Api-Key: %w", err)
	}
	if err := checkScopeHeaders(names); err != nil {
		return err
	}
	*h = names
	return nil
}

// ParseHeaderNames parses a comma-separated list of HTTP header names
// (IdempotencyScopeHeaders), trimmed and canonicalised. An empty list, an
// empty element or a name that is not an HTTP token is an error.
func ParseHeaderNames(s string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(s, ",") {
		name := strings.TrimSpace(part)
		if name == "" {
			return nil, fmt.Errorf("empty header name in %.60q", s)
		}
		if !IsToken(name) {
			return nil, fmt.Errorf("%.60q is not an HTTP header name", name)
		}
		out = append(out, http.CanonicalHeaderKey(name))
	}
	return out, nil
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// RouteFor returns the effective route for path: the longest matching
// Routes prefix with unset fields filled from the gateway-level settings,
// or the default route. It never returns nil.
func (s *Settings) RouteFor(path string) *Route {
	var best *Route
	for i := range s.Routes {
		r := &s.Routes[i]
		if matchPrefix(path, r.Prefix) && (best == nil || len(r.Prefix) > len(best.Prefix)) {
			best = r
		}
	}
	eff := Route{Prefix: "/"}
	if best != nil {
		eff = *best
	}
	if len(eff.Hosts) == 0 {
		eff.Hosts = s.Hosts
	}
	if eff.TTL == 0 {
		eff.TTL = s.DefaultTTLSecs.D()
	}
	if eff.Timeout == 0 {
		eff.Timeout = s.Timeout.D()
	}
	if eff.MaxAttempts == 0 {
		eff.MaxAttempts = int(s.MaxAttempts)
	}
	if eff.MaxAttempts == 0 {
		eff.MaxAttempts = len(eff.Hosts)
	}
	if eff.FirstByteTimeout == 0 {
		eff.FirstByteTimeout = eff.IdleTimeout
	}
	if !eff.LoadBalanceSet {
		eff.LoadBalance = s.LoadBalanceMode
	}
	if eff.RetryOn == nil {
		eff.RetryOn = s.RetryOnStatusCodes
	}
	if eff.EjectAfterFailures == 0 {
		eff.EjectAfterFailures = DefaultEjectAfterFailures
	}
	if eff.EjectFor == 0 {
		eff.EjectFor = DefaultEjectFor
	}
	return &eff
}

// Router resolves request paths to effective routes. Build it once with
// NewRouter; it is safe for concurrent use.
type Router struct {
	routes []*Route // effective, longest prefix first
	def    *Route
}

// NewRouter precomputes the effective routes of s.
func NewRouter(s *Settings) *Router {
	rt := &Router{def: s.RouteFor("\x00")}
	for _, r := range s.Routes {
		rt.routes = append(rt.routes, s.RouteFor(r.Prefix))
	}
	// Longest prefix first.
	for i := 1; i < len(rt.routes); i++ {
		for j := i; j > 0 && len(rt.routes[j].Prefix) > len(rt.routes[j-1].Prefix); j-- {
			rt.routes[j], rt.routes[j-1] = rt.routes[j-1], rt.routes[j]
		}
	}
	return rt
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

package settings

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"fngateway/core"
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
	Hosts core.HostList `required:"true"`
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
	TrustedProxies core.TrustedProxies

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
	LoadBalanceMode core.LoadBalance `default:"priority"`
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
				panic("settings: default of " + t.Field(i).Name + ": " + err.Error())
			}
			continue
		}
		if f.Kind() != reflect.String {
			panic("settings: no decoder for the default of " + t.Field(i).Name)
		}
		f.SetString(def)
	}
	return s
}

// Seconds is a positive duration written in seconds, decimals allowed.
// The zero value means "not set".
type Seconds time.Duration

// Decode parses s, for envconfig.
func (d *Seconds) Decode(s string) error {
	v, err := core.ParseDecimalSeconds(s)
	if errors.Is(err, core.ErrBeyondCap) {
		return fmt.Errorf("want at most ten years (%d s), the longest duration the gateway accepts", core.MaxSeconds)
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
	if err == nil && n > core.MaxSeconds*1000 || errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(strings.TrimSpace(s), "-") {
		return fmt.Errorf("want at most ten years (%d ms), the longest duration the gateway accepts", int64(core.MaxSeconds)*1000)
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
		if err := core.CheckRetryStatus(n); err != nil {
			return err
		}
		out = append(out, n)
	}
	*c = out
	return nil
}

// Routes is the JSON array of the Routes setting.
type Routes []core.Route

// Decode parses s, for envconfig.
func (rs *Routes) Decode(s string) error {
	r, err := core.ParseRoutes([]byte(s))
	if err != nil {
		return err
	}
	*rs = r
	return nil
}

// Profiles is the UserProfiles setting: a JSON array, or file:<path> of one.
type Profiles map[string]core.Profile

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
	out, err := core.ParseProfiles(data)
	if err != nil {
		return err
	}
	*p = out
	return nil
}

// Validate checks that the settings can nest under the execution limit
// limit (zero: none). explicit reports whether a setting was given rather
// than defaulted: only given values are held against the limit, since
// defaults are bounded by it at run time anyway.
func (s *Settings) Validate(limit time.Duration, explicit func(name string) bool) error {
	if len(s.Hosts) == 0 {
		return &core.SettingError{Name: "Hosts", Want: "want one or more comma-separated base URLs (required)"}
	}
	if err := s.validateLimits(); err != nil {
		return err
	}
	if limit > 0 && s.FunctionLimitMarginMs.D() >= limit {
		return &core.SettingError{Name: "FunctionLimitMarginMs", Value: ms(s.FunctionLimitMarginMs.D()),
			Want: fmt.Sprintf("want less than the execution limit of %s", limit)}
	}
	usable := limit - s.FunctionLimitMarginMs.D()
	if limit > 0 {
		if explicit("Timeout") && s.Timeout.D() > usable {
			return &core.SettingError{Name: "Timeout", Value: ms(s.Timeout.D()),
				Want: fmt.Sprintf("want at most %d ms: the execution limit %s minus the %s margin", usable.Milliseconds(), limit, s.FunctionLimitMarginMs.D())}
		}
		for _, r := range s.Routes {
			if r.Timeout > usable {
				return &core.SettingError{Name: "Routes", Value: fmt.Sprintf("prefix %q timeoutMs %d", r.Prefix, r.Timeout.Milliseconds()),
					Want: fmt.Sprintf("want timeoutMs at most %d: the execution limit %s minus the %s margin", usable.Milliseconds(), limit, s.FunctionLimitMarginMs.D())}
			}
		}
		if bool(s.AsyncModeEnabled) && explicit("AsyncTriggerTimeout") && s.AsyncTriggerTimeout.D() > usable {
			return &core.SettingError{Name: "AsyncTriggerTimeout", Value: ms(s.AsyncTriggerTimeout.D()),
				Want: fmt.Sprintf("want at most %d ms, so the 202 is sent before the execution limit", usable.Milliseconds())}
		}
	}
	if bool(s.AsyncModeEnabled) && s.AsyncTTLSecs.D() < s.AsyncTriggerTimeout.D() {
		return &core.SettingError{Name: "AsyncTTLSecs", Value: strconv.FormatFloat(s.AsyncTTLSecs.D().Seconds(), 'f', -1, 64),
			Want: "want at least AsyncTriggerTimeout, or nothing could ever go async"}
	}
	if s.MaxContinuationsPerProfile > s.MaxContinuations && s.MaxContinuations > 0 {
		return &core.SettingError{Name: "MaxContinuationsPerProfile", Value: strconv.FormatInt(int64(s.MaxContinuationsPerProfile), 10),
			Want: fmt.Sprintf("want at most MaxContinuations (%d)", s.MaxContinuations)}
	}
	if s.AsyncInlineResultBytes > MaxAsyncInlineResultBytes {
		return &core.SettingError{Name: "AsyncInlineResultBytes", Value: strconv.FormatInt(int64(s.AsyncInlineResultBytes), 10),
			Want: fmt.Sprintf("want at most %d bytes, so that an inline result fits a Lambda buffered answer (6 MB) once base64-encoded", MaxAsyncInlineResultBytes)}
	}
	if !strings.HasPrefix(s.AsyncStore, "file:") && s.AsyncStore != "azure" && !strings.HasPrefix(s.AsyncStore, "s3://") {
		return &core.SettingError{Name: "AsyncStore", Value: s.AsyncStore, Want: "want file:<dir>, azure or s3://<bucket>[/<prefix>]"}
	}
	if s.AsyncStore == "file:" {
		return &core.SettingError{Name: "AsyncStore", Value: s.AsyncStore, Want: "want a directory after file:"}
	}
	if s.RetryBudgetPercent > 100 {
		return &core.SettingError{Name: "RetryBudgetPercent", Value: strconv.FormatInt(int64(s.RetryBudgetPercent), 10), Want: "want a whole percentage from 1 to 100"}
	}
	return nil
}

// ContinuationsPerProfile returns MaxContinuationsPerProfile, or, when it
// is not set, half of MaxContinuations rounded up (MaxContinuations'
// default when that is not set either).
func (s *Settings) ContinuationsPerProfile() int {
	if s.MaxContinuationsPerProfile > 0 {
		return int(s.MaxContinuationsPerProfile)
	}
	n := int(s.MaxContinuations)
	if n <= 0 {
		n = core.DefaultMaxContinuations
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
		if !core.IsToken(name) {
			return nil, fmt.Errorf("%.60q is not an HTTP header name", name)
		}
		out = append(out, http.CanonicalHeaderKey(name))
	}
	return out, nil
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// DefaultRoute is the gateway-level route: Hosts and the settings a
// route of Routes inherits when it leaves them out.
func (s *Settings) DefaultRoute() core.Route {
	return core.Route{Prefix: "/", Hosts: s.Hosts, TTL: s.DefaultTTLSecs.D(), Timeout: s.Timeout.D(), MaxAttempts: int(s.MaxAttempts),
		LoadBalance: s.LoadBalanceMode, RetryOn: s.RetryOnStatusCodes}
}

// Router resolves request paths to the effective routes of s (core.Router).
func (s *Settings) Router() *core.Router { return core.NewRouter(s.Routes, s.DefaultRoute()) }

// RouteFor returns the effective route for path: the longest matching
// Routes prefix with unset fields filled from the gateway-level settings,
// or the default route. It never returns nil.
func (s *Settings) RouteFor(path string) *core.Route { return s.Router().Match(path) }

package ops

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"fngateway/core"
	"fngateway/internal/settings"
)

// explainUsage is printed above the flags by `gateway explain -h`.
const explainUsage = `usage: gateway explain [flags]

Prints when each attempt of a request starts, how long it may take, which
deadline bounds it (TTL, Timeout or the execution limit), how it ends, and
the answer the client gets. Flags override the app settings in the
environment (DefaultTTLSecs, Timeout, MaxAttempts, FunctionTimeoutSecs,
FunctionLimitMarginMs, RetryBackoffMs, Hosts), which override the defaults.

example: gateway explain --ttl 60 --timeout 45000 --queue-wait 5s --attempts timeout,timeout

flags:
`

// Explain is `gateway explain [flags]`: it prints the budget timeline of a
// request (core.Explain) as a table and returns the exit code: 0, or 2 for
// a flag or setting it cannot read. Settings come from the flags, then
// from env (the app settings of docs/settings.md#settings: a lookup such as
// os.LookupEnv; each setting is looked up as named, then in upper case),
// then from the contract's defaults.
func Explain(args []string, env func(string) (string, bool), now time.Time, stdout, stderr io.Writer) int {
	def := settings.DefaultSettings() // the one source of defaults
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		ttl       = fs.String("ttl", "", "the request's TTL in seconds, decimals allowed (DefaultTTLSecs; default "+explainSecs(def.DefaultTTLSecs.D())+")")
		s7pttl    = fs.String("s7pttl", "", "an S7PTTL header value, overriding --ttl: 2.5, +<unix seconds>, 2024-12-31T23:59:59Z, 0 (expired)")
		timeout   = fs.String("timeout", "", "one attempt's window in ms (Timeout; default "+strconv.FormatInt(def.Timeout.D().Milliseconds(), 10)+")")
		s7ptmo    = fs.String("s7ptimeout", "", "an S7PTimeout header value in ms, overriding --timeout")
		queueWait = fs.String("queue-wait", "0s", "time from arrival to the first attempt, such as 5s or 250ms")
		fnTimeout = fs.String("function-timeout", "", "the host's execution limit in seconds (FunctionTimeoutSecs; default none)")
		margin    = fs.String("margin", "", "ms kept free before the execution limit (FunctionLimitMarginMs; default "+strconv.FormatInt(def.FunctionLimitMarginMs.D().Milliseconds(), 10)+")")
		maxAtt    = fs.String("max-attempts", "", "attempts per request (MaxAttempts; default one per host of Hosts, else one per --attempts entry)")
		attempts  = fs.String("attempts", "", "what the backend does, per attempt, comma-separated: timeout, refused[@d], reset[@d], ok[@d], 503@2s; the last repeats (default timeout)")
		backoff   = fs.String("backoff", "", "retry backoff base in ms, waited at its worst case (RetryBackoffMs; default "+strconv.FormatInt(def.RetryBackoffMs.D().Milliseconds(), 10)+")")
		method    = fs.String("method", "GET", "the request's method; POST and PATCH are retried after a timeout only with --idempotency-key")
		idemKey   = fs.Bool("idempotency-key", false, "the client sent an Idempotency-Key")
		hedge     = fs.Bool("hedge", false, "the route hedges on the per-try timeout (hedgeOnPerTryTimeout): the next attempt starts beside one whose Timeout fired")
		grpcTmo   = fs.String("grpc-timeout", "", "an incoming grpc-timeout header value, such as 1500m: the caller's deadline, which can only shorten the TTL")
		envoyTmo  = fs.String("envoy-timeout-ms", "", "an incoming x-envoy-expected-rq-timeout-ms header value: the caller's deadline, which can only shorten the TTL")
		retryOn   = fs.String("retry-on", "", "the answer statuses that move on to the next host (RetryOnStatusCodes; default 429,502,503,504)")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, explainUsage)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return 0
		}
		fmt.Fprintf(stderr, "explain: %v; run gateway explain -h for the flags\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "explain: unexpected argument %q; want flags only, such as --ttl 60\n", fs.Arg(0))
		return 2
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	r := explainResolver{env: env, given: given}

	var p core.ExplainParams
	ttlSecs := def.DefaultTTLSecs
	ttlFrom := r.value("ttl", *ttl, "DefaultTTLSecs", &ttlSecs)
	tmo := def.Timeout
	tmoFrom := r.value("timeout", *timeout, "Timeout", &tmo)
	fnLimit := def.FunctionTimeoutSecs
	fnFrom := r.value("function-timeout", *fnTimeout, "FunctionTimeoutSecs", &fnLimit)
	marg := def.FunctionLimitMarginMs
	r.value("margin", *margin, "FunctionLimitMarginMs", &marg)
	count := def.MaxAttempts
	countFrom := r.value("max-attempts", *maxAtt, "MaxAttempts", &count)
	base := def.RetryBackoffMs
	r.value("backoff", *backoff, "RetryBackoffMs", &base)
	statuses := def.RetryOnStatusCodes
	r.value("retry-on", *retryOn, "RetryOnStatusCodes", &statuses)
	if countFrom == "" {
		var hosts core.HostList
		if r.value("", "", "Hosts", &hosts) != "" {
			count, countFrom = settings.Count(len(hosts)), "one per host of Hosts"
		}
	}
	if r.err != nil {
		fmt.Fprintf(stderr, "explain: %v\n", r.err)
		return 2
	}

	if ttlFrom == "" {
		ttlFrom = " by default"
	}
	if tmoFrom == "" {
		tmoFrom = " by default"
	}
	p.TTL = ttlSecs.D()
	ttlText := fmt.Sprintf("DefaultTTLSecs=%s%s", explainSecs(p.TTL), ttlFrom)
	if given["s7pttl"] {
		deadline, err := core.ParseTTL(*s7pttl, now)
		if err != nil {
			return explainBad(stderr, "s7pttl", *s7pttl, err.Error())
		}
		p.TTL = deadline.Sub(now)
		ttlText = fmt.Sprintf("S7PTTL=%s, overriding DefaultTTLSecs=%s", strings.TrimSpace(*s7pttl), explainSecs(ttlSecs.D()))
	}
	if given["grpc-timeout"] || given["envoy-timeout-ms"] {
		h := http.Header{}
		if given["grpc-timeout"] {
			h["Grpc-Timeout"] = []string{*grpcTmo}
		}
		if given["envoy-timeout-ms"] {
			h["X-Envoy-Expected-Rq-Timeout-Ms"] = []string{*envoyTmo}
		}
		deadline, from, err := core.CallerDeadline(h, now)
		if err != nil {
			flagName, v := "grpc-timeout", *grpcTmo
			if from != "grpc-timeout" {
				flagName, v = "envoy-timeout-ms", *envoyTmo
			}
			return explainBad(stderr, flagName, v, err.Error())
		}
		v := strings.Join(h[http.CanonicalHeaderKey(from)], ",")
		if d := deadline.Sub(now); d < p.TTL {
			ttlText = fmt.Sprintf("%s: %s (the caller's deadline), shortening %s", from, v, ttlText)
			p.TTL = d
		} else {
			ttlText += fmt.Sprintf("; the caller's %s: %s is later and changes nothing", from, v)
		}
	}
	p.Timeout = tmo.D()
	if given["s7ptimeout"] {
		d, err := core.ParseTimeout(*s7ptmo)
		if err != nil {
			return explainBad(stderr, "s7ptimeout", *s7ptmo, err.Error())
		}
		p.Timeout, tmoFrom = d, fmt.Sprintf(" from S7PTimeout, overriding Timeout=%d", tmo.D().Milliseconds())
	}
	d, err := time.ParseDuration(strings.TrimSpace(*queueWait))
	if err != nil || d < 0 {
		return explainBad(stderr, "queue-wait", *queueWait, "want a duration of zero or more, such as 5s or 250ms")
	}
	p.QueueWait = d
	p.FunctionTimeout, p.Margin = fnLimit.D(), marg.D()
	if p.FunctionTimeout > 0 && p.Margin >= p.FunctionTimeout {
		return explainBad(stderr, "margin", strconv.FormatInt(p.Margin.Milliseconds(), 10),
			fmt.Sprintf("want fewer ms than the function timeout of %s", p.FunctionTimeout))
	}
	if count > 1000 {
		return explainBad(stderr, "max-attempts", strconv.FormatInt(int64(count), 10), "want a whole number from 1 to 1000")
	}
	p.MaxAttempts = int(count)
	p.BackoffBase = base.D()
	p.RetryOn = statuses
	p.Hedge = *hedge
	p.Replies, err = parseReplies(*attempts)
	if err != nil {
		return explainBad(stderr, "attempts", *attempts, err.Error())
	}
	p.Method = strings.ToUpper(strings.TrimSpace(*method))
	if !core.IsToken(p.Method) {
		return explainBad(stderr, "method", *method, "want an HTTP method such as GET or POST")
	}
	p.ClientKey = *idemKey

	t := core.Explain(p)
	fmt.Fprintf(stdout, "settings: TTL %s s; Timeout %d ms%s; %s; queue wait %s s; %s; %s\n\n",
		explainSecs(p.TTL), p.Timeout.Milliseconds(), tmoFrom, explainAttemptsText(t.Params.MaxAttempts, countFrom),
		explainSecs(p.QueueWait), explainLimitText(p, fnFrom), explainBackoffText(p.BackoffBase))
	if p.Hedge && !t.Hedged {
		fmt.Fprintf(stdout, "note: --hedge has no effect here: a request hedges only with MaxAttempts above 1 and a safe method, or a client Idempotency-Key\n\n")
	}
	if err := writeTable(stdout, &t, ttlText); err != nil {
		fmt.Fprintf(stderr, "explain: write: %v\n", err)
		return 1
	}
	return 0
}

// explainResolver reads each setting from its flag, else the environment;
// it keeps the first error, a one-line message naming the flag or setting.
type explainResolver struct {
	env   func(string) (string, bool)
	given map[string]bool
	err   error
}

// value decodes flag's text (when the flag was given) or the environment
// setting into dst, and says where the value came from: " from --flag",
// " from the environment", or "" (dst keeps its default).
func (r *explainResolver) value(flagName, text, setting string, dst interface{ Decode(string) error }) string {
	if r.err != nil {
		return ""
	}
	if flagName != "" && r.given[flagName] {
		if err := dst.Decode(text); err != nil {
			r.err = fmt.Errorf("--%s %q: %v", flagName, text, err)
			return ""
		}
		return " from --" + flagName
	}
	if v, ok := settings.EnvLookup(r.env)(setting); ok {
		if err := dst.Decode(v); err != nil {
			r.err = &core.SettingError{Name: setting, Value: v, Want: err.Error()}
			return ""
		}
		return " from the environment"
	}
	return ""
}

// explainBad reports a bad flag value and returns exit code 2.
func explainBad(stderr io.Writer, flagName, value, want string) int {
	fmt.Fprintf(stderr, "explain: --%s %q: %s\n", flagName, value, want)
	return 2
}

func explainAttemptsText(n int, from string) string {
	switch from {
	case "":
		from = " (unset: one per --attempts entry)"
	case " from --max-attempts", " from the environment":
	default:
		from = ", " + from
	}
	return fmt.Sprintf("MaxAttempts %d%s", n, from)
}

func explainLimitText(p core.ExplainParams, from string) string {
	if p.FunctionTimeout <= 0 {
		return "no execution limit"
	}
	return fmt.Sprintf("execution limit %s s%s, margin %d ms", explainSecs(p.FunctionTimeout), from, p.Margin.Milliseconds())
}

func explainBackoffText(base time.Duration) string {
	if base <= 0 {
		return "no backoff wait"
	}
	return fmt.Sprintf("backoff base %d ms (worst-case waits)", base.Milliseconds())
}

// explainSecs writes d in seconds as briefly as exact: 60, 2.5, 0.3.
func explainSecs(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}

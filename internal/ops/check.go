package ops

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"fngateway/core"
)

// checkUsage is printed above the flags by `gateway check -h`.
const checkUsage = `usage: gateway check [flags] <URL>

Probes a deployed gateway at URL (its Function URL, function app URL or
PublicBaseURL) and prints one line per probe, PASS or FAIL:

  pass-through  a request reaches a backend through the gateway: an answer
                with x-Attempts, no gateway error, no 5xx
  ttl           a request whose S7PTTL must expire answers TTLExpired on
                time. Without --slow-path: S7PTTL: 0, which must answer 412
                TTLExpired before any attempt. With --slow-path (a path the
                backend answers slower than --ttl): S7PTTL: <--ttl> must
                answer 504 TTLExpired between --ttl and --ttl + --tolerance
  async         (with --async) a request with S7PAsyncMode: true and
                X-UserProfile: <--profile> to a path slower than
                AsyncTriggerTimeout answers 202, and its status URI, polled
                as Retry-After says, ends with the backend's answer

The exit status is 0 when every probe passed, 1 otherwise.

examples:
  gateway check https://<app>.azurewebsites.net
  gateway check --slow-path /delay/10 --ttl 2 --async --profile u1 https://<app>.azurewebsites.net
  gateway check --aws-sigv4 --region eu-west-1 https://<id>.lambda-url.eu-west-1.on.aws/
  gateway check --function-key "$KEY" https://<app>.azurewebsites.net
  gateway check --entra-scope api://<client-id>/.default --function-key "$KEY" https://<app>.azurewebsites.net

Credentials go only to the gateway's own host, never to a 303's data URL:
--aws-sigv4 signs for an AWS_IAM Function URL; --entra-scope sends
Authorization: Bearer with a token from the Azure SDK's default credential
chain (environment, workload identity, managed identity, Azure CLI, Azure
Developer CLI) for App Service Authentication; --function-key sends
x-functions-key for an HTTP function whose authLevel is function.

flags:
`

// checkConfig is what the flags say.
type checkConfig struct {
	base      *url.URL
	method    string
	path      string
	headers   http.Header
	slowPath  string
	ttl       time.Duration
	ttlText   string
	tolerance time.Duration
	async     bool
	asyncPath string
	profile   string
	wait      time.Duration
	timeout   time.Duration
	sigv4     bool
	region    string
	// entraScope, when set, is the scope of the bearer token sent to the
	// gateway (App Service Authentication): api://<client-id>/.default.
	entraScope string
	// functionKey, when set, is sent as x-functions-key (Azure Functions
	// authLevel function).
	functionKey string
}

// headerFlags collects repeated --header "Name: value" flags.
type headerFlags struct{ h http.Header }

func (f *headerFlags) String() string { return "" }

func (f *headerFlags) Set(s string) error {
	name, value, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if !ok || !core.IsToken(name) {
		return errors.New(`want "Name: value"`)
	}
	f.h.Add(name, strings.TrimSpace(value))
	return nil
}

// parseCheckArgs reads the flags and the URL, which may come before,
// between or after the flags.
func parseCheckArgs(args []string, stdout io.Writer) (*checkConfig, int, error) {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	hdr := &headerFlags{h: http.Header{}}
	var (
		method    = fs.String("method", "GET", "the method of every probe's request")
		path      = fs.String("path", "/", "the path of the pass-through probe (and of the others unless given)")
		slowPath  = fs.String("slow-path", "", "a path the backend answers slower than --ttl, for a TTL that runs out during an attempt (default none: S7PTTL: 0, expired before any attempt)")
		ttl       = fs.String("ttl", "2", "the S7PTTL sent to --slow-path, in seconds (decimals allowed)")
		tolerance = fs.Duration("tolerance", time.Second, "how much later than --ttl the 504 may arrive (network, cold start)")
		async     = fs.Bool("async", false, "also probe async: the gateway has AsyncModeEnabled=true and --profile has async-config.enabled")
		asyncPath = fs.String("async-path", "", "a path the backend answers slower than AsyncTriggerTimeout (default --slow-path, else --path)")
		profile   = fs.String("profile", "", "the X-UserProfile of the async probe (required with --async)")
		wait      = fs.Duration("wait", 2*time.Minute, "how long to follow the async request to its result")
		timeout   = fs.Duration("timeout", 30*time.Second, "the longest wait for one answer (the TTL probe waits at least --ttl + --tolerance)")
		sigv4     = fs.Bool("aws-sigv4", false, "sign requests with AWS SigV4 for service lambda (a Function URL with AuthType AWS_IAM), with the AWS SDK's default credentials")
		region    = fs.String("region", "", "the AWS region for --aws-sigv4 (default the SDK's: AWS_REGION, the profile's region)")
		scope     = fs.String("entra-scope", "", "send Authorization: Bearer with an Entra ID token for this scope, api://<client-id>/.default (Azure App Service Authentication), from the Azure SDK's default credentials")
		key       = fs.String("function-key", "", "send this Azure Functions key as x-functions-key (an HTTP function with authLevel function)")
	)
	fs.Var(hdr, "header", `a header sent with every request, "Name: value" (repeatable)`)
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(stdout, checkUsage)
				fs.SetOutput(stdout)
				fs.PrintDefaults()
				return nil, 0, err
			}
			return nil, 2, err
		}
		if fs.NArg() == 0 {
			break
		}
		rest = append(rest, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(rest) != 1 {
		return nil, 2, fmt.Errorf("want one URL, got %d arguments", len(rest))
	}
	base, err := url.Parse(rest[0])
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" || base.RawQuery != "" || base.Fragment != "" {
		return nil, 2, fmt.Errorf("URL %q: want an absolute http or https URL without query, such as https://<app>.azurewebsites.net", rest[0])
	}
	c := &checkConfig{base: base, method: strings.ToUpper(strings.TrimSpace(*method)), headers: hdr.h,
		tolerance: *tolerance, async: *async, profile: strings.TrimSpace(*profile), wait: *wait, timeout: *timeout,
		sigv4: *sigv4, region: strings.TrimSpace(*region), entraScope: strings.TrimSpace(*scope), functionKey: strings.TrimSpace(*key)}
	if err := c.checkCredentials(*scope, *key); err != nil {
		return nil, 2, err
	}
	if !core.IsToken(c.method) {
		return nil, 2, fmt.Errorf("--method %q: want an HTTP method such as GET or POST", *method)
	}
	for _, p := range []struct {
		flag string
		dst  *string
		val  string
	}{{"path", &c.path, *path}, {"slow-path", &c.slowPath, *slowPath}, {"async-path", &c.asyncPath, *asyncPath}} {
		v := strings.TrimSpace(p.val)
		if v != "" && (!strings.HasPrefix(v, "/") || strings.ContainsAny(v, "#\r\n ")) {
			return nil, 2, fmt.Errorf("--%s %q: want a path starting with /", p.flag, p.val)
		}
		*p.dst = v
	}
	if c.path == "" {
		c.path = "/"
	}
	secs, err := strconv.ParseFloat(strings.TrimSpace(*ttl), 64)
	if err != nil || math.IsNaN(secs) || secs <= 0 || secs > 3600 {
		return nil, 2, fmt.Errorf("--ttl %q: want seconds, more than 0 and at most 3600, such as 2 or 0.5", *ttl)
	}
	c.ttl, c.ttlText = time.Duration(secs*float64(time.Second)), strings.TrimSpace(*ttl)
	if c.tolerance < 0 || c.wait <= 0 || c.timeout <= 0 {
		return nil, 2, errors.New("--tolerance, --wait and --timeout: want positive durations such as 1s or 2m")
	}
	if c.async && c.profile == "" {
		return nil, 2, errors.New("--async needs --profile: async runs only for a profile whose async-config is enabled")
	}
	if c.asyncPath == "" {
		c.asyncPath = c.slowPath
	}
	if c.asyncPath == "" {
		c.asyncPath = c.path
	}
	return c, 0, nil
}

// Signers make the credentials `gateway check` sends to the gateway's own
// host. The binary implements them with the authorizers of infra/aws and
// infra/azure, each only in a build that links that cloud
// (docs/development.md: build tags), and the error a build without it
// gives. (--function-key needs no SDK: the check sends it itself.)
type Signers interface {
	// SigV4 signs for service lambda in region (the SDK's region when
	// empty) with the SDK's default credentials: --aws-sigv4.
	SigV4(ctx context.Context, region string) (core.Authorizer, error)
	// Entra sends a bearer token for scope from the Azure SDK's default
	// credentials: --entra-scope.
	Entra(ctx context.Context, scope string) (core.Authorizer, error)
}

// Check is `gateway check [flags] <URL>`: it probes a deployed gateway and
// prints a pass/fail report. It returns 0 when every probe passed, 1 when
// one failed, 2 for a flag it cannot read.
func Check(ctx context.Context, args []string, signers Signers, stdout, stderr io.Writer) int {
	c, code, err := parseCheckArgs(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "check: %v; run gateway check -h for the flags\n", err)
		return code
	}
	ch := &checker{cfg: c, client: &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	switch {
	case c.sigv4:
		if ch.sign, err = signers.SigV4(ctx, c.region); err != nil {
			fmt.Fprintf(stderr, "check: --aws-sigv4: %v\n", err)
			return 2
		}
	case c.entraScope != "":
		if ch.sign, err = signers.Entra(ctx, c.entraScope); err != nil {
			fmt.Fprintf(stderr, "check: --entra-scope %s: %v\n", c.entraScope, err)
			return 2
		}
	}
	fmt.Fprintf(stdout, "gateway check %s\n", c.base)
	results := []checkResult{ch.passThrough(ctx), ch.ttlProbe(ctx)}
	if c.async {
		results = append(results, ch.asyncProbe(ctx))
	}
	failed := 0
	for _, r := range results {
		verdict := "PASS"
		if !r.ok {
			verdict = "FAIL"
			failed++
		}
		fmt.Fprintf(stdout, "%s  %-12s  %s\n", verdict, r.name, r.detail)
	}
	fmt.Fprintf(stdout, "%d passed, %d failed\n", len(results)-failed, failed)
	if failed > 0 {
		return 1
	}
	return 0
}

// checkCredentials refuses credential flags that cannot go together or
// cannot be what the gateway's front door wants. scope and key are the
// flags as given, for the messages.
func (c *checkConfig) checkCredentials(scope, key string) error {
	if c.sigv4 && (c.entraScope != "" || c.functionKey != "") {
		return errors.New("--aws-sigv4 signs for an AWS Function URL; --entra-scope and --function-key are Azure's: give one or the other")
	}
	if scope != "" {
		if c.entraScope == "" || strings.ContainsAny(c.entraScope, " \t\r\n") || !strings.HasSuffix(c.entraScope, "/.default") || len(c.entraScope) == len("/.default") {
			return fmt.Errorf("--entra-scope %q: want the app registration's scope, such as api://<client-id>/.default", scope)
		}
	}
	if key != "" && (c.functionKey == "" || !checkHeaderValue(c.functionKey)) {
		return errors.New("--function-key: want the key itself (printable characters, no spaces), as az functionapp keys list prints it")
	}
	return nil
}

// checkHeaderValue reports whether s can be sent as one header value:
// visible ASCII only.
func checkHeaderValue(s string) bool {
	for _, c := range s {
		if c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return s != ""
}

// checker sends the probes.
type checker struct {
	cfg    *checkConfig
	client *http.Client
	sign   core.Authorizer // nil: unsigned; adds the gateway's credentials (with cfg.functionKey)
}

// checkResult is one line of the report.
type checkResult struct {
	name   string
	ok     bool
	detail string
}

// checkAnswer is a response read whole.
type checkAnswer struct {
	status int
	header http.Header
	body   []byte
	took   time.Duration
}

// send sends one request to target, signed when it goes to the gateway,
// and reads the whole answer within wait.
func (ch *checker) send(ctx context.Context, method, target string, hdr http.Header, wait time.Duration) (checkAnswer, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, target, nil)
	if err != nil {
		return checkAnswer{}, err
	}
	for k, vs := range ch.cfg.headers {
		req.Header[k] = append([]string(nil), vs...)
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	if ch.sign != nil && req.URL.Host == ch.cfg.base.Host {
		if err := ch.sign.Authorize(ctx, req, nil, false); err != nil {
			return checkAnswer{}, err
		}
	}
	if ch.cfg.functionKey != "" && req.URL.Host == ch.cfg.base.Host {
		req.Header.Set("x-functions-key", ch.cfg.functionKey)
	}
	start := time.Now()
	resp, err := ch.client.Do(req)
	if err != nil {
		return checkAnswer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return checkAnswer{}, fmt.Errorf("reading the answer: %w", err)
	}
	return checkAnswer{status: resp.StatusCode, header: resp.Header, body: body, took: time.Since(start)}, nil
}

// target is the probe's URL for path.
func (ch *checker) target(path string) string {
	return strings.TrimRight(ch.cfg.base.String(), "/") + path
}

// checkDescribe says what a gateway answered: status, error code, attempts.
func checkDescribe(a checkAnswer) string {
	s := fmt.Sprintf("%d", a.status)
	if code := a.header.Get("x-Gateway-Error"); code != "" {
		s += " " + code
	}
	s += " in " + checkRound(a.took)
	if n := a.header.Get("x-Attempts"); n != "" {
		s += ", x-Attempts: " + n
	} else {
		s += ", no x-Attempts"
	}
	return s
}

func checkRound(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(10 * time.Millisecond).String()
}

// checkAttempts reads x-Attempts: -1 when absent or not a count.
func checkAttempts(a checkAnswer) int {
	n, err := strconv.Atoi(strings.TrimSpace(a.header.Get("x-Attempts")))
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// passThrough: a request reaches a backend through the gateway.
func (ch *checker) passThrough(ctx context.Context) checkResult {
	r := checkResult{name: "pass-through"}
	what := ch.cfg.method + " " + ch.cfg.path
	a, err := ch.send(ctx, ch.cfg.method, ch.target(ch.cfg.path), nil, ch.cfg.timeout)
	switch {
	case err != nil:
		r.detail = fmt.Sprintf("%s: %v", what, err)
	case checkAttempts(a) < 0:
		r.detail = fmt.Sprintf("%s → %s: not answered by the gateway (every answer of the gateway carries x-Attempts)%s", what, checkDescribe(a), ch.authHint(a))
	case a.header.Get("x-Gateway-Error") != "":
		r.detail = fmt.Sprintf("%s → %s: a gateway error, the backend was not reached", what, checkDescribe(a))
	case checkAttempts(a) < 1:
		r.detail = fmt.Sprintf("%s → %s: want at least one attempt", what, checkDescribe(a))
	case a.status >= 500:
		r.detail = fmt.Sprintf("%s → %s: the backend answered with a server error", what, checkDescribe(a))
	default:
		r.ok, r.detail = true, fmt.Sprintf("%s → %s", what, checkDescribe(a))
	}
	return r
}

// authHint says what a refusal of the front door wants: a 403 without
// x-Attempts is how an AWS_IAM Function URL refuses a request, a 401 how
// App Service Authentication (Return401) or the Functions host (authLevel
// function, no valid key) does.
func (ch *checker) authHint(a checkAnswer) string {
	c := ch.cfg
	switch {
	case a.status == http.StatusForbidden && !c.sigv4:
		return "; an AWS_IAM Function URL wants --aws-sigv4"
	case a.status == http.StatusForbidden:
		return "; the signature was refused: check the AWS credentials, --region and the caller's lambda:InvokeFunctionUrl permission"
	case a.status == http.StatusUnauthorized && c.entraScope == "" && c.functionKey == "":
		return "; the Azure gateway wants a credential: --entra-scope api://<client-id>/.default (authentication = entra) and --function-key (the package's authLevel function)"
	case a.status == http.StatusUnauthorized && a.header.Get("WWW-Authenticate") != "" && c.entraScope == "":
		return "; App Service Authentication wants a token: --entra-scope api://<client-id>/.default"
	case a.status == http.StatusUnauthorized && c.functionKey == "":
		return "; the token was refused or a function key is wanted: check --entra-scope is the module's entra_client_id, and give --function-key"
	case a.status == http.StatusUnauthorized:
		return "; refused: check the function key (az functionapp keys list) and, with --entra-scope, that the token's audience is the module's entra_client_id"
	}
	return ""
}

// ttlProbe: a request whose S7PTTL must expire answers TTLExpired on time.
func (ch *checker) ttlProbe(ctx context.Context) checkResult {
	r := checkResult{name: "ttl"}
	if ch.cfg.slowPath == "" {
		what := ch.cfg.method + " " + ch.cfg.path + " with S7PTTL: 0"
		a, err := ch.send(ctx, ch.cfg.method, ch.target(ch.cfg.path), http.Header{"S7PTTL": {"0"}}, ch.cfg.timeout)
		switch {
		case err != nil:
			r.detail = fmt.Sprintf("%s: %v", what, err)
		case a.status != http.StatusPreconditionFailed || a.header.Get("x-Gateway-Error") != "TTLExpired" || checkAttempts(a) != 0:
			r.detail = fmt.Sprintf("%s → %s; want 412 TTLExpired, x-Attempts: 0 (expired before any attempt)", what, checkDescribe(a))
		default:
			r.ok, r.detail = true, fmt.Sprintf("%s → %s (expired before any attempt; --slow-path checks a TTL that runs out during one)", what, checkDescribe(a))
		}
		return r
	}
	what := fmt.Sprintf("%s %s with S7PTTL: %s", ch.cfg.method, ch.cfg.slowPath, ch.cfg.ttlText)
	wait := max(ch.cfg.timeout, ch.cfg.ttl+ch.cfg.tolerance+5*time.Second)
	a, err := ch.send(ctx, ch.cfg.method, ch.target(ch.cfg.slowPath), http.Header{"S7PTTL": {ch.cfg.ttlText}}, wait)
	if err != nil {
		r.detail = fmt.Sprintf("%s: %v", what, err)
		return r
	}
	// The TTL clock starts when the platform accepted the request, after
	// it was sent: the answer cannot come before --ttl (less timer slack).
	early, late := ch.cfg.ttl-20*time.Millisecond, ch.cfg.ttl+ch.cfg.tolerance
	want := fmt.Sprintf("want 504 TTLExpired between %s and %s", checkRound(ch.cfg.ttl), checkRound(late))
	code := a.header.Get("x-Gateway-Error")
	switch {
	case code != "TTLExpired" || (a.status != http.StatusGatewayTimeout && a.status != http.StatusPreconditionFailed):
		hint := ""
		if a.status < 300 {
			hint = fmt.Sprintf("; is %s slower than %ss?", ch.cfg.slowPath, ch.cfg.ttlText)
		}
		r.detail = fmt.Sprintf("%s → %s; %s%s", what, checkDescribe(a), want, hint)
	case a.status == http.StatusGatewayTimeout && checkAttempts(a) < 1, a.status == http.StatusPreconditionFailed && checkAttempts(a) != 0:
		r.detail = fmt.Sprintf("%s → %s; 504 follows an attempt, 412 none", what, checkDescribe(a))
	case a.took < early || a.took > late:
		r.detail = fmt.Sprintf("%s → %s; %s", what, checkDescribe(a), want)
	case a.status == http.StatusPreconditionFailed:
		r.ok, r.detail = true, fmt.Sprintf("%s → %s (expired before any attempt started)", what, checkDescribe(a))
	default:
		r.ok, r.detail = true, fmt.Sprintf("%s → %s", what, checkDescribe(a))
	}
	return r
}

// checkAccepted is the part of a 202's body the probe reads.
type checkAccepted struct {
	ID        string `json:"id"`
	StatusURI string `json:"statusUri"`
}

// asyncProbe: an async request answers 202 and is followed, through its
// status URI, to its result.
func (ch *checker) asyncProbe(ctx context.Context) checkResult {
	r := checkResult{name: "async"}
	what := fmt.Sprintf("%s %s with S7PAsyncMode: true, X-UserProfile: %s", ch.cfg.method, ch.cfg.asyncPath, ch.cfg.profile)
	a, err := ch.send(ctx, ch.cfg.method, ch.target(ch.cfg.asyncPath),
		http.Header{"S7PAsyncMode": {"true"}, "X-UserProfile": {ch.cfg.profile}}, ch.cfg.timeout)
	if err != nil {
		r.detail = fmt.Sprintf("%s: %v", what, err)
		return r
	}
	if a.status != http.StatusAccepted {
		hint := ""
		if a.status < 300 {
			hint = "; is the path slower than AsyncTriggerTimeout, AsyncModeEnabled=true and the profile's async-config enabled?"
		}
		r.detail = fmt.Sprintf("%s → %s; want 202 Accepted%s", what, checkDescribe(a), hint)
		return r
	}
	var acc checkAccepted
	_ = json.Unmarshal(a.body, &acc)
	statusURI := a.header.Get("Location")
	if statusURI == "" {
		statusURI = acc.StatusURI
	}
	su, err := ch.cfg.base.Parse(statusURI)
	if statusURI == "" || err != nil {
		r.detail = fmt.Sprintf("%s → 202 without a status URI (Location)", what)
		return r
	}
	start := time.Now()
	deadline := start.Add(ch.cfg.wait)
	polls := 0
	for {
		s, err := ch.send(ctx, http.MethodGet, su.String(), nil, ch.cfg.timeout)
		polls++
		if err != nil {
			r.detail = fmt.Sprintf("%s → 202; status URI: %v", what, err)
			return r
		}
		if s.status != http.StatusAccepted {
			return ch.asyncResult(ctx, what, a, su, s, time.Since(start), polls)
		}
		pause := time.Second
		if n, err := strconv.Atoi(strings.TrimSpace(s.header.Get("Retry-After"))); err == nil {
			pause = min(max(time.Duration(n)*time.Second, 100*time.Millisecond), 5*time.Second)
		}
		if time.Now().Add(pause).After(deadline) {
			r.detail = fmt.Sprintf("%s → 202; still pending after %s (%d polls); want a result within --wait %s", what, checkRound(time.Since(start)), polls, ch.cfg.wait)
			return r
		}
		select {
		case <-ctx.Done():
			r.detail = fmt.Sprintf("%s → 202; %v", what, ctx.Err())
			return r
		case <-time.After(pause):
		}
	}
}

// asyncResult judges the status URI's final answer s: the result itself,
// or 303 to its data URL (read unsigned unless it is the gateway's own).
func (ch *checker) asyncResult(ctx context.Context, what string, acc checkAnswer, su *url.URL, s checkAnswer, after time.Duration, polls int) checkResult {
	r := checkResult{name: "async"}
	head := fmt.Sprintf("%s → 202 in %s; status URI after %s (%d polls): ", what, checkRound(acc.took), checkRound(after), polls)
	if s.status == http.StatusSeeOther {
		loc, err := su.Parse(s.header.Get("Location"))
		if err != nil || s.header.Get("Location") == "" {
			r.detail = head + "303 without a usable Location"
			return r
		}
		d, err := ch.send(ctx, http.MethodGet, loc.String(), nil, ch.cfg.timeout)
		if err != nil {
			r.detail = head + fmt.Sprintf("303; reading the result: %v", err)
			return r
		}
		if d.status != http.StatusOK {
			r.detail = head + fmt.Sprintf("303; the data URL answered %d: %.200s", d.status, bytes.TrimSpace(d.body))
			return r
		}
		r.ok, r.detail = true, head+fmt.Sprintf("303 to the data URL, %d bytes of result", len(d.body))
		return r
	}
	if code := s.header.Get("x-Gateway-Error"); code != "" || s.status >= 500 {
		r.detail = head + checkDescribe(s) + "; the request failed"
		return r
	}
	r.ok, r.detail = true, head+fmt.Sprintf("%d, %d bytes of result", s.status, len(s.body))
	return r
}

package ops

import (
	"strings"
	"testing"
	"time"
)

// runExplainWith runs explain with env as its whole environment.
func runExplainWith(tb testing.TB, env map[string]string, args ...string) (code int, stdout, stderr string) {
	tb.Helper()
	lookup := func(name string) (string, bool) { v, ok := env[name]; return v, ok }
	var out, errOut strings.Builder
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	code = Explain(args, lookup, now, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestExplainSeedExample(t *testing.T) {
	code, out, errOut := runExplainWith(t, nil, "--ttl", "60", "--timeout", "45000", "--queue-wait", "5s", "--attempts", "timeout,timeout")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q; want 0 and nothing", code, errOut)
	}
	want := `settings: TTL 60 s; Timeout 45000 ms from --timeout; MaxAttempts 2 (unset: one per --attempts entry); queue wait 5 s; no execution limit; backoff base 25 ms (worst-case waits)

t(s)    event
0.000   request arrives; TTL deadline at 60.000 (DefaultTTLSecs=60 from --ttl)
5.000   queue wait over (5.000 s)
5.000   attempt 1 starts; window 45.000 s (bounded by Timeout)
50.000  attempt 1 ends: timeout (its Timeout fired)
50.000  backoff wait 0.025 s (worst case for retry 1)
50.025  attempt 2 starts; window 9.975 s (bounded by TTL)
60.000  attempt 2 ends: timeout (the TTL fired)
60.000  answer: 504 TTLExpired — the TTL ran out during attempt 2
hint: budgets do not nest: 2 attempts × Timeout 45.000 s = 90.000 s do not fit in the 55.000 s the TTL leaves after the 5.000 s queue wait, so a later attempt gets only what is left
`
	if out != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", out, want)
	}
}

func TestExplainSources(t *testing.T) {
	seedEnv := map[string]string{"DefaultTTLSecs": "60", "Timeout": "45000", "MaxAttempts": "2"}
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want []string // lines or parts of lines of stdout
	}{
		{"environment", seedEnv, []string{"--queue-wait", "5s"}, []string{
			"TTL deadline at 60.000 (DefaultTTLSecs=60 from the environment)",
			"Timeout 45000 ms from the environment; MaxAttempts 2 from the environment;",
			"answer: 504 TTLExpired — the TTL ran out during attempt 2",
		}},
		{"upper-case environment", map[string]string{"DEFAULTTTLSECS": "60", "TIMEOUT": "45000"}, nil, []string{
			"(DefaultTTLSecs=60 from the environment)", "Timeout 45000 ms from the environment",
		}},
		{"flags override the environment", seedEnv, []string{"--ttl", "120", "--max-attempts", "3"}, []string{
			"(DefaultTTLSecs=120 from --ttl)", "MaxAttempts 3 from --max-attempts",
			"90.075   attempt 3 starts; window 29.925 s (bounded by TTL)",
		}},
		{"defaults", nil, nil, []string{
			"TTL deadline at 300.000 (DefaultTTLSecs=300 by default)",
			"0.000    attempt 1 starts; window 300.000 s (bounded by TTL)",
			"hint: the TTL (300.000 s) is shorter than Timeout (1200.000 s)",
		}},
		{"S7PTTL overrides DefaultTTLSecs", seedEnv, []string{"--s7pttl", "2.5"}, []string{
			"TTL deadline at 2.500 (S7PTTL=2.5, overriding DefaultTTLSecs=60)",
			"2.500  answer: 504 TTLExpired — the TTL ran out during attempt 1",
		}},
		{"S7PTTL 0 is 412", seedEnv, []string{"--s7pttl", "0"}, []string{
			"answer: 412 TTLExpired — the TTL (0.000 s) was over before any attempt started",
		}},
		{"S7PTTL absolute", nil, []string{"--s7pttl", "2025-01-01T00:00:30Z", "--timeout", "10000"}, []string{
			"TTL deadline at 30.000 (S7PTTL=2025-01-01T00:00:30Z, overriding DefaultTTLSecs=300)",
		}},
		{"S7PTimeout overrides Timeout", seedEnv, []string{"--s7ptimeout", "500"}, []string{
			"Timeout 500 ms from S7PTimeout, overriding Timeout=45000",
			"window 0.500 s (bounded by Timeout)",
		}},
		{"Hosts sets the attempts", map[string]string{"Hosts": "http://a.test,http://b.test,http://c.test"}, []string{"--ttl", "10", "--timeout", "1000"}, []string{
			"MaxAttempts 3, one per host of Hosts",
			"attempt 3 ends: timeout",
			"answer: 504 AttemptTimeout",
		}},
		{"execution limit", map[string]string{"FunctionTimeoutSecs": "30"}, []string{"--ttl", "60", "--timeout", "45000"}, []string{
			"execution limit 30 s from the environment, margin 1000 ms",
			"0.000   execution limit at 29.000 (function timeout 30.000 s less the 1.000 s margin)",
			"window 29.000 s (bounded by the execution limit)",
			"answer: 504 FunctionLimit",
		}},
		{"POST without key", nil, []string{"--ttl", "60", "--timeout", "10000", "--max-attempts", "3", "--method", "post"}, []string{
			"a POST without a client Idempotency-Key is not retried after a timeout",
		}},
		{"backoff", nil, []string{"--ttl", "2", "--timeout", "500", "--queue-wait", "400ms", "--max-attempts", "3", "--backoff", "100"}, []string{
			"1.500  backoff wait 0.200 s (worst case for retry 2)",
			"1.700  attempt 3 starts; window 0.300 s (bounded by TTL)",
		}},
		{"refused after a 503", nil, []string{"--ttl", "60", "--timeout", "45000", "--attempts", "503@2s,refused"}, []string{
			"2.025  attempt 2 ends: connection refused",
			"answer: 502 BackendUnavailable",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runExplainWith(t, tc.env, tc.args...)
			if code != 0 || errOut != "" {
				t.Fatalf("exit %d, stderr %q; want 0 and nothing", code, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestExplainBadValues(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string // the whole stderr line
	}{
		{"ttl", nil, []string{"--ttl", "abc"}, `explain: --ttl "abc": want a positive number of seconds, such as 300 or 2.5`},
		{"ttl zero", nil, []string{"--ttl", "0"}, `explain: --ttl "0": want a positive number of seconds, such as 300 or 2.5`},
		{"timeout", nil, []string{"--timeout", "1.5s"}, `explain: --timeout "1.5s": want a positive whole number of milliseconds, such as 30000`},
		{"s7pttl", nil, []string{"--s7pttl", "soon"}, `explain: --s7pttl "soon": want seconds (300 or 2.5), +<unix seconds>, or an ISO 8601 time such as 2024-12-31T23:59:59Z`},
		{"s7ptimeout", nil, []string{"--s7ptimeout", "-5"}, `explain: --s7ptimeout "-5": want a positive number of milliseconds, such as 5000`},
		{"queue-wait", nil, []string{"--queue-wait", "5"}, `explain: --queue-wait "5": want a duration of zero or more, such as 5s or 250ms`},
		{"function-timeout", nil, []string{"--function-timeout", "x"}, `explain: --function-timeout "x": want a positive number of seconds, such as 300 or 2.5`},
		{"margin too large", nil, []string{"--function-timeout", "1", "--margin", "1000"}, `explain: --margin "1000": want fewer ms than the function timeout of 1s`},
		{"max-attempts", nil, []string{"--max-attempts", "0"}, `explain: --max-attempts "0": want a positive whole number`},
		{"max-attempts too many", nil, []string{"--max-attempts", "5000"}, `explain: --max-attempts "5000": want a whole number from 1 to 1000`},
		{"attempts", nil, []string{"--attempts", "timeout,5x3"}, `explain: --attempts "timeout,5x3": attempt 2 "5x3": want timeout, refused[@d], reset[@d], ok[@d] or a status such as 503@2s, with d a duration such as 2s or 250ms`},
		{"backoff", nil, []string{"--backoff", "-1"}, `explain: --backoff "-1": want a positive whole number of milliseconds, such as 30000`},
		{"method", nil, []string{"--method", "GE T"}, `explain: --method "GE T": want an HTTP method such as GET or POST`},
		{"unknown flag", nil, []string{"--ttll", "5"}, `explain: flag provided but not defined: -ttll; run gateway explain -h for the flags`},
		{"argument", nil, []string{"60"}, `explain: unexpected argument "60"; want flags only, such as --ttl 60`},
		{"environment", map[string]string{"Timeout": "45s"}, nil, `explain: setting Timeout="45s": want a positive whole number of milliseconds, such as 30000`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runExplainWith(t, tc.env, tc.args...)
			if code != 2 {
				t.Errorf("exit = %d, want 2", code)
			}
			if out != "" {
				t.Errorf("stdout = %q, want nothing", out)
			}
			if got := strings.TrimSuffix(errOut, "\n"); got != tc.want {
				t.Errorf("stderr:\n got %q\nwant %q", errOut, tc.want)
			}
		})
	}
}

func TestExplainHelp(t *testing.T) {
	code, out, errOut := runExplainWith(t, nil, "-h")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q; want 0 and nothing", code, errOut)
	}
	for _, w := range []string{"usage: gateway explain [flags]", "-queue-wait", "-s7pttl", "-attempts"} {
		if !strings.Contains(out, w) {
			t.Errorf("help lacks %q:\n%s", w, out)
		}
	}
}

// TestExplainHedged draws a hedged timeline: the second attempt starts
// beside the first when its Timeout fires, the first answers, the second
// is cancelled then.
func TestExplainHedged(t *testing.T) {
	code, out, errOut := runExplainWith(t, nil, "--ttl", "10", "--timeout", "1000", "--max-attempts", "3", "--hedge", "--attempts", "ok@1.5s,timeout")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"1.000  attempt 2 starts beside attempt 1, whose Timeout fired (hedge)",
		"1.500  attempt 1 ends: answered 200",
		"1.500  attempt 2 ends: cancelled, still running when the request ended",
		"1.500  answer: 200 from the backend, passed through",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	_, out, _ = runExplainWith(t, nil, "--ttl", "10", "--timeout", "1000", "--max-attempts", "3", "--hedge", "--method", "POST")
	if !strings.Contains(out, "--hedge has no effect") || strings.Contains(out, "beside") {
		t.Errorf("a POST without a key hedged:\n%s", out)
	}
}

// TestExplainCallerDeadline: an incoming grpc-timeout or
// x-envoy-expected-rq-timeout-ms shorter than the TTL shortens it, and
// explain says so; a longer one changes nothing; a bad one names its flag.
func TestExplainCallerDeadline(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--ttl", "60", "--grpc-timeout", "1500m"}, 0, "TTL deadline at 1.500 (grpc-timeout: 1500m (the caller's deadline), shortening DefaultTTLSecs=60 from --ttl)"},
		{[]string{"--ttl", "1", "--envoy-timeout-ms", "5000"}, 0, "the caller's x-envoy-expected-rq-timeout-ms: 5000 is later and changes nothing"},
		{[]string{"--envoy-timeout-ms", "1.5"}, 2, `--envoy-timeout-ms "1.5"`},
		{[]string{"--retry-on", "500", "--attempts", "500@1s,ok"}, 0, "answer: 200 from the backend"},
	} {
		var out, errOut strings.Builder
		code := Explain(tt.args, noEnv, time.Unix(1700000000, 0), &out, &errOut)
		if code != tt.code || !strings.Contains(out.String()+errOut.String(), tt.want) {
			t.Errorf("explain %v = %d\n%s%s\nwant %d and %q", tt.args, code, out.String(), errOut.String(), tt.code, tt.want)
		}
	}
}

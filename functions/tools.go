package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"fngateway/core"
	"fngateway/core/async"
	"fngateway/internal/ops"
	"fngateway/internal/settings"
)

// The operator commands of internal/ops, wired to what this binary has:
// explain to the settings, check to infra's signers (each cloud's only in
// a build that links it), deadletters to the stores the gateway opens.

// runExplain is `gateway explain [flags]` over the settings in force.
func runExplain(args []string, stdout, stderr io.Writer) int {
	env, err := explainEnv(context.Background(), os.LookupEnv)
	if err != nil {
		fmt.Fprintf(stderr, "explain: %v\n", err)
		return 2
	}
	return ops.Explain(args, env, time.Now(), stdout, stderr)
}

// explainEnv is the environment with, when SettingsSource names a source,
// its document laid over it: the settings a gateway started now would
// have in force.
func explainEnv(ctx context.Context, env func(string) (string, bool)) (func(string) (string, bool), error) {
	spec, ok := env(settings.SourceSetting)
	if !ok || strings.TrimSpace(spec) == "" {
		return env, nil
	}
	src, err := openSettingsSource(ctx, strings.TrimSpace(spec))
	if err != nil {
		return nil, &core.SettingError{Name: settings.SourceSetting, Value: settings.Redact(spec), Want: err.Error()}
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	doc, err := src.Read(rctx, "")
	if err != nil {
		return nil, &core.SettingError{Name: settings.SourceSetting, Value: src.String(), Want: "cannot read it: " + err.Error()}
	}
	if doc == nil {
		doc = &settings.Document{}
	}
	return func(name string) (string, bool) {
		if v, ok := doc.Values[name]; ok {
			return v, true
		}
		return env(name)
	}, nil
}

// runCheck is `gateway check [flags] <URL>`.
func runCheck(args []string, stdout, stderr io.Writer) int {
	return checkCmd(context.Background(), args, stdout, stderr)
}

// checkCmd is runCheck with its context given.
func checkCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return ops.Check(ctx, args, cloudSigners{}, stdout, stderr)
}

// cloudSigners are the signers of this build's clouds: ops.Signers over
// sigv4Signer (aws.go) and entraSigner (azure.go).
type cloudSigners struct{}

func (cloudSigners) SigV4(ctx context.Context, region string) (core.Authorizer, error) {
	return sigv4Signer(ctx, region)
}

func (cloudSigners) Entra(ctx context.Context, scope string) (core.Authorizer, error) {
	return entraSigner(ctx, scope)
}

// runDeadLetters is `gateway deadletters …` over the stores the
// environment's settings name.
func runDeadLetters(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return deadLettersCmd(ctx, args, os.LookupEnv, time.Now(), stdout, stderr)
}

// deadLettersCmd is runDeadLetters with its environment (looked up as
// named, then in upper case), clock and streams given.
func deadLettersCmd(ctx context.Context, args []string, env func(string) (string, bool), now time.Time, stdout, stderr io.Writer) int {
	return ops.DeadLetters(ctx, args, envLetters(env), now, stdout, stderr)
}

// envLetters are the dead letters of the stores the settings in the
// environment name: ops.Letters over openDeadLetters.
type envLetters func(string) (string, bool)

func (envLetters) CheckDLQ(url string) error { return checkSQSQueueURL(url) }

func (env envLetters) Open(ctx context.Context, dlq string) (*async.Redriver, string, error) {
	return openDeadLetters(ctx, env, dlq)
}

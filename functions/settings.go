package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"fngateway/core"
	"fngateway/internal/settings"
)

// loadSettings reads the settings in force at start-up from the
// environment, as openSettings does, without keeping a Reloader.
func loadSettings(hostLimit time.Duration) (*settings.Settings, time.Duration, error) {
	s, limit, _, err := openSettings(context.Background(), hostLimit, nil)
	return s, limit, err
}

// openSettings reads the settings in force at start-up from the
// environment (openSettingsFrom).
func openSettings(ctx context.Context, hostLimit time.Duration, logger *slog.Logger) (*settings.Settings, time.Duration, *settings.Reloader, error) {
	return openSettingsFrom(ctx, os.LookupEnv, hostLimit, logger)
}

// openSettingsFrom reads the settings in force at start-up, as
// docs/settings.md#settings names them: env (os.LookupEnv, or the demo's
// defaults under it) and, when SettingsSource names a source, its document
// laid over it; it validates them against the execution limit the host
// imposes (hostLimit, zero for none) and the memory the body budgets may
// use. The Reloader it returns keeps them: its Run polls the source. The
// error is one line naming the setting, its value and what is expected.
//
// The collector's pace is set here first, from the host's memory
// (tuneGC): the body budgets are held against what the collector may use,
// the soft memory limit, not all of the host's memory.
func openSettingsFrom(ctx context.Context, env func(string) (string, bool), hostLimit time.Duration, logger *slog.Logger) (*settings.Settings, time.Duration, *settings.Reloader, error) {
	lookup := settings.EnvLookup(env)
	mem, memSource, err := hostMemory(lookup)
	if err != nil {
		return nil, 0, nil, err
	}
	gc, err := tuneGC(env, mem, memSource)
	if err != nil {
		return nil, 0, nil, err
	}
	rules := settings.Rules{HostLimit: hostLimit}
	rules.MemBound, rules.MemSource = gc.bodyBound(mem, memSource)
	r := &settings.Reloader{Env: env, Rules: rules, Logger: logger, Interval: 30 * time.Second}
	if spec, ok := lookup(settings.SourceSetting); ok && strings.TrimSpace(spec) != "" {
		src, err := openSettingsSource(ctx, strings.TrimSpace(spec))
		if err != nil {
			return nil, 0, nil, &core.SettingError{Name: settings.SourceSetting, Value: settings.Redact(spec), Want: err.Error()}
		}
		r.Source = src
		if v, ok := lookup(settings.RefreshSetting); ok {
			if r.Interval, err = settings.ParseRefresh(strings.TrimSpace(v)); err != nil {
				return nil, 0, nil, err
			}
		}
		if v, ok := lookup(settings.OptionalSetting); ok {
			var b settings.Bool
			if err := b.Decode(v); err != nil {
				return nil, 0, nil, &core.SettingError{Name: settings.OptionalSetting, Value: v, Want: err.Error()}
			}
			r.Optional = bool(b)
		}
	}
	s, limit, err := r.Start(ctx)
	if err != nil {
		return nil, 0, nil, err
	}
	return s, limit, r, nil
}

// openSettingsSource opens the source SettingsSource names: a document in
// S3 (the SDK's default chain: the function role, AWS_REGION,
// AWS_ENDPOINT_URL_S3) or in Blob storage (a SAS in the URL, the account
// key of AzureWebJobsStorage for the same account, or the managed
// identity), or what internal/settings opens itself (file:).
func openSettingsSource(ctx context.Context, spec string) (settings.Source, error) {
	switch {
	case strings.HasPrefix(spec, "s3://"):
		return s3SettingsSource(ctx, spec)
	case strings.Contains(spec, "Endpoint=") && strings.Contains(spec, "Secret="):
		// An App Configuration access key: for development, as the
		// service's own connection strings.
		endpoint, id, secret, err := settings.ParseAppConfigConnectionString(spec)
		if err != nil {
			return nil, err
		}
		return appConfiguration(endpoint, settings.HMACSigner(id, secret, time.Now)), nil
	case strings.HasPrefix(spec, "https://") && strings.HasSuffix(strings.TrimRight(hostOf(spec), "."), ".azconfig.io"):
		// An App Configuration store, read with the managed identity (App
		// Configuration Data Reader).
		return appConfigurationWithIdentity(spec)
	case strings.HasPrefix(spec, "https://") || strings.HasPrefix(spec, "http://"):
		return blobSettingsSource(spec)
	}
	return settings.Open(spec, os.LookupEnv)
}

// appConfiguration is the App Configuration store at endpoint, with the
// key prefix (SettingsKeyPrefix) and label (SettingsLabel) the environment
// gives.
func appConfiguration(endpoint string, authorize func(context.Context, *http.Request) error) *settings.AppConfiguration {
	a := &settings.AppConfiguration{Endpoint: endpoint, Prefix: settings.DefaultPrefix, Authorize: authorize}
	if v, ok := lookup(settings.PrefixSetting); ok && v != "" {
		a.Prefix = v
	}
	a.Label, _ = lookup(settings.LabelSetting)
	return a
}

// hostOf is the host of a URL, or "".
func hostOf(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// lookup reads a setting from the environment as the settings are read
// (settings.EnvLookup: under its name, then in upper case).
func lookup(name string) (string, bool) {
	return settings.EnvLookup(os.LookupEnv)(name)
}

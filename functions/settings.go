package main

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/kelseyhightower/envconfig"

	"fngateway/core"
)

// loadSettings reads the app settings from the environment, as docs/settings.md#settings
// names them, and validates them against the execution limit the host
// imposes (hostLimit, zero for none). The error is one line naming the
// setting, its value and what is expected.
func loadSettings(hostLimit time.Duration) (*core.Settings, time.Duration, error) {
	var s core.Settings
	// envconfig looks names up in upper case; the settings are mixed case
	// (Hosts, DefaultTTLSecs) as the seed proxy names them, so mirror each
	// given setting under its upper-case name first.
	t := reflect.TypeOf(s)
	for i := range t.NumField() {
		name := t.Field(i).Name
		up := strings.ToUpper(name)
		v, ok := os.LookupEnv(name)
		if !ok || up == name {
			continue
		}
		if other, set := os.LookupEnv(up); set && other != v {
			return nil, 0, &core.SettingError{Name: name, Value: v, Want: fmt.Sprintf("want one value: %s is also set, to %q", up, other)}
		}
		os.Setenv(up, v)
	}
	if v, ok := lookup("Hosts"); !ok || strings.TrimSpace(v) == "" {
		return nil, 0, &core.SettingError{Name: "Hosts", Value: v, Want: "want one or more comma-separated backend base URLs (required)"}
	}
	if err := envconfig.Process("", &s); err != nil {
		var pe *envconfig.ParseError
		if errors.As(err, &pe) {
			return nil, 0, &core.SettingError{Name: pe.FieldName, Value: pe.Value, Want: pe.Err.Error()}
		}
		return nil, 0, fmt.Errorf("settings: %w", err)
	}
	limit := hostLimit
	if s.FunctionTimeoutSecs > 0 {
		if hostLimit > 0 && s.FunctionTimeoutSecs.D() > hostLimit {
			return nil, 0, &core.SettingError{Name: "FunctionTimeoutSecs", Value: fmt.Sprint(s.FunctionTimeoutSecs.D().Seconds()),
				Want: fmt.Sprintf("want at most the host's own limit of %s", hostLimit)}
		}
		limit = s.FunctionTimeoutSecs.D()
	}
	explicit := func(name string) bool { _, ok := lookup(name); return ok }
	if err := s.Validate(limit, explicit); err != nil {
		return nil, 0, err
	}
	// The body budgets are held against what the collector may use: the
	// soft memory limit, not all of the host's memory.
	mem, source, err := hostMemory(lookup)
	if err != nil {
		return nil, 0, err
	}
	gc, err := tuneGC(os.LookupEnv, mem, source)
	if err != nil {
		return nil, 0, err
	}
	bound, boundSource := gc.bodyBound(mem, source)
	if err := s.CheckMemory(bound, boundSource, explicit); err != nil {
		return nil, 0, err
	}
	return &s, limit, nil
}

func lookup(name string) (string, bool) {
	if v, ok := os.LookupEnv(name); ok {
		return v, true
	}
	return os.LookupEnv(strings.ToUpper(name))
}

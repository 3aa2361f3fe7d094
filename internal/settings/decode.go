// Package settings is the gateway's settings: the Settings struct (one
// field per app setting), the types that parse each setting's text and say
// what they expect, the checks that hold them together and against the
// host's limits, and where they come from — the environment at start-up
// and, while the gateway runs, a settings source (SettingsSource) whose
// WARM settings are reloaded without a restart. core never imports it:
// core takes routes (core.NewRouter, from Settings.Router) and the
// engine's options (core.Forwarder's fields), built from a validated
// *Settings by the edge (functions/).
//
// One set of rules validates both: Decode and Rules.Check are what the
// start-up runs on the environment, and what a reload runs on the
// environment with the source's document laid over it.
package settings

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"fngateway/core"
)

// Lookup returns the text of a setting and whether it is given.
type Lookup func(name string) (string, bool)

// EnvLookup reads a setting from env (os.LookupEnv) under its name or, as
// envconfig spells it, in upper case. Both given with different values is
// an error, reported by Decode.
func EnvLookup(env func(string) (string, bool)) Lookup {
	return func(name string) (string, bool) {
		if v, ok := env(name); ok {
			return v, true
		}
		return env(strings.ToUpper(name))
	}
}

// Names are the settings of Settings, in the struct's order.
func Names() []string {
	t := reflect.TypeFor[Settings]()
	var out []string
	for i := range t.NumField() {
		if t.Field(i).IsExported() {
			out = append(out, t.Field(i).Name)
		}
	}
	return out
}

// Decode reads every setting of Settings through lookup, as the
// start-up always has: a given value (even an empty one) is parsed by its
// type's Decode method, an absent one takes the field's `default` tag, and
// Hosts is required. It returns one *core.SettingError per setting that
// does not parse, in the struct's order; the settings are nil then.
func Decode(lookup Lookup, env func(string) (string, bool)) (*Settings, []error) {
	var s Settings
	v := reflect.ValueOf(&s).Elem()
	t := v.Type()
	var errs []error
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := f.Name
		text, ok := lookup(name)
		if env != nil {
			// One value per setting: the name and its upper-case spelling
			// must agree when both are in the environment.
			up := strings.ToUpper(name)
			a, aok := env(name)
			b, bok := env(up)
			if up != name && aok && bok && a != b {
				errs = append(errs, &core.SettingError{Name: name, Value: a, Want: fmt.Sprintf("want one value: %s is also set, to %q", up, b)})
				continue
			}
		}
		if f.Tag.Get("required") == "true" && (!ok || strings.TrimSpace(text) == "") {
			errs = append(errs, &core.SettingError{Name: name, Value: text, Want: "want one or more comma-separated backend base URLs (required)"})
			continue
		}
		if !ok {
			def, hasDef := f.Tag.Lookup("default")
			if !hasDef {
				continue
			}
			text = def
		}
		if err := decodeField(v.Field(i), text); err != nil {
			errs = append(errs, &core.SettingError{Name: name, Value: text, Want: err.Error()})
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return &s, nil
}

// decodeField parses text into f: by its Decode method, or as a plain
// string.
func decodeField(f reflect.Value, text string) error {
	if d, ok := f.Addr().Interface().(interface{ Decode(string) error }); ok {
		return d.Decode(text)
	}
	if f.Kind() == reflect.String {
		f.SetString(text)
		return nil
	}
	return fmt.Errorf("no decoder for %s", f.Type())
}

// Rules are what the settings are held against beside their own syntax:
// the host's execution limit and the memory the body budgets may use. The
// start-up finds them once; every reload is checked against the same.
type Rules struct {
	// HostLimit is the host's execution limit; zero for none (yet).
	HostLimit time.Duration
	// MemBound bounds the body budgets (bytes); zero for none. MemSource
	// says where it comes from, for the error.
	MemBound  int64
	MemSource string
}

// Check validates s, read through lookup, as the start-up does: the
// execution limit (FunctionTimeoutSecs may only shorten the host's), the
// settings' nesting under it (Settings.Validate) and the body budgets
// against the memory (Settings.CheckMemory). It returns the execution
// limit in force.
func (r Rules) Check(s *Settings, lookup Lookup) (time.Duration, error) {
	limit := r.HostLimit
	if s.FunctionTimeoutSecs > 0 {
		if r.HostLimit > 0 && s.FunctionTimeoutSecs.D() > r.HostLimit {
			return 0, &core.SettingError{Name: "FunctionTimeoutSecs", Value: fmt.Sprint(s.FunctionTimeoutSecs.D().Seconds()),
				Want: fmt.Sprintf("want at most the host's own limit of %s", r.HostLimit)}
		}
		limit = s.FunctionTimeoutSecs.D()
	}
	explicit := func(name string) bool { _, ok := lookup(name); return ok }
	if err := s.Validate(limit, explicit); err != nil {
		return 0, err
	}
	if err := s.CheckMemory(r.MemBound, r.MemSource, explicit); err != nil {
		return 0, err
	}
	return limit, nil
}

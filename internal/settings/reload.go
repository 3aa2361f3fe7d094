package settings

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"fngateway/core"
)

// Reloader keeps the settings in force: the environment, with the
// source's document laid over it, validated with the start-up's rules.
// Start reads the source once; Run polls it every Interval and hands each
// good new version to Apply. Its methods are safe for concurrent use.
type Reloader struct {
	// Source is polled; nil means the environment alone (no reload).
	Source Source
	// Env reads the environment (os.LookupEnv).
	Env func(string) (string, bool)
	// Rules are the start-up's: the execution limit and the memory.
	Rules Rules
	// Interval is SettingsRefreshSecs.
	Interval time.Duration
	// Optional is SettingsSourceOptional: a source that cannot be read at
	// start-up leaves the environment's settings in force.
	Optional bool
	// Apply swaps new settings in; an error refuses them. Called from
	// Refresh, one call at a time.
	Apply func(*Settings) error
	// Logger receives the reload's lines; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu      sync.Mutex
	inForce *Settings
	limit   time.Duration
	values  map[string]string // the source's values in force (COLD ones as at start-up)
	version string            // the version in force
	seen    string            // the last version read, good or bad
	pending map[string]string // COLD settings the source changed, as text
	told    string            // the pending set last logged
	refresh time.Time
	lastErr string
	// rejectedNow: lastErr is the rejection of the version the source still
	// holds, which an unchanged poll must not clear.
	rejectedNow bool
	failed      atomic.Int64 // settings_refresh_failed
	rejected    atomic.Int64 // settings_rejected
}

func (r *Reloader) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Reloader) logger() *slog.Logger {
	if r.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Logger
}

// lookup reads a setting from vals, then from the environment.
func (r *Reloader) lookup(vals map[string]string) Lookup {
	env := EnvLookup(r.Env)
	return func(name string) (string, bool) {
		if v, ok := vals[name]; ok {
			return v, true
		}
		return env(name)
	}
}

// Load decodes and checks vals over the environment with the start-up's
// rules: every setting that does not parse is returned, or the first
// check that fails.
func (r *Reloader) Load(vals map[string]string) (*Settings, time.Duration, []error) {
	lk := r.lookup(vals)
	s, errs := Decode(lk, r.Env)
	if len(errs) > 0 {
		return nil, 0, errs
	}
	limit, err := r.Rules.Check(s, lk)
	if err != nil {
		return nil, 0, []error{err}
	}
	return s, limit, nil
}

// Start reads the settings in force at start-up: the environment and, with
// a Source, its document over it (COLD settings included: nothing is bound
// yet). A source that cannot be read stops the start-up with an error
// naming it, unless Optional; a document that does not parse or validate
// stops it in any case.
func (r *Reloader) Start(ctx context.Context) (*Settings, time.Duration, error) {
	var vals map[string]string
	var version string
	if r.Source != nil {
		doc, err := r.Source.Read(ctx, "")
		var de *DocumentError
		switch {
		case errors.As(err, &de):
			return nil, 0, &core.SettingError{Name: SourceSetting, Value: r.Source.String(), Want: "its document: " + de.Error()}
		case err != nil && !r.Optional:
			return nil, 0, &core.SettingError{Name: SourceSetting, Value: r.Source.String(),
				Want: "cannot read it: " + err.Error() + " (SettingsSourceOptional=true starts on the environment's settings)"}
		case err != nil:
			r.failed.Add(1)
			r.lastErr = err.Error()
			r.logger().Warn("settings source unreachable at start-up; starting on the environment's settings",
				slog.String("source", r.Source.String()), slog.String("err", err.Error()))
		case doc != nil:
			vals, version = doc.Values, doc.Version
		}
		r.refresh = r.now()
	}
	s, limit, errs := r.Load(vals)
	if len(errs) > 0 {
		if r.Source != nil && vals != nil {
			var se *core.SettingError
			if errors.As(errs[0], &se) {
				se.Want += fmt.Sprintf(" (from %s, version %s)", r.Source.String(), version)
			}
		}
		return nil, 0, errs[0]
	}
	r.inForce, r.limit, r.values, r.version, r.seen = s, limit, vals, version, version
	return s, limit, nil
}

// Run polls the source every Interval until ctx ends; without a source it
// only waits for ctx to end.
func (r *Reloader) Run(ctx context.Context) {
	if r.Source == nil || r.Interval <= 0 {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(r.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.Refresh(ctx)
		}
	}
}

// Refresh polls the source once: one conditional read, and, when the
// document changed, a validated swap of the WARM settings it sets.
func (r *Reloader) Refresh(ctx context.Context) {
	r.mu.Lock()
	seen := r.seen
	r.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, max(r.Interval, 5*time.Second))
	doc, err := r.Source.Read(rctx, seen)
	cancel()
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refresh = now
	var de *DocumentError
	switch {
	case errors.As(err, &de):
		r.seen = de.Version
		r.reject(de.Version, []error{de.Err})
		return
	case err != nil:
		r.failed.Add(1)
		r.lastErr, r.rejectedNow = err.Error(), false
		r.logger().Warn("settings refresh failed; the settings in force stay", slog.String("source", r.Source.String()),
			slog.String("err", err.Error()), slog.Int64("settings_refresh_failed", r.failed.Load()))
		return
	case doc == nil:
		if !r.rejectedNow { // the rejected version is still the source's: its error stays
			r.lastErr = ""
		}
		return
	}
	r.seen = doc.Version
	// The whole document is held against the start-up's rules, COLD
	// settings included: a bad one refuses it whole.
	if _, _, errs := r.Load(doc.Values); len(errs) > 0 {
		r.reject(doc.Version, errs)
		return
	}
	// What is applied: the WARM settings of the document, the COLD ones
	// as they were at start-up.
	applied := map[string]string{}
	pending := map[string]string{}
	for name, v := range doc.Values {
		if Classes[name] == Warm {
			applied[name] = v
			continue
		}
		old, had := r.values[name]
		if had {
			applied[name] = old
		}
		if !had || old != v {
			pending[name] = v
		}
	}
	for name, old := range r.values {
		if _, still := doc.Values[name]; !still && Classes[name] != Warm {
			applied[name] = old
			pending[name] = "(unset in the source)"
		}
	}
	s, limit, errs := r.Load(applied)
	if len(errs) > 0 {
		// The WARM changes do not nest with the COLD settings in force.
		r.reject(doc.Version, errs)
		return
	}
	changed := changedNames(r.inForce, s)
	if len(changed) > 0 && r.Apply != nil {
		if err := r.Apply(s); err != nil {
			r.reject(doc.Version, []error{err})
			return
		}
	}
	r.lastErr, r.rejectedNow = "", false
	r.inForce, r.limit, r.values, r.version, r.pending = s, limit, applied, doc.Version, pending
	r.logger().Info("settings reloaded", slog.String("source", r.Source.String()), slog.String("version", doc.Version),
		slog.Any("changed", changed))
	if told := fmt.Sprint(slices.Sorted(maps.Keys(pending))); len(pending) > 0 && told != r.told {
		r.told = told
		r.logger().Warn("settings need a restart to take effect (COLD); not applied", slog.String("source", r.Source.String()),
			slog.String("version", doc.Version), slog.Any("pending", slices.Sorted(maps.Keys(pending))))
	}
}

// reject refuses a document whole: one line per bad setting, naming it and
// its value (a secret's value withheld).
func (r *Reloader) reject(version string, errs []error) {
	r.rejected.Add(1)
	var msgs []string
	for _, err := range errs {
		var se *core.SettingError
		if errors.As(err, &se) {
			shown := *se
			if Secret[se.Name] {
				shown.Value = "(secret)"
			}
			msgs = append(msgs, shown.Error())
			r.logger().Error("settings document rejected; the settings in force stay", slog.String("source", r.Source.String()),
				slog.String("version", version), slog.String("setting", se.Name), slog.String("value", shown.Value),
				slog.String("err", shown.Error()), slog.Int64("settings_rejected", r.rejected.Load()))
			continue
		}
		msgs = append(msgs, err.Error())
		r.logger().Error("settings document rejected; the settings in force stay", slog.String("source", r.Source.String()),
			slog.String("version", version), slog.String("err", err.Error()), slog.Int64("settings_rejected", r.rejected.Load()))
	}
	r.lastErr = fmt.Sprintf("version %s rejected: %s", version, joinErrs(msgs))
	r.rejectedNow = true
}

func joinErrs(msgs []string) string {
	out := ""
	for i, m := range msgs {
		if i > 0 {
			out += "; "
		}
		out += m
	}
	return out
}

// changedNames are the settings whose values differ between a and b.
func changedNames(a, b *Settings) []string {
	out := []string{}
	av, bv := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	for i := range av.NumField() {
		if av.Type().Field(i).IsExported() && !reflect.DeepEqual(av.Field(i).Interface(), bv.Field(i).Interface()) {
			out = append(out, av.Type().Field(i).Name)
		}
	}
	return out
}

// Settings returns the settings in force.
func (r *Reloader) Settings() *Settings {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inForce
}

// Counters are settings_refresh_failed and settings_rejected.
func (r *Reloader) Counters() map[string]int64 {
	return map[string]int64{"settings_refresh_failed": r.failed.Load(), "settings_rejected": r.rejected.Load()}
}

// ParseRefresh parses SettingsRefreshSecs: whole seconds, at least 1.
func ParseRefresh(v string) (time.Duration, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 || n > 86400 {
		return 0, &core.SettingError{Name: RefreshSetting, Value: v, Want: "want a whole number of seconds from 1 to 86400"}
	}
	return time.Duration(n) * time.Second, nil
}

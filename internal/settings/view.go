package settings

import (
	"encoding/json"
	"net/http"
	"reflect"
	"time"
)

// Setting is one setting in the settings view.
type Setting struct {
	// Value is the text in force ("" when unset); a secret's is withheld.
	Value string `json:"value"`
	// From is default, environment, or source with its version.
	From string `json:"from"`
	// Reload is WARM or COLD.
	Reload Class `json:"reload"`
}

// View is the GET /_gateway/settings document.
type View struct {
	Settings map[string]Setting `json:"settings"`
	// Pending are COLD settings the source changed: not applied until a
	// restart.
	Pending map[string]string `json:"pending"`
	Source  *SourceView       `json:"source,omitempty"`
}

// SourceView says how the source was last read.
type SourceView struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	RefreshSecs int64  `json:"refreshSecs"`
	LastRefresh string `json:"lastRefresh,omitempty"`
	LastError   string `json:"lastError,omitempty"`
	Failed      int64  `json:"settings_refresh_failed"`
	Rejected    int64  `json:"settings_rejected"`
}

// secretShown replaces a secret's value.
const secretShown = "(secret: set)"

// View returns the settings in force, where each came from and its class;
// never a secret's value.
func (r *Reloader) View() View {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := View{Settings: map[string]Setting{}, Pending: map[string]string{}}
	env := EnvLookup(r.Env)
	t := reflect.TypeFor[Settings]()
	for _, name := range Names() {
		st := Setting{Reload: Classes[name], From: "default"}
		if val, ok := r.values[name]; ok {
			st.Value, st.From = val, "source "+r.version
		} else if val, ok := env(name); ok {
			st.Value, st.From = val, "environment"
		} else if f, ok := t.FieldByName(name); ok {
			st.Value = f.Tag.Get("default")
		}
		if Secret[name] && st.Value != "" {
			st.Value = secretShown
		}
		v.Settings[name] = st
	}
	for name, val := range r.pending {
		if Secret[name] {
			val = secretShown
		}
		v.Pending[name] = val
	}
	if r.Source != nil {
		v.Settings[SourceSetting] = Setting{Value: r.Source.String(), From: "environment", Reload: Cold}
		sv := &SourceView{Name: r.Source.String(), Version: r.version, RefreshSecs: int64(r.Interval / time.Second),
			LastError: r.lastErr, Failed: r.failed.Load(), Rejected: r.rejected.Load()}
		if !r.refresh.IsZero() {
			sv.LastRefresh = r.refresh.UTC().Format(time.RFC3339Nano)
		}
		v.Source = sv
		for _, name := range []string{RefreshSetting, OptionalSetting, PrefixSetting, LabelSetting} {
			if val, ok := env(name); ok {
				v.Settings[name] = Setting{Value: val, From: "environment", Reload: Cold}
			}
		}
	}
	return v
}

// ServeHTTP answers GET /_gateway/settings with the View.
func (r *Reloader) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusMethodNotAllowed)
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "MethodNotAllowed", "message": "GET /_gateway/settings only"}})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(r.View())
}

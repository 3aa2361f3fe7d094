package settings

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// The source's own settings, read from the environment only (a document
// cannot move its own source).
const (
	SourceSetting   = "SettingsSource"
	RefreshSetting  = "SettingsRefreshSecs"
	OptionalSetting = "SettingsSourceOptional"
)

// maxDocument bounds a settings document: 1 MiB, as UserProfiles=file:.
const maxDocument = 1 << 20

// ParseDocument parses a settings document: a JSON object keyed by setting
// name (as Settings spells it). A value is a string (as in the
// environment), a number or a boolean (written as their JSON text), or, for
// Routes and UserProfiles, a JSON array (kept as its text). Unknown names,
// the source's own settings, null and duplicate keys are errors naming the
// key.
func ParseDocument(b []byte) (map[string]string, error) {
	if len(b) > maxDocument {
		return nil, fmt.Errorf("settings document: %d bytes; want at most %d", len(b), maxDocument)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("settings document: want a JSON object of settings ({\"DefaultTTLSecs\": 60, …})")
	}
	known := Names()
	out := map[string]string{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("settings document: %v", err)
		}
		name, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("settings document: setting %s: %v", quoteKey(name), err)
		}
		switch {
		case name == SourceSetting || name == RefreshSetting || name == OptionalSetting || name == PrefixSetting || name == LabelSetting:
			return nil, fmt.Errorf("settings document: setting %s: set it in the environment; a source cannot move itself", name)
		case !slices.Contains(known, name):
			return nil, fmt.Errorf("settings document: unknown setting %s", quoteKey(name))
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("settings document: setting %s appears twice", name)
		}
		v, err := documentValue(name, raw)
		if err != nil {
			return nil, fmt.Errorf("settings document: setting %s: %v", name, err)
		}
		out[name] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("settings document: %v", err)
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("settings document: want one JSON object, found more after it")
	}
	return out, nil
}

// documentValue is the text form of one value of a document.
func documentValue(name string, raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", fmt.Errorf("want a value, not null (leave the setting out to use the environment's)")
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		return s, nil
	case raw[0] == '[':
		if name != "Routes" && name != "UserProfiles" {
			return "", fmt.Errorf("want a string, number or boolean; only Routes and UserProfiles take a JSON array")
		}
		return string(raw), nil
	case raw[0] == '{':
		return "", fmt.Errorf("want a string, number or boolean, not an object")
	}
	return string(raw), nil // a number or true/false, as written
}

func quoteKey(k string) string {
	if len(k) > 64 {
		k = k[:64] + "…"
	}
	return fmt.Sprintf("%q", strings.ToValidUTF8(k, "?"))
}

package main

import (
	"os"
	"testing"
)

// TestDemoUnder: the demo's settings lie under the environment: a setting
// the user gave, under its name or in upper case, wins; the others are the
// demo's; and the process's environment is left as it was.
func TestDemoUnder(t *testing.T) {
	d := &demoSet{addrs: map[string]string{"fast": "http://127.0.0.1:1", "slow": "http://127.0.0.1:2", "flaky": "http://127.0.0.1:3"}}
	user := map[string]string{"ASYNCTRIGGERTIMEOUT": "2500", "Routes": "[]"}
	env := d.under(func(k string) (string, bool) { v, ok := user[k]; return v, ok })
	for _, tt := range []struct {
		name, want string
		ok         bool
	}{
		{"Hosts", "http://127.0.0.1:1", true}, // the demo's
		{"AsyncModeEnabled", "true", true},    // the demo's
		{"Routes", "[]", true},                // the user's, under its name
		{"AsyncTriggerTimeout", "", false},    // the user's is in upper case:
		{"ASYNCTRIGGERTIMEOUT", "2500", true}, // read there, as the settings read it
		{"HOSTS", "", false},                  // the demo gives its names only
		{"ListenAddr", "", false},             // neither
	} {
		if v, ok := env(tt.name); v != tt.want || ok != tt.ok {
			t.Errorf("env(%q) = %q, %v; want %q, %v", tt.name, v, ok, tt.want, tt.ok)
		}
	}
	if v, ok := os.LookupEnv("Hosts"); ok {
		t.Errorf("the process's environment has Hosts=%q; want the demo to set nothing", v)
	}
}

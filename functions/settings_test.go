package main

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"fngateway/core"
)

// TestSettingsDefaultsOneSource: the settings read from an environment
// with only Hosts are core.DefaultSettings plus Hosts, and a new setting is
// read from its name.
func TestSettingsDefaultsOneSource(t *testing.T) {
	// loadSettings mirrors each setting under its upper-case name with
	// os.Setenv: t.Setenv both names first, so both are restored.
	st := reflect.TypeOf(core.Settings{})
	for i := range st.NumField() {
		for _, n := range []string{st.Field(i).Name, strings.ToUpper(st.Field(i).Name)} {
			t.Setenv(n, "")
			os.Unsetenv(n)
		}
	}
	t.Setenv("Hosts", "http://127.0.0.1:9")
	s, _, err := loadSettings(0)
	if err != nil {
		t.Fatal(err)
	}
	want := core.DefaultSettings()
	want.Hosts = s.Hosts
	if !reflect.DeepEqual(*s, want) {
		t.Errorf("settings with only Hosts:\n%+v\nwant core.DefaultSettings():\n%+v", *s, want)
	}

	t.Setenv("PublicBaseURL", "https://api.example.com/gw/")
	t.Setenv("ClientBodyTimeoutMs", "5000")
	t.Setenv("MaxBufferedBytes", "1048576")
	s, _, err = loadSettings(0)
	if err != nil {
		t.Fatal(err)
	}
	if s.PublicBaseURL != "https://api.example.com/gw" || s.ClientBodyTimeoutMs.D().Milliseconds() != 5000 || s.MaxBufferedBytes != 1048576 {
		t.Errorf("PublicBaseURL %q, ClientBodyTimeoutMs %v, MaxBufferedBytes %d; want the values set", s.PublicBaseURL, s.ClientBodyTimeoutMs.D(), s.MaxBufferedBytes)
	}
	t.Setenv("PublicBaseURL", "api.example.com")
	if _, _, err := loadSettings(0); err == nil || !strings.Contains(err.Error(), "PublicBaseURL") {
		t.Errorf("a bad PublicBaseURL: err %v; want one naming the setting", err)
	}
}

package main

import (
	"fngateway/internal/settings"
	"os"
	"reflect"
	"runtime/debug"
	"strings"
	"testing"
)

// TestSettingsDefaultsOneSource: the settings read from an environment
// with only Hosts are settings.DefaultSettings plus Hosts, and a new setting is
// read from its name.
func TestSettingsDefaultsOneSource(t *testing.T) {
	// loadSettings mirrors each setting under its upper-case name with
	// os.Setenv: t.Setenv both names first, so both are restored.
	st := reflect.TypeOf(settings.Settings{})
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
	want := settings.DefaultSettings()
	want.Hosts = s.Hosts
	if !reflect.DeepEqual(*s, want) {
		t.Errorf("settings with only Hosts:\n%+v\nwant settings.DefaultSettings():\n%+v", *s, want)
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

// TestMemoryBounds: loadSettings finds the host's memory (Lambda's
// configured size, the InstanceMemoryMB the Azure module writes), sets the
// soft limit from it, and holds the body budgets against that limit, not
// against all of memory: a budget between the two stops the start-up with
// one line naming the setting, its value and the limit.
func TestMemoryBounds(t *testing.T) {
	clearMemoryEnv := func(t *testing.T) {
		for _, n := range []string{"GOGC", "GOMEMLIMIT", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "InstanceMemoryMB", "INSTANCEMEMORYMB",
			"MaxBufferedBytes", "MAXBUFFEREDBYTES", "MaxRetryBodyBytes", "MAXRETRYBODYBYTES"} {
			t.Setenv(n, "")
			os.Unsetenv(n)
		}
		t.Setenv("Hosts", "http://127.0.0.1:9")
	}
	for _, tt := range []struct {
		name string
		env  map[string]string
		// goMemLimit stands for GOMEMLIMIT given to the runtime.
		goMemLimit   int64
		wantErr      string
		wantLimit    int64
		wantBuffered int64
	}{
		{name: "Lambda: a budget over the soft limit, under memory",
			env:     map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024", "MaxBufferedBytes": "943718400"},
			wantErr: `setting MaxBufferedBytes="943718400": want at most 858993459 bytes, the soft memory limit, 80 % of AWS_LAMBDA_FUNCTION_MEMORY_SIZE=1024 MB`},
		{name: "Lambda: retry body over the soft limit",
			env:     map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "128", "MaxRetryBodyBytes": "115343360", "MaxBufferedBytes": "1048576"},
			wantErr: `setting MaxRetryBodyBytes="115343360": want at most 107374182 bytes, the soft memory limit, 80 % of AWS_LAMBDA_FUNCTION_MEMORY_SIZE=128 MB`},
		{name: "Lambda 128 MB starts with the defaults",
			env:       map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "128"},
			wantLimit: 107374182, wantBuffered: 53687091},
		{name: "Azure: the instance size the module writes",
			env:       map[string]string{"InstanceMemoryMB": "2048"},
			wantLimit: 1717986918, wantBuffered: 134217728},
		{name: "Azure: a budget over the instance's soft limit",
			env:     map[string]string{"InstanceMemoryMB": "512", "MaxBufferedBytes": "471859200"},
			wantErr: `setting MaxBufferedBytes="471859200": want at most 429496729 bytes, the soft memory limit, 80 % of InstanceMemoryMB=512 MB`},
		{name: "Azure: the smaller of the instance and Lambda",
			env:       map[string]string{"InstanceMemoryMB": "4096", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512"},
			wantLimit: 429496729, wantBuffered: 134217728},
		{name: "InstanceMemoryMB not a number",
			env:     map[string]string{"InstanceMemoryMB": "2GB"},
			wantErr: `setting InstanceMemoryMB="2GB": want the instance's memory as a positive whole number of MB`},
		{name: "InstanceMemoryMB zero",
			env:     map[string]string{"InstanceMemoryMB": "0"},
			wantErr: `setting InstanceMemoryMB="0"`},
		{name: "GOMEMLIMIT given: the budget is held against it",
			env: map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024", "GOMEMLIMIT": "100MiB", "MaxBufferedBytes": "209715200"}, goMemLimit: 100 << 20,
			wantErr: `setting MaxBufferedBytes="209715200": want at most 104857600 bytes, the soft memory limit GOMEMLIMIT=100MiB`},
		{name: "GOMEMLIMIT above memory: the budget is held against memory",
			env: map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "128", "GOMEMLIMIT": "1GiB", "MaxBufferedBytes": "209715200"}, goMemLimit: 1 << 30,
			wantErr: `setting MaxBufferedBytes="209715200": want at most 134217728 bytes, the memory this host has (AWS_LAMBDA_FUNCTION_MEMORY_SIZE=128 MB)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			keepGC(t)
			clearMemoryEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			if tt.goMemLimit > 0 {
				debug.SetMemoryLimit(tt.goMemLimit) // as the runtime does at start from GOMEMLIMIT
			}
			s, _, err := loadSettings(0)
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("loadSettings: %v; want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if limit := debug.SetMemoryLimit(-1); limit != tt.wantLimit {
				t.Errorf("soft limit %d; want %d", limit, tt.wantLimit)
			}
			if int64(s.MaxBufferedBytes) != tt.wantBuffered {
				t.Errorf("MaxBufferedBytes %d; want %d", s.MaxBufferedBytes, tt.wantBuffered)
			}
		})
	}
}

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fngateway/internal/ops"
)

// TestExplainReadsSettingsSource: explain lays the SettingsSource document
// over the environment, as the gateway does at start-up.
func TestExplainReadsSettingsSource(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(path, []byte(`{"DefaultTTLSecs": 7}`), 0o600); err != nil {
		t.Fatal(err)
	}
	base := map[string]string{"DefaultTTLSecs": "300", "SettingsSource": "file:" + path}
	env, err := explainEnv(context.Background(), func(name string) (string, bool) { v, ok := base[name]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut strings.Builder
	if code := ops.Explain(nil, env, time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), &out, &errOut); code != 0 {
		t.Fatalf("explain: %d %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "TTL 7 s") {
		t.Errorf("explain with a source setting DefaultTTLSecs 7:\n%s\nwant the source's TTL", out.String())
	}
	base["SettingsSource"] = "file:" + filepath.Join(t.TempDir(), "missing.json")
	if _, err := explainEnv(context.Background(), func(name string) (string, bool) { v, ok := base[name]; return v, ok }); err == nil || !strings.Contains(err.Error(), "SettingsSource") {
		t.Errorf("a missing source: %v; want an error naming SettingsSource", err)
	}
}

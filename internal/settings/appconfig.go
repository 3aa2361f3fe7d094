package settings

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// agentSource is an AWS AppConfig configuration read from the AppConfig
// Agent Lambda extension's local HTTP endpoint
// (SettingsSource=appconfig:<application>/<environment>/<profile>):
// http://localhost:<AWS_APPCONFIG_EXTENSION_HTTP_PORT, 2772>/applications/<application>/environments/<environment>/configurations/<profile>.
// The extension holds the configuration session, caches the data and polls
// AppConfig itself (AWS_APPCONFIG_EXTENSION_POLL_INTERVAL_SECONDS); the
// gateway links no AppConfig SDK and pays nothing at cold start for it. A
// read is a loopback request answered from the extension's cache; the
// version is its Configuration-Version header (a hash of the body when
// absent), and a body whose version is the one in force is not parsed
// again.
type agentSource struct {
	app, env, profile string
	url               string
	client            *http.Client
}

// appConfigAgentPort is the extension's default port.
const appConfigAgentPort = "2772"

func openAgent(spec string, env func(string) (string, bool)) (*agentSource, error) {
	rest := strings.TrimPrefix(spec, "appconfig:")
	parts := strings.Split(rest, "/")
	if len(parts) != 3 {
		return nil, fmt.Errorf("want appconfig:<application>/<environment>/<configuration profile>")
	}
	for _, p := range parts {
		if p == "" || len(p) > 128 || strings.ContainsAny(p, " ?#%\\") {
			return nil, fmt.Errorf("want appconfig:<application>/<environment>/<configuration profile>, each a name or id of at most 128 characters")
		}
	}
	port := appConfigAgentPort
	if v, ok := env("AWS_APPCONFIG_EXTENSION_HTTP_PORT"); ok && v != "" {
		if n, err := strconv.Atoi(v); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("AWS_APPCONFIG_EXTENSION_HTTP_PORT %q: want a TCP port", v)
		}
		port = v
	}
	a := &agentSource{app: parts[0], env: parts[1], profile: parts[2], client: &http.Client{}}
	a.url = "http://localhost:" + port + "/applications/" + url.PathEscape(a.app) + "/environments/" + url.PathEscape(a.env) +
		"/configurations/" + url.PathEscape(a.profile)
	return a, nil
}

func (a *agentSource) String() string {
	return "appconfig:" + a.app + "/" + a.env + "/" + a.profile
}

func (a *agentSource) Read(ctx context.Context, have string) (*Document, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the AppConfig agent extension: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument+1))
	if err != nil {
		return nil, fmt.Errorf("the AppConfig agent extension: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the AppConfig agent extension answered %d: %.200s", resp.StatusCode, b)
	}
	version := resp.Header.Get("Configuration-Version")
	if version == "" {
		sum := sha256.Sum256(b)
		version = "sha256:" + hex.EncodeToString(sum[:6])
	}
	if version == have {
		return nil, nil
	}
	vals, err := ParseDocument(b)
	if err != nil {
		return nil, &DocumentError{Version: version, Err: err}
	}
	return &Document{Values: vals, Version: version}, nil
}

package emulators

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// findNode returns a node that can run what (an npm package installed in
// binDir's package tree): the one beside its launcher first (the Node 22
// runtime `make tools` installs), then the one on PATH, the first whose
// version is at least major.minor.
func findNode(binDir, what string, major, minor int) (string, error) {
	candidates := []string{filepath.Join(binDir, "node")}
	if p, err := exec.LookPath("node"); err == nil {
		candidates = append(candidates, p)
	}
	var tried []string
	for _, c := range candidates {
		ma, mi, err := nodeVersion(c)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				tried = append(tried, fmt.Sprintf("%s: %v", c, err))
			}
			continue
		}
		if ma > major || ma == major && mi >= minor {
			return c, nil
		}
		tried = append(tried, fmt.Sprintf("%s is version %d.%d", c, ma, mi))
	}
	return "", fmt.Errorf("%s needs node %d.%d or later; found none (%s)", what, major, minor, strings.Join(tried, "; "))
}

// nodeVersion runs `node --version` and returns its major and minor
// version.
func nodeVersion(node string) (major, minor int, err error) {
	if _, err := os.Stat(node); err != nil {
		return 0, 0, err
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		return 0, 0, fmt.Errorf("node --version: %w", err)
	}
	parts := strings.SplitN(strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), ".", 3)
	if len(parts) < 2 {
		return 0, 0, fmt.Errorf("node --version printed %q", out)
	}
	if major, err = strconv.Atoi(parts[0]); err == nil {
		minor, err = strconv.Atoi(parts[1])
	}
	if err != nil {
		return 0, 0, fmt.Errorf("node --version printed %q", out)
	}
	return major, minor, nil
}

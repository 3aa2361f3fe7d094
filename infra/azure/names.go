package azure

import (
	"fmt"
	"strings"
)

// checkName applies Azure's rule for container and queue names: 3–63
// characters, lower-case letters, digits and single hyphens, starting and
// ending with a letter or digit. kind ("container", "queue") and the name
// are in the error.
func checkName(kind, name string) error {
	bad := func(why string) error {
		return fmt.Errorf("invalid %s name %q: %s", kind, name, why)
	}
	if len(name) < 3 || len(name) > 63 {
		return bad("want 3 to 63 characters")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-':
			if i == 0 || i == len(name)-1 {
				return bad("must start and end with a letter or digit")
			}
			if name[i-1] == '-' {
				return bad("consecutive hyphens")
			}
		default:
			return bad("want lower-case letters, digits and hyphens")
		}
	}
	return nil
}

// splitKey splits a store key "<container>/<blob name>" and checks both.
func splitKey(key string) (container, blobName string, err error) {
	container, blobName, ok := strings.Cut(key, "/")
	if !ok || blobName == "" {
		return "", "", fmt.Errorf("invalid key %q: want <container>/<blob name>", key)
	}
	if err := checkName("container", container); err != nil {
		return "", "", fmt.Errorf("invalid key %q: %w", key, err)
	}
	if len(blobName) > 1024 {
		return "", "", fmt.Errorf("invalid key %q: blob name longer than 1024 characters", key)
	}
	return container, blobName, nil
}

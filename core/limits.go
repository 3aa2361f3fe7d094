package core

import (
	"errors"
	"strings"
)

// MaxAttemptsLimit is the most attempts a request may be given: more could
// never take effect within any budget.
const MaxAttemptsLimit = 100

// matchPrefix reports whether path falls under a route prefix, segment by
// segment: "/a" (or "/a/") takes "/a" and "/a/…", never "/ab".
func matchPrefix(path, prefix string) bool {
	p := strings.TrimSuffix(prefix, "/")
	if p == "" {
		return true // "/"
	}
	return strings.HasPrefix(path, p) && (len(path) == len(p) || path[len(p)] == '/')
}

// checkPrefix refuses route prefixes that could never be served: those
// under the gateway's own /_gateway/, and those with a .. segment.
func checkPrefix(prefix string) error {
	if matchPrefix(prefix, "/_gateway") {
		return errors.New("want a prefix outside /_gateway/, which the gateway serves itself")
	}
	if _, err := ConfinePath(prefix); err != nil {
		return errors.New("want a prefix without a .. segment")
	}
	return nil
}

package async

import (
	"strings"
	"testing"

	"fngateway/core"
)

// TestStateContainer: the async state lives in core.StateContainer, the
// container no profile may name for its results (core.ReservedContainer).
func TestStateContainer(t *testing.T) {
	for _, p := range []string{asyncRecordsPrefix, asyncRequestsPrefix, asyncIdempotencyPrefix, asyncCorruptPrefix} {
		if !strings.HasPrefix(p, core.StateContainer+"/") {
			t.Errorf("key prefix %q is outside the state container %q", p, core.StateContainer)
		}
	}
	if core.ReservedContainer(defaultResultContainer) != "" {
		t.Errorf("the default result container %q is reserved", defaultResultContainer)
	}
}

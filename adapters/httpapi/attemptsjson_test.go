package httpapi

import (
	"encoding/json"
	"reflect"
	"testing"

	"fngateway/core"
)

// TestAppendAttempts: the request line's upstream array holds what
// core.AttemptsJSON (encoding/json) gives, member for member, whatever the
// host's spelling.
func TestAppendAttempts(t *testing.T) {
	for _, tl := range [][]core.Attempt{
		nil,
		{{Host: "http://a", Status: 200, Outcome: core.OutcomeStatus, DurationMs: 3}},
		{{Host: "http://b\"q\\\n<&>\u2028é", Outcome: core.OutcomeConnectError, DurationMs: 0, Failure: "refused", Phase: core.PhaseConnect},
			{Host: "h", Outcome: core.OutcomeTimeout, DurationMs: -1, Phase: core.PhaseHeaders}},
	} {
		var got, want any
		if err := json.Unmarshal(appendAttempts(nil, tl), &got); err != nil {
			t.Fatalf("appendAttempts(%v) is not JSON: %v", tl, err)
		}
		if err := json.Unmarshal(core.AttemptsJSON(tl), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("appendAttempts(%v) = %v; want %v", tl, got, want)
		}
	}
}

// Package ops holds the gateway binary's operator commands: `gateway
// explain` (a request's budget timeline, from the settings alone), `gateway
// check` (probes of a deployed gateway) and `gateway deadletters` (the
// continuations the async queue set aside). The binary (functions/) wires
// them: it gives explain the settings, check the cloud signers of infra/,
// and deadletters the stores it opens for serving; nothing here links a
// cloud SDK, so each one-cloud build keeps only its own.
package ops

import (
	"errors"
	"fmt"
	"io"

	"fngateway/core"
)

// ExitCode is the gateway binary's exit code for err, which it prints as
// the process's one line on stderr: 2 for a bad setting, 1 for any other
// failure, 0 for none. The gateway's run and the commands share it.
func ExitCode(stderr io.Writer, err error) int {
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "gateway: %v\n", err)
	if se := (*core.SettingError)(nil); errors.As(err, &se) {
		return 2
	}
	return 1
}

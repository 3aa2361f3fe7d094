package async

import (
	"context"

	"fngateway/core"
)

// Fairness between profiles (docs/async-api.md#fairness-between-profiles): one profile holds at most
// Continuations.PerProfile slots on an instance. Run asks for a slot of the
// request's profile before it finishes a request in-process; a queue worker
// asks MessageProfile whose work a message is before it runs it, and leaves
// a message whose profile holds its share on the queue, hidden for a
// moment, to go on with other profiles' messages.

// MessageProfile returns the profile of the request a continuation message
// names, read from its record, and true; or false when the message names no
// request that can still run: a message that does not decode, an unknown,
// finished or unreadable record, or a store that cannot be read just now.
// Such a message ends quickly whatever its profile, so a worker may run it
// without counting it against a profile.
func (a *Async) MessageProfile(ctx context.Context, msg []byte) (string, bool) {
	c, err := decodeContinuation(msg)
	if err != nil {
		return "", false
	}
	rec, err := a.engine().records.load(ctx, c.ID)
	if err != nil || rec.State.Done() {
		return "", false
	}
	return rec.Profile, true
}

// profileID is the id of profile, "" for none.
func profileID(p *core.Profile) string {
	if p == nil {
		return ""
	}
	return p.UserID
}

package async

import (
	"net/http"
	"time"

	"fngateway/core"
)

// The life of an async request's record, as plain transitions on the
// record: each takes the record as read and the moment or owner it needs,
// changes it or says why not (errNoop: nothing to write; errLeased: another
// worker's claim is live; ErrLeaseLost: the caller's claim is gone;
// errMovedOn: the record went on without the caller), and does no I/O.
// The engine runs each inside records.update, which owns the conditional
// read-modify-write; state_test.go tests them as a table.
//
//	submit          → queued, or running under an inflight claim
//	claim           queued/running/cancelling → running (or as it was, once
//	                expired or cancelling), under a fresh claim
//	renew           extends the caller's claim
//	release         drops the caller's claim, keeping the attempts; a
//	                checkpoint counts itself
//	requestCancel   queued/running → cancelling
//	commit          any state not done → succeeded/failed/expired/canceled
//	abandon         queued (or the caller's inflight claim) → abandoned
//
// The commit protocol around them is described in protocol.go.

// claimInflight puts a record being submitted under the submitting
// process's own claim (Submit with inflight set): running, owned by owner
// until until.
func (r *asyncRecord) claimInflight(owner string, until time.Time) {
	r.State = StateRunning
	r.Claim = &claimLease{Owner: owner, Until: until.UTC(), Inflight: true}
}

// claim gives r to owner until until, at now: errNoop when r is done,
// errLeased when another claim is live. A record still in time and not
// cancelling becomes running. first reports the first claim of a queued
// request in time (its processing notification is due); seen that an
// earlier holder may have run it (it may have committed and died before
// marking the record).
func (r *asyncRecord) claim(owner string, now, until time.Time) (first, seen bool, err error) {
	if r.State.Done() {
		return false, false, errNoop
	}
	if r.Claim != nil && now.Before(r.Claim.Until) {
		return false, false, errLeased
	}
	first = r.State == StateQueued && now.Before(r.Expiry)
	seen = r.State != StateQueued || r.Claim != nil
	r.Claim = &claimLease{Owner: owner, Until: until.UTC()}
	if now.Before(r.Expiry) && r.State != StateCancelling {
		r.State = StateRunning
	}
	return first, seen, nil
}

// held reports whether owner holds r's claim and r is not done.
func (r *asyncRecord) held(owner string) bool {
	return !r.State.Done() && r.Claim != nil && r.Claim.Owner == owner
}

// renew extends owner's claim to until: ErrLeaseLost when owner no longer
// holds it, errNoop when it lasts that long already.
func (r *asyncRecord) renew(owner string, until time.Time) error {
	if !r.held(owner) {
		return ErrLeaseLost
	}
	if !r.Claim.Until.Before(until) {
		return errNoop
	}
	r.Claim.Until = until.UTC()
	return nil
}

// release drops owner's claim, keeping the attempts so far (all); a
// checkpoint (the execution limit cut the work) counts itself. ErrLeaseLost
// when owner no longer holds the claim.
func (r *asyncRecord) release(owner string, all []core.Attempt, checkpoint bool) error {
	if !r.held(owner) {
		return ErrLeaseLost
	}
	r.Attempts = all
	if checkpoint {
		r.Checkpoints++
	}
	r.Claim = nil
	return nil
}

// requestCancel is the record's transition on a cancel request at now:
// queued or running becomes cancelling; a finished or cancelling record
// is left as it is.
func (r *asyncRecord) requestCancel(now time.Time) cancelOutcome {
	switch {
	case r.State.Done():
		return cancelFinished
	case r.State == StateCancelling:
		return cancelPending
	}
	r.State, r.CancelRequested = StateCancelling, now.UTC()
	return cancelMarked
}

// cancelUnheld reports whether r is cancelling and nobody holds a live
// claim on it at now, so that nobody will write the cancellation unless
// the canceller does.
func (r *asyncRecord) cancelUnheld(now time.Time) bool {
	return r.State == StateCancelling && (r.Claim == nil || !now.Before(r.Claim.Until))
}

// commit marks r done with its committed result, whoever holds the claim
// (the header blob decides): state (resultState of the result), the
// attempts when all is not nil, and res. errNoop when r is done already.
func (r *asyncRecord) commit(state State, res recordResult, all []core.Attempt) error {
	if r.State.Done() {
		return errNoop
	}
	r.State, r.Claim = state, nil
	if all != nil {
		r.Attempts = all
	}
	r.Result = &res
	return nil
}

// abandon marks r abandoned after a failed submission: a queued record
// nobody claimed (owner empty), or one still under the submitter's own
// inflight claim (owner). errNoop when it is abandoned already;
// errMovedOn when it went on without the submitter (a worker claimed it,
// or it is done).
func (r *asyncRecord) abandon(owner string) error {
	switch {
	case r.State == StateAbandoned:
		return errNoop
	case r.State.Done():
		return errMovedOn
	case owner == "" && r.State == StateQueued && r.Claim == nil,
		owner != "" && r.Claim != nil && r.Claim.Owner == owner:
		r.State, r.Claim = StateAbandoned, nil
		return nil
	}
	return errMovedOn
}

// resultState is the final state of a result: expired or failed when the
// gateway ended the request with that error code, failed when the
// backend's last answer was a server failure (5xx or 429), else succeeded.
func resultState(status int, gatewayCode string) State {
	switch {
	case gatewayCode == core.ReasonTTLExpired.Code():
		return StateExpired
	case gatewayCode == core.ReasonCanceled.Code():
		return StateCanceled
	case gatewayCode != "", status >= 500, status == http.StatusTooManyRequests:
		return StateFailed
	}
	return StateSucceeded
}

func (s State) notification() string {
	switch s {
	case StateSucceeded:
		return notifyProcessed
	case StateExpired:
		return notifyExpired
	}
	return notifyFailed
}

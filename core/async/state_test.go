package async

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"fngateway/core"
)

// TestRecordTransitions runs every transition of the record's life
// (state.go) on records in each state it may meet, without a store:
// the record after it, and the error that tells the engine not to write.
func TestRecordTransitions(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	later := now.Add(15 * time.Second)
	arrival, expiry := now.Add(-time.Minute), now.Add(time.Hour)
	attempts := []core.Attempt{{Host: "a", Outcome: core.OutcomeStatus, Status: 502}}
	rec := func(state State, claim *claimLease) *asyncRecord {
		return &asyncRecord{V: recordVersion, ID: "id", State: state, Arrival: arrival, Expiry: expiry, Claim: claim}
	}
	mine := func(until time.Time) *claimLease { return &claimLease{Owner: "me", Until: until} }
	theirs := func(until time.Time) *claimLease { return &claimLease{Owner: "them", Until: until} }
	with := func(r *asyncRecord, f func(*asyncRecord)) *asyncRecord { f(r); return r }
	done := &recordResult{Status: 201, CompletedAt: now}

	tests := []struct {
		name    string
		before  *asyncRecord
		step    func(r *asyncRecord) (stepResult, error)
		after   *asyncRecord
		want    stepResult
		wantErr error
	}{
		// claim
		{"claim queued", rec(StateQueued, nil), claimAt(now, later), rec(StateRunning, mine(later)), stepResult{first: true}, nil},
		{"claim running whose holder died", rec(StateRunning, theirs(now.Add(-time.Second))), claimAt(now, later),
			rec(StateRunning, mine(later)), stepResult{seen: true}, nil},
		{"claim released running", rec(StateRunning, nil), claimAt(now, later), rec(StateRunning, mine(later)), stepResult{seen: true}, nil},
		{"claim live lease", rec(StateRunning, theirs(later)), claimAt(now, later), rec(StateRunning, theirs(later)), stepResult{}, errLeased},
		{"claim lease ending now", rec(StateRunning, theirs(now)), claimAt(now, later), rec(StateRunning, mine(later)), stepResult{seen: true}, nil},
		{"claim done", rec(StateSucceeded, nil), claimAt(now, later), rec(StateSucceeded, nil), stepResult{}, errNoop},
		{"claim cancelling stays cancelling", rec(StateCancelling, nil), claimAt(now, later), rec(StateCancelling, mine(later)), stepResult{seen: true}, nil},
		{"claim expired queued stays queued", with(rec(StateQueued, nil), func(r *asyncRecord) { r.Expiry = now }),
			claimAt(now, later), with(rec(StateQueued, mine(later)), func(r *asyncRecord) { r.Expiry = now }), stepResult{}, nil},
		// renew
		{"renew", rec(StateRunning, mine(now)), renewTo(later), rec(StateRunning, mine(later)), stepResult{}, nil},
		{"renew not longer", rec(StateRunning, mine(later)), renewTo(now), rec(StateRunning, mine(later)), stepResult{}, errNoop},
		{"renew taken over", rec(StateRunning, theirs(now)), renewTo(later), rec(StateRunning, theirs(now)), stepResult{}, ErrLeaseLost},
		{"renew released", rec(StateRunning, nil), renewTo(later), rec(StateRunning, nil), stepResult{}, ErrLeaseLost},
		{"renew done", rec(StateFailed, mine(now)), renewTo(later), rec(StateFailed, mine(now)), stepResult{}, ErrLeaseLost},
		// release and checkpoint
		{"release", rec(StateRunning, mine(later)), releaseWith(attempts, false),
			with(rec(StateRunning, nil), func(r *asyncRecord) { r.Attempts = attempts }), stepResult{}, nil},
		{"checkpoint", with(rec(StateRunning, mine(later)), func(r *asyncRecord) { r.Checkpoints = 2 }), releaseWith(attempts, true),
			with(rec(StateRunning, nil), func(r *asyncRecord) { r.Attempts, r.Checkpoints = attempts, 3 }), stepResult{}, nil},
		{"release taken over", rec(StateRunning, theirs(later)), releaseWith(attempts, true), rec(StateRunning, theirs(later)), stepResult{}, ErrLeaseLost},
		// cancel
		{"cancel queued", rec(StateQueued, nil), cancelAt(now, cancelMarked),
			with(rec(StateCancelling, nil), func(r *asyncRecord) { r.CancelRequested = now }), stepResult{}, nil},
		{"cancel running keeps its claim", rec(StateRunning, theirs(later)), cancelAt(now, cancelMarked),
			with(rec(StateCancelling, theirs(later)), func(r *asyncRecord) { r.CancelRequested = now }), stepResult{}, nil},
		{"cancel cancelling", rec(StateCancelling, nil), cancelAt(now, cancelPending), rec(StateCancelling, nil), stepResult{}, nil},
		{"cancel done", rec(StateSucceeded, nil), cancelAt(now, cancelFinished), rec(StateSucceeded, nil), stepResult{}, nil},
		// commit, whoever holds the claim
		{"commit", rec(StateRunning, theirs(later)), commitAs(StateSucceeded, *done, attempts),
			with(rec(StateSucceeded, nil), func(r *asyncRecord) { r.Attempts, r.Result = attempts, done }), stepResult{}, nil},
		{"commit keeps attempts without new ones", with(rec(StateRunning, mine(later)), func(r *asyncRecord) { r.Attempts = attempts }),
			commitAs(StateExpired, *done, nil),
			with(rec(StateExpired, nil), func(r *asyncRecord) { r.Attempts, r.Result = attempts, done }), stepResult{}, nil},
		{"commit cancelling", rec(StateCancelling, mine(later)), commitAs(StateCanceled, *done, nil),
			with(rec(StateCanceled, nil), func(r *asyncRecord) { r.Result = done }), stepResult{}, nil},
		{"commit done", rec(StateFailed, nil), commitAs(StateSucceeded, *done, attempts), rec(StateFailed, nil), stepResult{}, errNoop},
		// abandon
		{"abandon queued", rec(StateQueued, nil), abandonBy(""), rec(StateAbandoned, nil), stepResult{}, nil},
		{"abandon own inflight claim", rec(StateRunning, mine(later)), abandonBy("me"), rec(StateAbandoned, nil), stepResult{}, nil},
		{"abandon claimed by a worker", rec(StateRunning, theirs(later)), abandonBy("me"), rec(StateRunning, theirs(later)), stepResult{}, errMovedOn},
		{"abandon queued, claimed meanwhile", rec(StateRunning, theirs(later)), abandonBy(""), rec(StateRunning, theirs(later)), stepResult{}, errMovedOn},
		{"abandon done", rec(StateSucceeded, nil), abandonBy(""), rec(StateSucceeded, nil), stepResult{}, errMovedOn},
		{"abandon abandoned", rec(StateAbandoned, nil), abandonBy(""), rec(StateAbandoned, nil), stepResult{}, errNoop},
		// the submitter's own claim
		{"claim inflight", rec(StateQueued, nil), func(r *asyncRecord) (stepResult, error) { r.claimInflight("me", later); return stepResult{}, nil },
			rec(StateRunning, &claimLease{Owner: "me", Until: later, Inflight: true}), stepResult{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.before
			got, err := tt.step(r)
			if !errors.Is(err, tt.wantErr) || (err != nil) != (tt.wantErr != nil) {
				t.Errorf("error = %v; want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("first, seen = %+v; want %+v", got, tt.want)
			}
			if !reflect.DeepEqual(r, tt.after) {
				t.Errorf("record after:\n got  %+v (claim %+v)\n want %+v (claim %+v)", r, r.Claim, tt.after, tt.after.Claim)
			}
		})
	}
}

// stepResult is what a transition reports beyond its error (claim's
// first and seen).
type stepResult struct{ first, seen bool }

func claimAt(now, until time.Time) func(*asyncRecord) (stepResult, error) {
	return func(r *asyncRecord) (stepResult, error) {
		first, seen, err := r.claim("me", now, until)
		return stepResult{first, seen}, err
	}
}

func renewTo(until time.Time) func(*asyncRecord) (stepResult, error) {
	return func(r *asyncRecord) (stepResult, error) {
		return stepResult{}, r.renew("me", until)
	}
}

func releaseWith(all []core.Attempt, checkpoint bool) func(*asyncRecord) (stepResult, error) {
	return func(r *asyncRecord) (stepResult, error) {
		return stepResult{}, r.release("me", all, checkpoint)
	}
}

func cancelAt(now time.Time, want cancelOutcome) func(*asyncRecord) (stepResult, error) {
	return func(r *asyncRecord) (stepResult, error) {
		if got := r.requestCancel(now); got != want {
			return stepResult{}, errors.New("unexpected cancel outcome")
		}
		return stepResult{}, nil
	}
}

func commitAs(state State, res recordResult, all []core.Attempt) func(*asyncRecord) (stepResult, error) {
	return func(r *asyncRecord) (stepResult, error) {
		return stepResult{}, r.commit(state, res, all)
	}
}

func abandonBy(owner string) func(*asyncRecord) (stepResult, error) {
	return func(r *asyncRecord) (stepResult, error) {
		return stepResult{}, r.abandon(owner)
	}
}

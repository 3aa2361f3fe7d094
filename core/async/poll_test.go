package async

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

func TestPollPolicy(t *testing.T) {
	p := pollPolicy{first: 2 * time.Second, max: 30 * time.Second}
	tests := []struct {
		name      string
		age, left time.Duration
		want      time.Duration
	}{
		{"new", 0, time.Hour, 2 * time.Second},
		{"young", 20 * time.Second, time.Hour, 2 * time.Second},
		{"a minute", time.Minute, time.Hour, 6 * time.Second},
		{"rounded down to whole seconds", 95 * time.Second, time.Hour, 9 * time.Second},
		{"capped", 10 * time.Minute, time.Hour, 30 * time.Second},
		{"never beyond what is left", 10 * time.Minute, 7 * time.Second, 7 * time.Second},
		{"at least a second", 10 * time.Minute, 200 * time.Millisecond, time.Second},
		{"expired", 10 * time.Minute, -time.Minute, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := p.after(tt.age, tt.left); got != tt.want {
				t.Errorf("after(%v, %v) = %v; want %v", tt.age, tt.left, got, tt.want)
			}
		})
	}
}

// TestStatusRetryAfterGrows: a pending request's Retry-After is short at
// first, grows with its age to PollMax, and shrinks to what is left near
// its expiry.
func TestStatusRetryAfterGrows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newAsyncEnv(t, asyncOK)
		e.a.PollMax = 20 * time.Second
		acc := e.submit(t, asyncRequest())
		if acc.RetryAfter != asyncPoll {
			t.Errorf("202's Retry-After = %v; want %v", acc.RetryAfter, asyncPoll)
		}
		for _, step := range []struct {
			at   time.Duration // since arrival
			want time.Duration
		}{
			{0, asyncPoll},
			{time.Minute, 6 * time.Second},
			{10 * time.Minute, 20 * time.Second},
			{asyncTestTTL - 5*time.Second, 5 * time.Second},
		} {
			time.Sleep(time.Until(asyncRequestArrival(t, e, acc.ID).Add(step.at)))
			v, err := e.a.Status(context.Background(), acc.ID)
			if err != nil {
				t.Fatal(err)
			}
			if v.RetryAfter != step.want {
				t.Errorf("%v after arrival: Retry-After %v; want %v", step.at, v.RetryAfter, step.want)
			}
		}
	})
}

// asyncRequestArrival returns the stored arrival of request id.
func asyncRequestArrival(tb testing.TB, e *asyncEnv, id string) time.Time {
	tb.Helper()
	o, ok := e.store.object(asyncRecordKey(id))
	if !ok {
		tb.Fatalf("no record %s", id)
	}
	r, err := decodeAsyncRecord(o.data)
	if err != nil {
		tb.Fatal(err)
	}
	return r.Arrival
}

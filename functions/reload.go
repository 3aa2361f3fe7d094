package main

import (
	"context"

	"fngateway/core"
	"fngateway/core/async"
	"fngateway/internal/settings"
)

// serveSettings makes r keep gw's settings: gw serves /_gateway/settings
// from r, counts r's failures in /_gateway/stats, and takes each new
// version r validates. Call it before gw serves.
func (gw *gateway) serveSettings(r *settings.Reloader) {
	h := gw.live.Handler()
	h.SettingsView = r
	h.ExtraStats = r.Counters
	r.Apply = func(s *settings.Settings) error { return gw.reload(context.Background(), s) }
}

// reload serves the next requests with s: a copy of the Forwarder with the
// new backoff and the authorizers of s's routes; the retry budget and the
// ejection state carry over (a new budget only when its own settings
// changed), so hosts still configured keep what they learnt.
func (gw *gateway) reload(ctx context.Context, s *settings.Settings) error {
	old := gw.live.Handler()
	fwd := *old.Forwarder
	fwd.BackoffBase = s.RetryBackoffMs.D()
	if b := old.Forwarder.RetryBudget; b == nil || b.Percent != int64(s.RetryBudgetPercent) || b.MinConcurrency != int64(s.RetryBudgetMinConcurrency) {
		fwd.RetryBudget = core.NewRetryBudget(int64(s.RetryBudgetPercent), int64(s.RetryBudgetMinConcurrency))
	}
	auths, err := routeAuthorizers(ctx, s, old.Forwarder.Authorizers)
	if err != nil {
		return err
	}
	fwd.Authorizers = auths
	gw.live.Swap(s, &fwd)
	if a := gw.async; a != nil {
		a.Retune(async.Tuning{Forwarder: &fwd, Router: s.Router(), TTL: s.AsyncTTLSecs.D(),
			Timeout: s.AsyncTimeout.D(), TriggerTimeout: s.AsyncTriggerTimeout.D()})
	}
	return nil
}

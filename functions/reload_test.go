package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"fngateway/adapters/local"
	"fngateway/internal/settings"
)

// TestReloadKeepsUpstreamState: a reload swaps the settings and the
// backoff in, and keeps the ejection state and the retry budget of the
// forwarder in force (a new budget only when its own settings changed).
func TestReloadKeepsUpstreamState(t *testing.T) {
	s := settings.DefaultSettings()
	if err := s.Hosts.Decode("http://127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	gw, err := assemble(context.Background(), &s, local.Caps(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		gw.drain(ctx)
	}()
	old := gw.live.Handler().Forwarder
	s2 := s
	s2.DefaultTTLSecs, s2.RetryBackoffMs = settings.Seconds(60*time.Second), settings.Millis(100*time.Millisecond)
	if err := gw.reload(context.Background(), &s2); err != nil {
		t.Fatal(err)
	}
	h := gw.live.Handler()
	if h.Settings != &s2 || h.Forwarder == old || h.Forwarder.BackoffBase != 100*time.Millisecond {
		t.Errorf("after a reload: settings %p (want %p), backoff %v; want the new ones", h.Settings, &s2, h.Forwarder.BackoffBase)
	}
	if h.Forwarder.Ejector != old.Ejector || h.Forwarder.RetryBudget != old.RetryBudget || h.Forwarder.Stats != old.Stats {
		t.Errorf("after a reload: the ejector, retry budget or stats were replaced; want them kept")
	}
	s3 := s2
	s3.RetryBudgetPercent = 50
	if err := gw.reload(context.Background(), &s3); err != nil {
		t.Fatal(err)
	}
	if b := gw.live.Handler().Forwarder.RetryBudget; b == old.RetryBudget || b.Percent != 50 || gw.live.Handler().Forwarder.Ejector != old.Ejector {
		t.Errorf("RetryBudgetPercent changed: budget %+v; want a new one of 50 %%, the ejector kept", b)
	}
}

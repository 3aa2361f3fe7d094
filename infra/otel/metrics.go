package otel

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// instruments registers the metrics (docs/observability.md#metrics): every /_gateway/stats
// counter under its own name, read from core.Stats at collection (no cost
// per request); the request and attempt duration histograms of the HTTP
// semantic conventions; and the gauges.
func (t *Telemetry) instruments(o Options) error {
	m := t.mp.Meter(ScopeName)
	var err error
	if t.reqDuration, err = m.Float64Histogram("http.server.request.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of gateway requests, arrival to the end of the answer.")); err != nil {
		return fmt.Errorf("otel metric: %w", err)
	}
	if t.attemptDur, err = m.Float64Histogram("http.client.request.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of attempts, until the backend's answer headers or the failure.")); err != nil {
		return fmt.Errorf("otel metric: %w", err)
	}
	if t.continuations, err = m.Int64Counter("async_continuations", metric.WithDescription("Continuations started: invocations that worked on an async request.")); err != nil {
		return fmt.Errorf("otel metric: %w", err)
	}
	if t.resultWrites, err = m.Int64Counter("async_result_writes", metric.WithDescription("Continuations' result writes (or hand-ons), by gateway.outcome ok or error.")); err != nil {
		return fmt.Errorf("otel metric: %w", err)
	}
	var obs []metric.Observable
	counters := map[string]metric.Int64ObservableCounter{}
	if o.Stats != nil {
		names := make([]string, 0, 24)
		for k := range o.Stats.Snapshot() {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			c, err := m.Int64ObservableCounter(k, metric.WithDescription("The /_gateway/stats counter "+k+"."))
			if err != nil {
				return fmt.Errorf("otel metric %s: %w", k, err)
			}
			counters[k] = c
			obs = append(obs, c)
		}
	}
	gauge := func(name, unit, desc string) (metric.Int64ObservableGauge, error) {
		g, err := m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		if err == nil {
			obs = append(obs, g)
		}
		return g, err
	}
	inFlight, err := gauge("requests_in_flight", "{request}", "Requests being served now.")
	if err != nil {
		return fmt.Errorf("otel metric: %w", err)
	}
	buffered, err := gauge("buffered_body_bytes", "By", "Request body bytes buffered now, out of MaxBufferedBytes.")
	if err != nil {
		return fmt.Errorf("otel metric: %w", err)
	}
	busy, err := gauge("continuation_slots_busy", "{slot}", "Continuation slots in use, out of MaxContinuations.")
	if err != nil {
		return fmt.Errorf("otel metric: %w", err)
	}
	dropped, err := m.Int64ObservableCounter("otel_dropped_spans", metric.WithDescription("Spans a bounded per-invocation flush could not export."))
	if err != nil {
		return fmt.Errorf("otel metric: %w", err)
	}
	failed, err := m.Int64ObservableCounter("otel_failed_metric_flushes", metric.WithDescription("Per-invocation metric flushes that did not finish in time (the cumulative values go out with a later one)."))
	if err != nil {
		return fmt.Errorf("otel metric: %w", err)
	}
	obs = append(obs, dropped, failed)
	_, err = m.RegisterCallback(func(_ context.Context, ob metric.Observer) error {
		if o.Stats != nil {
			for k, v := range o.Stats.Snapshot() {
				ob.ObserveInt64(counters[k], v)
			}
		}
		ob.ObserveInt64(inFlight, t.inFlight.Load())
		if o.BufferedBytes != nil {
			ob.ObserveInt64(buffered, o.BufferedBytes())
		}
		if o.BusySlots != nil {
			ob.ObserveInt64(busy, o.BusySlots())
		}
		ob.ObserveInt64(dropped, t.DroppedSpans())
		ob.ObserveInt64(failed, t.droppedMetrics.Load())
		return nil
	}, obs...)
	if err != nil {
		return fmt.Errorf("otel metrics callback: %w", err)
	}
	return nil
}

// attrKey is what a duration histogram's attributes are made of.
type attrKey struct {
	a, b, c string
	n       int
}

// setCache keeps the attribute sets of recent keys, so that a measurement
// builds none (attribute.NewSet sorts and allocates). It holds at most
// maxCachedSets; beyond that sets are built per measurement.
type setCache struct {
	mu   sync.RWMutex
	sets map[attrKey]attribute.Set
}

const maxCachedSets = 1024

func (c *setCache) get(k attrKey, build func(attrKey) attribute.Set) attribute.Set {
	c.mu.RLock()
	s, ok := c.sets[k]
	c.mu.RUnlock()
	if ok {
		return s
	}
	s = build(k)
	c.mu.Lock()
	if c.sets == nil {
		c.sets = map[attrKey]attribute.Set{}
	}
	if len(c.sets) < maxCachedSets {
		c.sets[k] = s
	}
	c.mu.Unlock()
	return s
}

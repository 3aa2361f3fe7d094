package httpapi

import "time"

// statsDoc is the /_gateway/stats document: the counters of core.Stats
// and, under "ejected_hosts", the hosts the Forwarder's Ejector holds out
// of their routes now (per instance).
func (h *Handler) statsDoc() map[string]any {
	doc := map[string]any{}
	for k, v := range h.Stats.Snapshot() {
		doc[k] = v
	}
	var ej any = []struct{}{}
	if h.Forwarder != nil && h.Forwarder.Ejector != nil {
		ej = h.Forwarder.Ejector.Ejected(time.Now())
	}
	doc["ejected_hosts"] = ej
	doc["client_logs_dropped"] = h.clientLog.Dropped()
	if h.ExtraStats != nil {
		for k, v := range h.ExtraStats() {
			doc[k] = v
		}
	}
	return doc
}

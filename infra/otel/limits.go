package otel

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The bounds of the gateway's telemetry (docs/security.md#bounded-telemetry-and-logs): no value a client
// controls is recorded whole, and the spans waiting for export are few and
// small, so a slow or hung collector costs a bounded amount of memory.
const (
	// DefaultAttributeValueLength is the longest attribute value, in
	// bytes, when neither OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT nor
	// OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT is set (the SDK's own default is
	// no limit at all).
	DefaultAttributeValueLength = 256
	// DefaultAttributeCount is the most attributes a span keeps when
	// neither OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT nor OTEL_ATTRIBUTE_COUNT_LIMIT
	// is set; the gateway's spans have at most 16.
	DefaultAttributeCount = 32
	// DefaultMaxQueueSize is the most ended spans waiting for export when
	// OTEL_BSP_MAX_QUEUE_SIZE is not set (the SDK's default is 2048);
	// more are dropped. DefaultMaxExportBatchSize is the most in one
	// export when OTEL_BSP_MAX_EXPORT_BATCH_SIZE is not set.
	DefaultMaxQueueSize       = 512
	DefaultMaxExportBatchSize = 128
	// maxHeaderValues is the most values of one request header recorded.
	maxHeaderValues = 2
)

// limits are the telemetry bounds read from the environment.
type limits struct {
	valueLength, attributes int
	queue, batch            int
}

// readLimits reads the OpenTelemetry SDK's standard limit variables: the
// span-specific one wins over the general one, as the specification's
// "Attribute Limits" says. A value that is not a positive integer is an
// error naming it.
func readLimits(lookup func(string) (string, bool)) (limits, error) {
	l := limits{valueLength: DefaultAttributeValueLength, attributes: DefaultAttributeCount,
		queue: DefaultMaxQueueSize, batch: DefaultMaxExportBatchSize}
	for _, v := range []struct {
		dst   *int
		names []string
	}{
		{&l.valueLength, []string{"OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT"}},
		{&l.attributes, []string{"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT"}},
		{&l.queue, []string{"OTEL_BSP_MAX_QUEUE_SIZE"}},
		{&l.batch, []string{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE"}},
	} {
		for _, name := range v.names {
			s, ok := lookup(name)
			if s = strings.TrimSpace(s); !ok || s == "" {
				continue
			}
			n, err := strconv.Atoi(s)
			if err != nil || n <= 0 {
				return l, fmt.Errorf("otel: %s=%q: want a positive integer", name, s)
			}
			*v.dst = n
			break
		}
	}
	l.batch = min(l.batch, l.queue)
	return l, nil
}

// spanLimits are the SDK's limits for l: events and links are few, as the
// gateway records no events and a continuation links one span.
func (l limits) spanLimits() sdktrace.SpanLimits {
	sl := sdktrace.NewSpanLimits()
	sl.AttributeValueLengthLimit = l.valueLength
	sl.AttributeCountLimit = l.attributes
	sl.EventCountLimit = 8
	sl.LinkCountLimit = 8
	sl.AttributePerEventCountLimit = 8
	sl.AttributePerLinkCountLimit = 8
	return sl
}

// capValue returns s cut to at most n bytes at a rune boundary, copied so
// that the span does not keep the rest of a client's long value alive (the
// SDK's own truncation keeps a substring, which does).
func capValue(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return strings.Clone(s[:n])
}

// capValues is capValue over at most maxHeaderValues values.
func capValues(vs []string, n int) []string {
	out := make([]string, 0, min(len(vs), maxHeaderValues))
	for _, v := range vs[:min(len(vs), maxHeaderValues)] {
		out = append(out, capValue(v, n))
	}
	return out
}

// spanMethod is the span name and http.request.method of a request: the
// method when it is one HTTP defines, else "_OTHER", as the HTTP semantic
// conventions say, so that a client's made-up method names no span.
func spanMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "_OTHER"
}

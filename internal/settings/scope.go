package settings

import "strings"

// notAScope names the headers IdempotencyScopeHeaders refuses, canonicalised,
// with why: their value differs on every request of one caller (a date, a
// signature, a payload hash, a trace id), or the gateway removes them
// before anything could read them.
var notAScope = map[string]string{
	"Date":                 "a date",
	"X-Amz-Date":           "a SigV4 signing date",
	"X-Amz-Content-Sha256": "a SigV4 payload hash",
	"X-Amz-Security-Token": "a SigV4 session token, removed on Lambda",
	"X-Ms-Date":            "an Azure Storage signing date",
	"Traceparent":          "a trace id",
	"X-Amzn-Trace-Id":      "a trace id",
	"X-Request-Id":         "a request id",
	"X-Functions-Key":      "an Azure Functions key, removed on Azure",
}

// checkScopeHeaders refuses names that can never scope an Idempotency-Key
// (see notAScope), naming every one of them. names are canonicalised.
func checkScopeHeaders(names []string) error {
	var bad []string
	for _, n := range names {
		if why, ok := notAScope[n]; ok {
			bad = append(bad, n+" ("+why+")")
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return &scopeHeaderError{names: bad}
}

type scopeHeaderError struct{ names []string }

func (e *scopeHeaderError) Error() string {
	return "want headers whose value is the same on every request of one caller; " + strings.Join(e.names, ", ") +
		" can never scope an Idempotency-Key"
}

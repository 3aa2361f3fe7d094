// Package testutil holds the helpers the tests of several packages share,
// so that none is copied between them. Only tests import it.
package testutil

import (
	"context"
	"fmt"
	"net/url"
	"sync/atomic"
	"testing"
	"time"
)

// Context is a context that ends with the test, with a deadline (30 s from
// now) that keeps a hung emulator or server from hanging the suite.
func Context(tb testing.TB) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), 30*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

var uniq atomic.Int64

// UniqueName returns a bucket, container or queue name no other test uses:
// prefix, then digits and dashes. Safe for concurrent use.
func UniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e9, uniq.Add(1))
}

// Eventually polls cond every 50 ms until it holds, and fails the test if
// timeout passes first, naming what.
func Eventually(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not within %v", what, timeout)
		}
		<-tick.C
	}
}

// Hosts parses hs ("host:port") as the http:// hosts of a route (a
// core.HostList), failing the test on a bad one.
func Hosts(tb testing.TB, hs ...string) []*url.URL {
	tb.Helper()
	var out []*url.URL
	for _, h := range hs {
		u, err := url.Parse("http://" + h)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

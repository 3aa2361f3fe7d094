package azure_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"fngateway/infra/azure"
	"fngateway/internal/emulators"
)

// newAccount returns an Account on az's development account.
func newAccount(tb testing.TB, az *emulators.Azurite) *azure.Account {
	tb.Helper()
	acct, err := azure.NewAccount(azure.Config{ConnectionString: az.ConnectionString()})
	if err != nil {
		tb.Fatalf("NewAccount: %v", err)
	}
	return acct
}

// testContext is a context that ends with the test, with a deadline that
// keeps a hung emulator from hanging the suite.
func testContext(tb testing.TB) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), 30*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

var uniq atomic.Int64

// uniqueName returns a container or queue name no other test uses.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e9, uniq.Add(1))
}

// eventually polls cond every 50 ms until it holds or timeout passes.
func eventually(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
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

package azure_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
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

// generated returns a reader of n deterministic pseudo-random bytes for
// seed, made as it is read, so large bodies need not sit in memory.
func generated(seed uint64, n int64) io.Reader {
	var key [32]byte
	key[0] = byte(seed)
	key[1] = byte(seed >> 8)
	return io.LimitReader(rand.NewChaCha8(key), n)
}

// digest returns the SHA-256 of r's bytes and their count.
func digest(tb testing.TB, r io.Reader) ([32]byte, int64) {
	tb.Helper()
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		tb.Fatalf("read: %v", err)
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum, n
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

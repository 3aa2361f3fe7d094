// Package testutil holds the helpers the tests of several packages share,
// so that none is copied between them. Only tests import it.
package testutil

import (
	"context"
	"fmt"
	"io"
	"net"
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

// RefusedAddr returns a loopback address ("127.0.0.1:port") nothing listens
// on, so a dial to it is refused at once (Caddy's deadUpstreamAddr): a port
// the system just handed out and that was closed again.
func RefusedAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Putter writes a key of a state store (core.StateStore's Put).
type Putter interface {
	Put(ctx context.Context, key string, data []byte, ifVersion string) (string, error)
}

// NewerMessage is a continuation message in a format version newer than
// this build reads ("v":2), as a newer release beside this one writes it,
// naming a request no store holds.
const NewerMessage = `{"v":2,"id":"0123456789abcdef0123456789abcdef"}`

// PutNewerRecord writes into store an async record in a format version
// newer than this build reads ("v":2, then extra's members, if any), where
// the async engine keeps records (gateway/records/<id>.json, core/async),
// as a newer release beside this one writes it. It returns the record's id
// and a continuation message of this build's format that names it.
func PutNewerRecord(tb testing.TB, store Putter, extra string) (id, message string) {
	tb.Helper()
	id = "fedcba9876543210fedcba9876543210"
	doc := `{"v":2,"id":"` + id + `"`
	if extra != "" {
		doc += "," + extra
	}
	if _, err := store.Put(context.Background(), "gateway/records/"+id+".json", []byte(doc+"}"), ""); err != nil {
		tb.Fatalf("put the newer record: %v", err)
	}
	return id, `{"v":1,"id":"` + id + `"}`
}

// Trickle writes one byte ("x") to w every interval, n times at most, and
// returns after the last, when a write fails, or when stop is closed: a
// client sending its body slowly. Callers run it in a goroutine of their own.
func Trickle(w io.Writer, every time.Duration, n int, stop <-chan struct{}) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for range n {
		select {
		case <-stop:
			return
		case <-tick.C:
			if _, err := io.WriteString(w, "x"); err != nil {
				return
			}
		}
	}
}

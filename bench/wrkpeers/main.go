// Command wrkpeers serves the two peers of `make bench-wrk` on loopback:
// a backend answering every request with 64 bytes, and a bare
// httputil.ReverseProxy in front of it (NewSingleHostReverseProxy, 1024
// idle connections per host, no BufferPool), as the issue that set the
// throughput target measured it. It also reserves a free port for the
// gateway. It prints one line, "backend=<url> bare=<url> gateway=<addr>",
// and serves until killed.
//
// With -proxy <backend URL> it serves only a bare proxy, in front of that
// backend, and prints "bare=<url>": the bare proxy in a process of its own,
// as the gateway is (BARE_PROCESS=own in bench/wrk.sh).
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"time"
)

func listen() net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "wrkpeers:", err)
		os.Exit(1)
	}
	return ln
}

// bareProxy is the bare httputil.ReverseProxy in front of backend.
func bareProxy(backend string) http.Handler {
	u, err := url.Parse(backend)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wrkpeers:", err)
		os.Exit(2)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0) // wrk hangs up mid-request at the end of each run
	rp.Transport = &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
	}
	return rp
}

func main() {
	proxy := flag.String("proxy", "", "serve only a bare proxy in front of this backend URL")
	flag.Parse()
	if *proxy != "" {
		bare := listen()
		fmt.Printf("bare=http://%s\n", bare.Addr())
		http.Serve(bare, bareProxy(*proxy))
		return
	}
	answer := []byte(strings.Repeat("x", 63) + "\n")
	be := listen()
	go http.Serve(be, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write(answer)
	}))
	backend := "http://" + be.Addr().String()
	bare := listen()
	go http.Serve(bare, bareProxy(backend))
	gw := listen() // reserved for the gateway: closed just before it starts
	addr := gw.Addr().String()
	gw.Close()
	fmt.Printf("backend=%s bare=http://%s gateway=%s\n", backend, bare.Addr(), addr)
	select {}
}

// Command wrkpeers serves the two peers of `make bench-wrk` on loopback:
// a backend answering every request with 64 bytes, and a bare
// httputil.ReverseProxy in front of it (NewSingleHostReverseProxy, 1024
// idle connections per host, no BufferPool), as the issue that set the
// throughput target measured it. It also reserves a free port for the
// gateway. It prints one line, "backend=<url> bare=<url> gateway=<addr>",
// and serves until killed.
package main

import (
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

func main() {
	answer := []byte(strings.Repeat("x", 63) + "\n")
	be := listen()
	go http.Serve(be, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write(answer)
	}))
	backend := "http://" + be.Addr().String()
	u, _ := url.Parse(backend)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0) // wrk hangs up mid-request at the end of each run
	rp.Transport = &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
	}
	bare := listen()
	go http.Serve(bare, rp)
	gw := listen() // reserved for the gateway: closed just before it starts
	addr := gw.Addr().String()
	gw.Close()
	fmt.Printf("backend=%s bare=http://%s gateway=%s\n", backend, bare.Addr(), addr)
	select {}
}

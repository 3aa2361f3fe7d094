package local

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// startServer runs s on a loopback port until the test ends and returns
// its address.
func startServer(t *testing.T, s *Server) string {
	t.Helper()
	s.Addr = "127.0.0.1:0"
	ready := make(chan string, 1)
	s.Ready = func(a net.Addr) { ready <- a.String() }
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-errc })
	select {
	case a := <-ready:
		return a
	case err := <-errc:
		t.Fatalf("server did not start: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("server did not listen within 10 s")
	}
	return ""
}

// TestIdleConnectionClosed: a keep-alive connection left idle is closed
// after IdleTimeout (before, it stayed open for ever).
func TestIdleConnectionClosed(t *testing.T) {
	const idle = 300 * time.Millisecond
	addr := startServer(t, &Server{IdleTimeout: idle,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: gw\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	start := time.Now()
	// The read deadline is the liveness bound: an EOF before it is the
	// server's close, however late a loaded machine runs its timer.
	conn.SetReadDeadline(time.Now().Add(idle + 30*time.Second))
	_, err = br.ReadByte()
	took := time.Since(start)
	if err != io.EOF {
		t.Fatalf("idle connection: read gave %v after %v; want EOF (closed by the server)", err, took)
	}
	if took < idle-50*time.Millisecond {
		t.Errorf("idle connection closed after %v; want not before %v", took, idle)
	}
}

// TestDefaultIdleTimeout: a zero IdleTimeout means DefaultIdleTimeout,
// which is finite.
func TestDefaultIdleTimeout(t *testing.T) {
	if DefaultIdleTimeout <= 0 || DefaultIdleTimeout > 10*time.Minute {
		t.Errorf("DefaultIdleTimeout = %v; want a finite limit of minutes", DefaultIdleTimeout)
	}
}

// TestHandlerPanicLogged: the server's own reports (a handler panic) reach
// a logger at the default level.
func TestHandlerPanicLogged(t *testing.T) {
	var buf syncBuffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil)) // Info and above
	addr := startServer(t, &Server{Logger: logger,
		Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom in handler") })})
	if resp, err := http.Get("http://" + addr + "/"); err == nil {
		resp.Body.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(buf.String(), "boom in handler") {
		if time.Now().After(deadline) {
			t.Fatalf("the panic was not logged at the default level; log:\n%s", buf.String())
		}
		time.Sleep(10 * time.Millisecond) // polling a log with a deadline
	}
	if !strings.Contains(buf.String(), `"level":"ERROR"`) {
		t.Errorf("panic logged below Error: %s", buf.String())
	}
}

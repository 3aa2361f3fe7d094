package httpapi

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// FuzzRequestFraming sends hostile request framing — chunked bodies,
// Content-Length and Transfer-Encoding in every combination — to the real
// handler on a real listener (as the local and Azure hosts serve it). The
// answer, when one comes, is the backend's (the request was forwarded), a
// well-formed gateway error (JSON, its code in x-Gateway-Error: 400
// InvalidBody for bad framing; a header the fuzzer wrote may also earn
// InvalidTTL, TTLExpired and the like), or net/http's own 4xx (or 501 for
// a transfer coding it does not know). Never a 2xx the gateway made up.
func FuzzRequestFraming(f *testing.F) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			w.Header().Set("X-Backend", "yes")
			w.WriteHeader(http.StatusTeapot) // the backend saw a bad body
			return
		}
		w.Header().Set("X-Backend", "yes")
		io.WriteString(w, "forwarded")
	}))
	defer be.Close()
	addr := serveGW(f, be.URL)
	seeds := []string{
		"Content-Length: 5\r\n\r\nhello",
		"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
		"Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
		"Transfer-Encoding: chunked\r\n\r\nfffffffffffffffffff\r\nabc\r\n0\r\n\r\n",
		"Transfer-Encoding: chunked\r\n\r\n3\r\nabcX0\r\n\r\n",
		"Transfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n1\r\na\r\n0\r\nX-T: 1\r\n\r\n",
		"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
		"Transfer-Encoding: identity\r\n\r\n",
		"Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
		"Content-Length: -1\r\n\r\n",
		"Content-Length: 64424509440\r\n\r\nabc",
		"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rest string) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(time.Second))
		go io.WriteString(conn, "POST /f HTTP/1.1\r\nHost: gw\r\n"+rest)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return // no answer: a request still incomplete, or a connection closed
		}
		body, bodyErr := io.ReadAll(resp.Body)
		resp.Body.Close()
		code := resp.Header.Get("X-Gateway-Error")
		switch {
		case resp.Header.Get("X-Backend") == "yes":
		case resp.StatusCode/100 == 2:
			t.Fatalf("the gateway made a %d for %q", resp.StatusCode, rest)
		case code != "":
			var doc struct{ Error struct{ Code string } }
			if bodyErr != nil || json.Unmarshal(body, &doc) != nil || doc.Error.Code != code || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("gateway error %d %q (x-Gateway-Error %q) to %q: not well-formed", resp.StatusCode, body, code, rest)
			}
		case resp.StatusCode/100 == 4, resp.StatusCode == http.StatusNotImplemented:
			// net/http's own answer to a request it could not read
		default:
			t.Fatalf("answer %d %q to %q; want the backend's, a gateway error or a 4xx", resp.StatusCode, body, rest)
		}
	})
}

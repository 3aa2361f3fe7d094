package tests

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

// TestResponseHeaderLimit: a backend's answer whose header section passes
// MaxResponseHeaderBytes is never relayed (issue 34: 200,000 headers, 2 MB,
// went through): the attempt fails and the client gets 502
// BackendUnavailable; an answer within it passes. Both the default (1 MiB)
// and a smaller setting hold.
func TestResponseHeaderLimit(t *testing.T) {
	t.Parallel()
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("headers"))
		h := w.Header()
		for i := range n {
			h["X-H"+strconv.Itoa(i)] = []string{"v"}
		}
		w.Write([]byte("ok"))
	}))
	defer be.Close()
	for _, tt := range []struct {
		name    string
		env     map[string]string
		headers int // of about 10 bytes each
		want    int
	}{
		{"default: 200,000 headers (2 MB)", nil, 200_000, 502},
		{"default: 1,000 headers", nil, 1000, 200},
		{"4096 bytes: 1,000 headers", map[string]string{"MaxResponseHeaderBytes": "4096"}, 1000, 502},
		{"4096 bytes: 100 headers", map[string]string{"MaxResponseHeaderBytes": "4096"}, 100, 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"Hosts": be.URL}
			for k, v := range tt.env {
				env[k] = v
			}
			gw := StartGateway(t, env)
			resp, body, _ := Do(t, "GET", gw.URL+"/x?headers="+strconv.Itoa(tt.headers), nil, "")
			if resp.StatusCode != tt.want {
				t.Fatalf("%d %.300s; want %d", resp.StatusCode, body, tt.want)
			}
			if tt.want == 502 {
				ed := decodeError(t, resp, body)
				if ed.Error.Code != "BackendUnavailable" || len(ed.Error.Attempts) != 1 || ed.Error.Attempts[0].Outcome != "connect-error" {
					t.Errorf("%s; want BackendUnavailable, its one attempt's outcome connect-error", body)
				}
				if len(resp.Header) > 20 {
					t.Errorf("the client got %d headers; want the gateway error's only", len(resp.Header))
				}
			} else if string(body) != "ok" || resp.Header.Get("X-H0") != "v" {
				t.Errorf("body %q, X-H0 %q; want the backend's answer", body, resp.Header.Get("X-H0"))
			}
		})
	}
}

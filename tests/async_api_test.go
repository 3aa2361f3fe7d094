package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// apiBackend answers by path, after delay, so that every request goes
// async first (the trigger is 300 ms):
//
//	/ok           201 text/plain "report for <path>: <body>", X-Report: yes
//	/json         201 application/json jsonBody
//	/fail         500 application/json {"error":"backend broke"}
//	/exact        200 application/octet-stream, inlineLimit bytes
//	/large        200 application/octet-stream, largeSize bytes
//	/large-fail   500 text/plain, largeSize bytes
//	/drop         the connection closed without an answer
//	/hang         no answer until the request is cancelled
//
// It counts calls and the requests it saw cancelled (their connection
// closed), and notes when the last one was.
type apiBackend struct {
	*httptest.Server
	calls, cancelled atomic.Int64
	cancelledAt      atomic.Int64 // unix nanoseconds
}

// largeSize is above apiEnv's AsyncInlineResultBytes, inlineLimit.
const (
	largeSize   = 3000
	inlineLimit = 1000
)

// jsonBody is what /json answers, with an escape that must stay as sent.
const jsonBody = `{"report":"q3","rows":[1,2,3],"note":"exact bytes \u00e9"}`

func largeBody() []byte { return bytes.Repeat([]byte("0123456789abcdef"), largeSize/16+1)[:largeSize] }

// apiDelay is how long the API backend takes to answer: seconds past the
// tests' 300 ms AsyncTriggerTimeout, so a request is handed off (202) and
// its pending states are seen however loaded the machine.
const apiDelay = 2 * time.Second

func newAPIBackend(tb testing.TB, delay time.Duration) *apiBackend {
	b := &apiBackend{}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		wait := delay
		if strings.HasSuffix(r.URL.Path, "/hang") {
			wait = time.Hour
		}
		select {
		case <-time.After(wait):
		case <-r.Context().Done():
			b.cancelledAt.Store(time.Now().UnixNano())
			b.cancelled.Add(1)
			return
		}
		switch p := r.URL.Path; {
		case strings.HasSuffix(p, "/ok"):
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("X-Report", "yes")
			w.WriteHeader(201)
			fmt.Fprintf(w, "report for %s: %s", p, body)
		case strings.HasSuffix(p, "/json"):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(201)
			w.Write([]byte(jsonBody))
		case strings.HasSuffix(p, "/fail"):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(500)
			w.Write([]byte(`{"error":"backend broke"}`))
		case strings.HasSuffix(p, "/exact"):
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write(largeBody()[:inlineLimit])
		case strings.HasSuffix(p, "/large"):
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write(largeBody())
		case strings.HasSuffix(p, "/large-fail"):
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(500)
			w.Write(largeBody())
		case strings.HasSuffix(p, "/drop"):
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		}
	}))
	tb.Cleanup(b.Server.Close)
	return b
}

// apiEnv is asyncEnv with AsyncInlineResultBytes below largeSize.
func apiEnv(hosts, dir string) map[string]string {
	env := asyncEnv(hosts, dir)
	env["AsyncInlineResultBytes"] = strconv.Itoa(inlineLimit)
	return env
}

// operationDoc is the operation URI's document.
type operationDoc struct {
	ID               string `json:"id"`
	Status           string `json:"status"`
	Created          string `json:"createdDateTime"`
	Updated          string `json:"lastUpdatedDateTime"`
	ResourceLocation string `json:"resourceLocation"`
	Error            *struct {
		Code       string `json:"code"`
		Message    string `json:"message"`
		InnerError struct {
			Status int `json:"status"`
		} `json:"innererror"`
	} `json:"error"`
}

// getOperation reads an operation URI, which always answers 200 with the
// document (and Retry-After while not terminal).
func getOperation(tb testing.TB, uri string) operationDoc {
	tb.Helper()
	resp, body, _ := Do(tb, "GET", uri, nil, "")
	return decodeOperation(tb, resp, body, 200)
}

func decodeOperation(tb testing.TB, resp *http.Response, body []byte, want int) operationDoc {
	tb.Helper()
	if resp.StatusCode != want || resp.Header.Get("Content-Type") != "application/json" {
		tb.Fatalf("operation document: %d %s %s; want %d JSON", resp.StatusCode, resp.Header.Get("Content-Type"), body, want)
	}
	var d operationDoc
	if err := json.Unmarshal(body, &d); err != nil {
		tb.Fatalf("operation document %s: %v", body, err)
	}
	terminal := d.Status == "Succeeded" || d.Status == "Failed" || d.Status == "Canceled"
	if ra := resp.Header.Get("Retry-After"); terminal == (ra != "") {
		tb.Errorf("operation %s with Retry-After %q; want it only while not terminal", d.Status, ra)
	}
	if resp.Header.Get("X-Attempts") == "" {
		tb.Errorf("operation document without x-Attempts")
	}
	for _, ts := range []string{d.Created, d.Updated} {
		if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
			tb.Errorf("operation times %q, %q: want RFC 3339", d.Created, d.Updated)
		}
	}
	return d
}

// TestAsyncStatusAnswersResult: once finished, the status URI answers the
// result itself, whatever its status; a success larger than
// AsyncInlineResultBytes is 303 to its data URL; the 202 names an operation
// URI whose document says Succeeded only for a 2xx result.
func TestAsyncStatusAnswersResult(t *testing.T) {
	t.Parallel()
	be := newAPIBackend(t, apiDelay)
	gw := StartGateway(t, apiEnv(be.URL, t.TempDir()))
	tests := []struct {
		path        string
		wantStatus  int
		wantType    string
		wantBody    []byte
		wantCode    string // x-Gateway-Error
		wantOp      string
		wantOpError string
	}{
		{"/r/ok", 201, "text/plain", []byte("report for /r/ok: payload-123"), "", "Succeeded", ""},
		{"/r/fail", 500, "application/json", []byte(`{"error":"backend broke"}`), "", "Failed", "BackendStatus"},
		{"/r/large-fail", 500, "text/plain", largeBody(), "", "Failed", "BackendStatus"},
		{"/r/drop", 502, "application/json", nil, "BackendUnavailable", "Failed", "BackendUnavailable"},
		{"/r/large", 303, "", nil, "", "Succeeded", ""},
		{"/r/exact", 200, "application/octet-stream", largeBody()[:inlineLimit], "", "Succeeded", ""},
	}
	for _, tt := range tests {
		t.Run(strings.TrimPrefix(tt.path, "/r/"), func(t *testing.T) {
			resp, acc, _ := submitAsync(t, gw.URL, tt.path, nil)
			if ol := resp.Header.Get("Operation-Location"); ol != acc.StatusURI+"/operation" || acc.OperationURI != ol {
				t.Errorf("Operation-Location = %q, operationUri %q; want both %s/operation", ol, acc.OperationURI, acc.StatusURI)
			}
			if d := getOperation(t, resp.Header.Get("Operation-Location")); d.Status != "Running" && d.Status != "NotStarted" || d.ID != acc.ID {
				t.Errorf("operation while pending = %+v; want Running", d)
			}

			res, data, _ := waitResult(t, acc.StatusURI, apiDelay+loadMargin) // the backend's delay
			if res.StatusCode != tt.wantStatus {
				t.Fatalf("status URI once done = %d %s; want %d", res.StatusCode, data, tt.wantStatus)
			}
			if n := res.Header.Get("X-Attempts"); n != "1" {
				t.Errorf("x-Attempts = %q; want 1", n)
			}
			switch {
			case tt.wantStatus == 303:
				loc := res.Header.Get("Location")
				r2, d2, _ := Do(t, "GET", loc, nil, "")
				if r2.StatusCode != 200 || !bytes.Equal(d2, largeBody()) {
					t.Errorf("303 Location %s = %d (%d bytes); want the backend's exact %d bytes", loc, r2.StatusCode, len(d2), largeSize)
				}
			case tt.wantCode != "":
				if d := decodeError(t, res, data); d.Error.Code != tt.wantCode || len(d.Error.Attempts) != 1 {
					t.Errorf("error = %+v; want %s with its attempt", d.Error, tt.wantCode)
				}
			default:
				if ct := res.Header.Get("Content-Type"); ct != tt.wantType || !bytes.Equal(data, tt.wantBody) {
					t.Errorf("result = %s %q; want the backend's %s %q", ct, data, tt.wantType, tt.wantBody)
				}
			}

			d := getOperation(t, resp.Header.Get("Operation-Location"))
			if d.Status != tt.wantOp || d.ID != acc.ID {
				t.Errorf("operation = %+v; want %s", d, tt.wantOp)
			}
			if tt.wantOp == "Succeeded" && (d.ResourceLocation != acc.StatusURI || d.Error != nil) {
				t.Errorf("succeeded operation = %+v; want resourceLocation %s and no error", d, acc.StatusURI)
			}
			if tt.wantOp == "Failed" {
				if d.Error == nil || d.Error.Code != tt.wantOpError || d.Error.Message == "" || d.Error.InnerError.Status != tt.wantStatus || d.ResourceLocation != "" {
					t.Errorf("failed operation = %+v; want error %s, innererror.status %d", d, tt.wantOpError, tt.wantStatus)
				}
			}
			// DELETE on a finished request: 200, its document, nothing changes.
			r3, b3, _ := Do(t, "DELETE", acc.StatusURI, nil, "")
			if d3 := decodeOperation(t, r3, b3, 200); d3.Status != tt.wantOp {
				t.Errorf("DELETE once finished = %+v; want 200 %s", d3, tt.wantOp)
			}
			if again, data2, _ := Do(t, "GET", acc.StatusURI, nil, ""); again.StatusCode != tt.wantStatus || (tt.wantStatus != 303 && !bytes.Equal(data, data2)) {
				t.Errorf("status URI after DELETE = %d; want %d unchanged", again.StatusCode, tt.wantStatus)
			}
		})
	}

	t.Run("unknown ids and methods", func(t *testing.T) {
		for _, u := range []string{"/_gateway/async/0123456789abcdef0123456789abcdef/operation", "/_gateway/async/nothex/operation"} {
			if resp, _, _ := Do(t, "GET", gw.URL+u, nil, ""); resp.StatusCode != 404 {
				t.Errorf("GET %s = %d; want 404", u, resp.StatusCode)
			}
		}
		if resp, _, _ := Do(t, "DELETE", gw.URL+"/_gateway/async/0123456789abcdef0123456789abcdef", nil, ""); resp.StatusCode != 404 {
			t.Errorf("DELETE unknown = %d; want 404", resp.StatusCode)
		}
		if resp, _, _ := Do(t, "POST", gw.URL+"/_gateway/async/0123456789abcdef0123456789abcdef", nil, "x"); resp.StatusCode != 405 {
			t.Errorf("POST on a status URI = %d; want 405", resp.StatusCode)
		}
	})
}

// TestAsyncCancel: DELETE on the status URI of a request whose backend
// hangs: 202 with the operation document, the in-flight attempt cancelled
// at once (the backend sees its connection closed), then 409 Canceled
// from the status URI, Canceled from the monitor, exactly one result; a
// second DELETE changes nothing.
func TestAsyncCancel(t *testing.T) {
	t.Parallel()
	be := newAPIBackend(t, apiDelay)
	dir := t.TempDir()
	gw := StartGateway(t, apiEnv(be.URL, dir))
	_, acc, _ := submitAsync(t, gw.URL, "/r/hang", nil)
	// The attempt goes on after the 202 (on a loaded machine the trigger
	// can fire before it reaches the backend).
	waitFor(t, loadMargin, "the attempt at the backend", func() bool { return be.calls.Load() >= 1 })
	if n := be.calls.Load(); n != 1 {
		t.Fatalf("backend calls = %d; want the in-flight attempt", n)
	}
	sent := time.Now()
	resp, body, _ := Do(t, "DELETE", acc.StatusURI, nil, "")
	d := decodeOperation(t, resp, body, 202)
	if d.Status != "Running" && d.Status != "Canceled" {
		t.Errorf("DELETE answer = %+v; want Running or Canceled", d)
	}
	if ol := resp.Header.Get("Operation-Location"); ol != acc.StatusURI+"/operation" {
		t.Errorf("DELETE Operation-Location = %q", ol)
	}
	res, data, states := waitResult(t, acc.StatusURI, apiDelay+loadMargin) // the backend's delay, at most
	took := time.Since(sent)
	if res.StatusCode != 409 {
		t.Fatalf("status URI after DELETE = %d %s (states %v); want 409", res.StatusCode, data, states)
	}
	if e := decodeError(t, res, data); e.Error.Code != "Canceled" {
		t.Errorf("code = %q; want Canceled", e.Error.Code)
	}
	// The /hang backend answers after an hour: its closed connection and
	// the 409 within the wait show the cancel acted, not the attempt's end.
	// How fast is no bound here (a loaded machine stretches it).
	if be.cancelled.Load() != 1 {
		t.Errorf("backend saw %d cancelled requests (the cancel took %v); want 1 (its connection closed)", be.cancelled.Load(), took)
	} else if at := time.Unix(0, be.cancelledAt.Load()).Sub(sent); at > loadMargin {
		t.Errorf("the backend's connection closed %v after the DELETE; want within %v", at, loadMargin)
	}
	op := getOperation(t, acc.StatusURI+"/operation")
	if op.Status != "Canceled" || op.Error == nil || op.Error.Code != "Canceled" || op.Error.InnerError.Status != 409 {
		t.Errorf("operation = %+v; want Canceled with error Canceled, innererror.status 409", op)
	}
	resp, body, _ = Do(t, "DELETE", acc.StatusURI, nil, "")
	if d := decodeOperation(t, resp, body, 200); d.Status != "Canceled" {
		t.Errorf("second DELETE = %+v; want 200 Canceled", d)
	}
	if n := countFiles(t, dir, "headers.json"); n != 1 {
		t.Errorf("header blobs = %d; want 1", n)
	}
	if n := be.calls.Load(); n != 1 {
		t.Errorf("backend calls = %d; want 1", n)
	}
}

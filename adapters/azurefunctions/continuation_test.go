package azurefunctions

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// The request payload the Functions host POSTs to a custom handler for a
// queue trigger, as Microsoft's "Azure Functions custom handlers" article
// (section "Request payload") shows it:
//
//	{
//	  "Data": {
//	    "myQueueItem": "{ message: \"Message sent\" }"
//	  },
//	  "Metadata": {
//	    "DequeueCount": 1,
//	    "ExpirationTime": "2019-10-16T17:58:31+00:00",
//	    "Id": "800ae4b3-bdd2-4c08-badd-f08e5a34b865",
//	    "InsertionTime": "2019-10-09T17:58:31+00:00",
//	    "NextVisibleTime": "2019-10-09T18:08:32+00:00",
//	    "PopReceipt": "AgAAAAMAAAAAAAAAAgtnj8x+1QE=",
//	    "sys": {
//	      "MethodName": "QueueTrigger",
//	      "UtcNow": "2019-10-09T17:58:32.2205399Z",
//	      "RandGuid": "24ad4c06-24ad-4e5b-8294-3da9714877e9"
//	    }
//	  }
//	}
//
// "Data" is keyed by the trigger's binding name ("message" in
// continuation/function.json). The response payload is
// {"Outputs":{…},"Logs":[…],"ReturnValue":…}.
const docPayload = `{
  "Data": {"message": "{\"v\":1,\"id\":\"0123456789abcdef0123456789abcdef\"}"},
  "Metadata": {
    "DequeueCount": 1,
    "ExpirationTime": "2019-10-16T17:58:31+00:00",
    "Id": "800ae4b3-bdd2-4c08-badd-f08e5a34b865",
    "InsertionTime": "2019-10-09T17:58:31+00:00",
    "NextVisibleTime": "2019-10-09T18:08:32+00:00",
    "PopReceipt": "AgAAAAMAAAAAAAAAAgtnj8x+1QE=",
    "sys": {"MethodName": "QueueTrigger", "UtcNow": "2019-10-09T17:58:32.2205399Z", "RandGuid": "24ad4c06-24ad-4e5b-8294-3da9714877e9"}
  }
}`

func TestDecodeInvocation(t *testing.T) {
	const msg = `{"v":1,"id":"0123456789abcdef0123456789abcdef"}`
	tests := []struct {
		name, body string
		want       string
		count      int
	}{
		{"the documented payload, text as a string", docPayload, msg, 1},
		{"text as an object", `{"Data":{"message":` + msg + `},"Metadata":{"DequeueCount":2,"Id":"m"}}`, msg, 2},
		{"dequeue count as a string", `{"Data":{"message":"x"},"Metadata":{"DequeueCount":"3"}}`, "x", 3},
		{"no metadata", `{"Data":{"message":"x"}}`, "x", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv, err := DecodeInvocation([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if string(inv.Message) != tt.want || inv.DequeueCount != tt.count {
				t.Errorf("got %q, dequeue %d; want %q, %d", inv.Message, inv.DequeueCount, tt.want, tt.count)
			}
		})
	}
	for _, bad := range []string{``, `[]`, `{"Data":{}}`, `{"Data":{"other":"x"}}`, `{"Data":{"message":1}}`,
		`{"Data":{"message":null}}`, `{"Data":{"message":[1]}}`, `{"Data":{"message":"x"},"Metadata":{"DequeueCount":"two"}}`,
		`{"Data":{"message":"x"},"Metadata":{"DequeueCount":-1}}`} {
		if inv, err := DecodeInvocation([]byte(bad)); !errors.Is(err, ErrBadInvocation) {
			t.Errorf("DecodeInvocation(%s) = %+v, %v; want ErrBadInvocation", bad, inv, err)
		}
	}
}

// FuzzDecodeInvocation: a message text wrapped in the host's envelope, as a
// JSON string, comes back byte for byte; and no input makes the decoder
// fail other than with ErrBadInvocation.
func FuzzDecodeInvocation(f *testing.F) {
	f.Add(`{"v":1,"id":"0123456789abcdef0123456789abcdef"}`, 1, []byte(docPayload))
	f.Add("not json \x00 \u2028", 7, []byte(`{"Data":{"message":{}}}`))
	f.Fuzz(func(t *testing.T, text string, count int, raw []byte) {
		if _, err := DecodeInvocation(raw); err != nil && !errors.Is(err, ErrBadInvocation) {
			t.Fatalf("DecodeInvocation(%q): %v does not wrap ErrBadInvocation", raw, err)
		}
		if count < 0 {
			count = -count
		}
		body, err := json.Marshal(map[string]any{"Data": map[string]string{BindingName: text}, "Metadata": map[string]any{"DequeueCount": count, "Id": "m"}})
		if err != nil {
			t.Skip()
		}
		inv, err := DecodeInvocation(body)
		if err != nil {
			t.Fatalf("DecodeInvocation(%s): %v", body, err)
		}
		// json.Marshal replaces invalid UTF-8; compare with what it encoded.
		var want string
		json.Unmarshal(must(json.Marshal(text)), &want)
		if string(inv.Message) != want || inv.DequeueCount != count {
			t.Fatalf("got %q, %d; want %q, %d", inv.Message, inv.DequeueCount, want, count)
		}
	})
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func TestLogHandler(t *testing.T) {
	var buf strings.Builder
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil))).With("host", "az")
	ctx := withInvocation(context.Background(), "inv-1")
	log.InfoContext(ctx, "with")
	log.InfoContext(context.Background(), "without")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"invocationId":"inv-1"`) || !strings.Contains(lines[0], `"host":"az"`) ||
		strings.Contains(lines[1], "invocationId") {
		t.Errorf("log lines = %q; want the invocation id on the first only", lines)
	}
}

package azurefunctions

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
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
		`{"Data":{"message":null}}`, `{"Data":{"message":[1]}}`} {
		if inv, err := DecodeInvocation([]byte(bad)); !errors.Is(err, ErrBadInvocation) {
			t.Errorf("DecodeInvocation(%s) = %+v, %v; want ErrBadInvocation", bad, inv, err)
		}
	}
	// Metadata the message does not need is reported, not fatal.
	for _, meta := range []string{`{"DequeueCount":"two"}`, `{"DequeueCount":-1}`} {
		inv, err := DecodeInvocation([]byte(`{"Data":{"message":"x"},"Metadata":` + meta + `}`))
		if err != nil || string(inv.Message) != "x" || inv.DequeueCount != 0 || !strings.Contains(inv.MetadataErr, "Metadata.DequeueCount") {
			t.Errorf("DecodeInvocation(Metadata %s) = %+v, %v; want the message, DequeueCount 0 and MetadataErr naming it", meta, inv, err)
		}
	}
}

// TestInvocationQueueAge: Metadata.InsertionTime gives the message's age
// in the queue at delivery; missing or malformed, it is reported in
// MetadataErr, naming the field, and the invocation still decodes.
func TestInvocationQueueAge(t *testing.T) {
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name, insertion string // Metadata.InsertionTime's JSON; "" for none
		age             time.Duration
		err             string // in MetadataErr; "" when the age is known
	}{
		{"UTC offset, as the host writes it", `"2026-05-01T09:58:30+00:00"`, 90 * time.Second, ""},
		{"Z and fractions", `"2026-05-01T09:59:59.5Z"`, 500 * time.Millisecond, ""},
		{"another offset", `"2026-05-01T11:59:00+02:00"`, time.Minute, ""},
		{"quoted twice", `"\"2026-05-01T09:59:00+00:00\""`, time.Minute, ""},
		{"a clock ahead of this one", `"2026-05-01T10:00:05+00:00"`, 0, ""},
		{"missing", ``, 0, "Metadata.InsertionTime is missing"},
		{"null", `null`, 0, "Metadata.InsertionTime is missing"},
		{"a number", `1714557600`, 0, "Metadata.InsertionTime"},
		{"not a time", `"yesterday"`, 0, "Metadata.InsertionTime \"yesterday\" is not an RFC 3339 time"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			meta := `"DequeueCount":1`
			if tt.insertion != "" {
				meta += `,"InsertionTime":` + tt.insertion
			}
			inv, err := DecodeInvocation([]byte(`{"Data":{"message":"x"},"Metadata":{` + meta + `}}`))
			if err != nil {
				t.Fatalf("DecodeInvocation: %v; want the message decoded whatever its InsertionTime", err)
			}
			age, ok := inv.QueueAge(now)
			if tt.err == "" {
				if !ok || age != tt.age || inv.MetadataErr != "" {
					t.Errorf("QueueAge = %v, %v (MetadataErr %q); want %v", age, ok, inv.MetadataErr, tt.age)
				}
				return
			}
			if ok || !strings.Contains(inv.MetadataErr, tt.err) {
				t.Errorf("QueueAge = %v, %v, MetadataErr %q; want no age and an error with %q", age, ok, inv.MetadataErr, tt.err)
			}
		})
	}
}

// FuzzDecodeInvocation: a message text wrapped in the host's envelope, as a
// JSON string, comes back byte for byte; and no input makes the decoder
// fail other than with ErrBadInvocation.
func FuzzDecodeInvocation(f *testing.F) {
	f.Add(`{"v":1,"id":"0123456789abcdef0123456789abcdef"}`, 1, []byte(docPayload))
	f.Add("not json \x00 \u2028", 7, []byte(`{"Data":{"message":{}}}`))
	f.Fuzz(func(t *testing.T, text string, count int, raw []byte) {
		inserted := time.Unix(int64(count)%(1<<33), int64(len(text))).UTC()
		if _, err := DecodeInvocation(raw); err != nil && !errors.Is(err, ErrBadInvocation) {
			t.Fatalf("DecodeInvocation(%q): %v does not wrap ErrBadInvocation", raw, err)
		}
		if count < 0 {
			count = -count
		}
		body, err := json.Marshal(map[string]any{"Data": map[string]string{BindingName: text}, "Metadata": map[string]any{"DequeueCount": count, "Id": "m", "InsertionTime": inserted.Format(time.RFC3339Nano)}})
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
		if string(inv.Message) != want || inv.DequeueCount != count || !inv.InsertedAt.Equal(inserted) {
			t.Fatalf("got %q, %d, %v; want %q, %d, %v", inv.Message, inv.DequeueCount, inv.InsertedAt, want, count, inserted)
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

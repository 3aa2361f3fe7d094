package azurefunctions

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"fngateway/core/async"
	"fngateway/infra/filestore"
	"fngateway/internal/testutil"
)

// TestContinuationNewerFormat: a queue-triggered continuation whose message,
// or the async record it names, is in a format version newer than this
// build reads (instances of two versions side by side in a rolling deploy,
// or a rollback) is answered 503, so that the host delivers it again (to an
// instance that can read it), with one line saying so; the record is not
// marked corrupt. Before, the message was answered 422 as undecodable (on
// to the poison queue), and a newer record was settled as corrupt.
func TestContinuationNewerFormat(t *testing.T) {
	fs, err := filestore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id, idMsg := testutil.PutNewerRecord(t, fs, "")
	var logs bytes.Buffer
	s := &Server{Continuations: &async.Async{Store: fs, Queue: fs}, Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
	for _, msg := range []string{testutil.NewerMessage, idMsg} {
		t.Run(msg, func(t *testing.T) {
			logs.Reset()
			text, _ := json.Marshal(msg)
			body := `{"Data":{"message":` + string(text) + `},"Metadata":{"DequeueCount":1,"Id":"m1"}}`
			w := httptest.NewRecorder()
			s.ServeHTTP(w, httptest.NewRequest(http.MethodPost, ContinuationPath, strings.NewReader(body)))
			if w.Code != http.StatusServiceUnavailable {
				t.Errorf("status %d %s; want 503 (delivered again)", w.Code, w.Body)
			}
			if !strings.Contains(logs.String(), `"msg":"continuation left for a newer release`) {
				t.Errorf("no line saying the message is left for a newer release; logs:\n%s", logs.String())
			}
		})
	}
	if _, _, err := fs.Get(ctx, "gateway/corrupt/"+id); err == nil {
		t.Errorf("the record was marked corrupt")
	}
}

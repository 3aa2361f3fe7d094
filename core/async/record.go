package async

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"

	"fngateway/core"
)

// The wire formats of async continuations: the queue message, the
// continuation record, the idempotency index entry and the result header
// blob. Each is versioned JSON. The decoders check every member they know,
// because messages and records come back from storage the gateway does not
// fully control, and tolerate the ones they do not, because another release
// may have written them (format.go).

// ErrBadMessage is wrapped by the error decodeContinuation returns, and so by
// Async.Process, for a continuation message that cannot be decoded. The
// adapter fails that message alone (docs/async-api.md#corrupt-records-and-messages).
var ErrBadMessage = errors.New("bad continuation message")

// errBadRecord is wrapped by the error decodeAsyncRecord returns for a
// continuation record that cannot be decoded. It is ErrCorruptRecord itself,
// the one sentinel stores wrap too, under its historical name.
var errBadRecord = ErrCorruptRecord

// continuationVersion and recordVersion are the format versions written.
const (
	continuationVersion = 1
	recordVersion       = 1
)

// maxMessageBytes bounds a continuation message; real ones are ~60 bytes.
const maxMessageBytes = 4 << 10

// wireContinuation is the payload of a queue message: "continue async request
// ID". Its wire form is {"v":1,"id":"<32 hex digits>"}.
type wireContinuation struct {
	ID string
}

type continuationJSON struct {
	V  int    `json:"v"`
	ID string `json:"id"`
}

// Encode returns c's wire form.
func (c wireContinuation) Encode() []byte {
	b, _ := json.Marshal(continuationJSON{V: continuationVersion, ID: c.ID})
	return b
}

// decodeContinuation parses a queue message body. A message of a version
// newer than continuationVersion is an error wrapping ErrNewerFormat;
// anything else but one JSON object of version 1 with a well-formed id is an
// error wrapping ErrBadMessage. Other members are ignored: a message is
// never rewritten, only sent anew (see format.go for the rule).
func decodeContinuation(b []byte) (wireContinuation, error) {
	if len(b) > maxMessageBytes {
		return wireContinuation{}, fmt.Errorf("%w: %d bytes, want at most %d", ErrBadMessage, len(b), maxMessageBytes)
	}
	v, err := formatVersion(b)
	if err != nil {
		return wireContinuation{}, fmt.Errorf("%w: %v", ErrBadMessage, err)
	}
	if v > continuationVersion {
		return wireContinuation{}, newerFormat("continuation message", v, continuationVersion)
	}
	var w continuationJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return wireContinuation{}, fmt.Errorf("%w: %v", ErrBadMessage, err)
	}
	if !validAsyncID(w.ID) {
		return wireContinuation{}, fmt.Errorf("%w: id %.40q is not 32 lowercase hex digits", ErrBadMessage, w.ID)
	}
	return wireContinuation{ID: w.ID}, nil
}

// State is where an async request is in its life.
type State string

// The states of the status document (docs/async-api.md#the-status-uri), plus abandoned: a
// submission that failed after its record was written (never reported; the
// client got 503 and no id).
const (
	StateQueued    State = "queued"
	StateRunning   State = "running"
	StateSucceeded State = "succeeded"
	StateFailed    State = "failed"
	StateExpired   State = "expired"
	StateAbandoned State = "abandoned"
	// StateCancelling: the client asked to cancel (DELETE on the status
	// URI); the cancellation, or a result that wins the race, is still to
	// be written. StateCanceled: the cancellation was written.
	StateCancelling State = "cancelling"
	StateCanceled   State = "canceled"
)

// Done reports whether s is final: a result exists, or never will.
func (s State) Done() bool {
	switch s {
	case StateSucceeded, StateFailed, StateExpired, StateAbandoned, StateCanceled:
		return true
	}
	return false
}

func (s State) valid() bool {
	return s == StateQueued || s == StateRunning || s == StateCancelling || s.Done()
}

// claimLease is a claim on a record: its holder alone may run the request and
// write the result, until Until. A lapsed lease may be taken over.
type claimLease struct {
	// Owner is the holder's random token (32 hex digits).
	Owner string `json:"owner"`
	// Until is when the lease lapses unless renewed.
	Until time.Time `json:"until"`
	// Inflight marks the claim of the submitting process (Submit with
	// inflight set), as opposed to a queue worker's.
	Inflight bool `json:"inflight,omitempty"`
}

// requestSnapshot is what a continuation needs to send the request again.
// The body lives in its own blob, gateway/requests/<id>.
type requestSnapshot struct {
	Method         string      `json:"method"`
	Path           string      `json:"path"`
	RawQuery       string      `json:"query,omitempty"`
	Header         http.Header `json:"header,omitempty"`
	Host           string      `json:"host,omitempty"`
	RemoteAddr     string      `json:"remoteAddr,omitempty"`
	Proto          string      `json:"proto,omitempty"`
	IdempotencyKey string      `json:"idempotencyKey,omitempty"`
	ClientKey      bool        `json:"clientKey,omitempty"`
	// BodySize is the body's length in bytes; zero means no body blob.
	BodySize int64 `json:"bodySize,omitempty"`
	// BodyStreamed says the body was too large to buffer: it is sent
	// streaming from its blob, by one attempt only.
	BodyStreamed bool `json:"bodyStreamed,omitempty"`
	// Trace is the submitting request's trace context (Observer.TraceContext,
	// a W3C traceparent and tracestate), which a continuation's telemetry
	// links to; "" when telemetry was off.
	Trace string `json:"trace,omitempty"`
}

// recordResult describes the committed result of a finished record.
type recordResult struct {
	// Status is the HTTP status in the header blob.
	Status      int       `json:"status"`
	CompletedAt time.Time `json:"completedAt"`
	// Code is the gateway's error code (x-Gateway-Error) of a
	// gateway-made result; "" for the backend's answer.
	Code string `json:"code,omitempty"`
}

// asyncRecord is a continuation record, stored as JSON at
// gateway/records/<id>.json and changed only by conditional writes.
type asyncRecord struct {
	// V is the format version, 1.
	V     int    `json:"v"`
	ID    string `json:"id"`
	State State  `json:"state"`

	// unknown are the members, at the top level and in request, that
	// another release wrote and this one does not know: written back by
	// Encode (format.go).
	unknown *unknownMembers

	// Profile is the submitting user profile's id ("" for none); Topic its
	// async-config.topic, for notifications.
	Profile string `json:"profile,omitempty"`
	Topic   string `json:"topic,omitempty"`
	// Container holds the result blobs <Container>/<ID>/data and
	// <Container>/<ID>/headers.json.
	Container string `json:"container"`
	// Arrival is when the request reached the gateway; Expiry is Arrival
	// plus AsyncTTLSecs, also the lifetime of the result URLs.
	Arrival time.Time       `json:"arrival"`
	Expiry  time.Time       `json:"expiry"`
	Request requestSnapshot `json:"request"`
	// Attempts is the timeline of every attempt so far, across
	// invocations; Checkpoints counts the invocations that ran out of time
	// and handed the request on.
	Attempts    []core.Attempt `json:"attempts,omitempty"`
	Checkpoints int            `json:"checkpoints,omitempty"`
	// Claim is the current lease, or nil.
	Claim *claimLease `json:"claim,omitempty"`
	// Result is set once the record is done with a result.
	Result *recordResult `json:"result,omitempty"`
	// Changed is when State last changed (zero: never since arrival);
	// CancelRequested when the client asked to cancel (zero: never).
	Changed         time.Time `json:"changed,omitzero"`
	CancelRequested time.Time `json:"cancelRequested,omitzero"`
	// Submitter is the digest of the caller the request was scoped to
	// (Async.submitter: 64 lowercase hex digits, never the credential),
	// the only caller that may cancel it; "" when it was scoped to none.
	Submitter string `json:"submitter,omitempty"`
	// ResultKey signs the request's gateway result URLs (resultURL): 32
	// random bytes made at submission, base64 in JSON. A record written
	// before it existed has none, and no gateway URL verifies against it.
	ResultKey []byte `json:"resultKey,omitempty"`
	// RequestID is the submitting request's id (X-Request-Id,
	// core.ParseRequestID): its continuation's log lines, attempts and
	// notifications carry it. "" in a record written before it existed.
	// It is stored as the snapshot's X-Request-Id header, not as a member
	// of its own, so that the release before this one (which refuses
	// members it does not know) still reads the record, and re-sends the
	// id as the header it is (docs/operations.md#upgrades-and-rollbacks).
	RequestID string `json:"-"`
}

// requestIDHeader is the snapshot header that stores asyncRecord.RequestID.
const requestIDHeader = "X-Request-Id"

// stored is what Encode writes of r: the request id in the snapshot's
// headers, and the attempts without what the release before this one
// cannot read (their failure cause and phase, which the log line and the
// error JSON carry).
func (r *asyncRecord) stored() *asyncRecord {
	w := *r
	if r.RequestID != "" {
		w.Request.Header = r.Request.Header.Clone()
		if w.Request.Header == nil {
			w.Request.Header = http.Header{}
		}
		w.Request.Header[requestIDHeader] = []string{r.RequestID}
	}
	w.Attempts = storedAttempts(r.Attempts)
	return &w
}

// storedAttempts is a copy of a timeline without the members the release
// before this one refuses (core.Attempt's cause and phase).
func storedAttempts(a []core.Attempt) []core.Attempt {
	if a == nil {
		return nil
	}
	out := make([]core.Attempt, len(a))
	for i, at := range a {
		at.Failure, at.Phase = "", ""
		out[i] = at
	}
	return out
}

// Encode returns r's wire form. It fails only for a record decodeAsyncRecord
// would refuse.
func (r *asyncRecord) Encode() ([]byte, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(r.stored())
	if err == nil {
		b, err = r.unknown.merge(b)
	}
	if err != nil {
		return nil, fmt.Errorf("encode record: %w", err)
	}
	return b, nil
}

// decodeAsyncRecord parses a continuation record. A format version newer
// than recordVersion is an error wrapping ErrNewerFormat. A member of the
// wrong type, a missing version, a malformed id or container, or missing
// times are errors wrapping errBadRecord. Members it does not know are
// kept for Encode. Times come back in UTC.
func decodeAsyncRecord(b []byte) (*asyncRecord, error) {
	v, err := formatVersion(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errBadRecord, err)
	}
	if v > recordVersion {
		return nil, newerFormat("record", v, recordVersion)
	}
	var r asyncRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%w: %v", errBadRecord, err)
	}
	r.unknown = collectUnknown(b, reflect.TypeFor[asyncRecord](), "request")
	if ids := r.Request.Header[requestIDHeader]; len(ids) == 1 && validRequestID(ids[0]) {
		r.RequestID = ids[0]
	}
	r.Arrival = r.Arrival.UTC()
	r.Expiry = r.Expiry.UTC()
	if r.Claim != nil {
		r.Claim.Until = r.Claim.Until.UTC()
	}
	if r.Result != nil {
		r.Result.CompletedAt = r.Result.CompletedAt.UTC()
	}
	r.Changed, r.CancelRequested = r.Changed.UTC(), r.CancelRequested.UTC()
	if err := r.validate(); err != nil {
		return nil, err
	}
	return &r, nil
}

func (r *asyncRecord) validate() error {
	bad := func(what string) error { return fmt.Errorf("%w: %s", errBadRecord, what) }
	switch {
	case r.V < 1 || r.V > recordVersion:
		return bad(fmt.Sprintf("version %d, want 1 to %d", r.V, recordVersion))
	case !validAsyncID(r.ID):
		return bad("malformed id")
	case !r.State.valid():
		return bad(fmt.Sprintf("unknown state %.20q", r.State))
	case !core.ValidContainer(r.Container):
		return bad("malformed container")
	case !storableTime(r.Arrival) || !storableTime(r.Expiry):
		return bad("arrival and expiry must be times between years 1 and 9999")
	case r.RequestID != "" && !validRequestID(r.RequestID):
		return bad("malformed request id")
	case r.Checkpoints < 0 || r.Request.BodySize < 0:
		return bad("negative count")
	case !core.IsToken(r.Request.Method):
		return bad("malformed method")
	case len(r.Request.Path) == 0 || r.Request.Path[0] != '/':
		return bad("path must start with /")
	}
	if r.Submitter != "" && !validDigest(r.Submitter) {
		return bad("malformed submitter")
	}
	if len(r.ResultKey) != 0 && len(r.ResultKey) != resultKeyLen {
		return bad("malformed result key")
	}
	if c := r.Claim; c != nil && (!validAsyncID(c.Owner) || !storableTime(c.Until)) {
		return bad("malformed claim")
	}
	if res := r.Result; res != nil && (res.Status < 100 || res.Status > 999 || !storableTime(res.CompletedAt) || len(res.Code) > 64) {
		return bad("malformed result")
	}
	for _, t := range []time.Time{r.Changed, r.CancelRequested} {
		if !t.IsZero() && !storableTime(t) {
			return bad("malformed time")
		}
	}
	return nil
}

// storableTime reports whether t is set and JSON can write it.
func storableTime(t time.Time) bool {
	return !t.IsZero() && t.Year() >= 1 && t.Year() <= 9999
}

// newAsyncID returns 128 random bits as 32 lowercase hex digits.
func newAsyncID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}

// validDigest reports whether s is a SHA-256 digest in lowercase hex.
func validDigest(s string) bool {
	return len(s) == 64 && validAsyncID(s[:32]) && validAsyncID(s[32:])
}

// validAsyncID reports whether s is an id as newAsyncID makes them: 32
// lowercase hex digits. Only validated ids are ever put into keys.
func validAsyncID(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// idempotencyEntry is stored at gateway/idempotency/<hash>: the Accepted
// answer given to the submission that first used the key.
type idempotencyEntry struct {
	V         int    `json:"v"`
	ID        string `json:"id"`
	StatusURI string `json:"statusUri"`
	DataURI   string `json:"dataUri"`
	HeaderURI string `json:"headerUri"`
	// Fingerprint is the SHA-256 of the submission's method, path, query
	// and body digest (see requestFingerprint): only the same request gets
	// this Accepted back. Entries written before it existed match nothing.
	Fingerprint string `json:"fingerprint,omitempty"`
	// ReadableUntil is the end of the request's read grace (its expiry
	// plus the grace): the entry may be deleted once it has passed.
	ReadableUntil time.Time `json:"readableUntil,omitzero"`
}

// idempotencyVersion is the format version of idempotency entries.
const idempotencyVersion = 1

// decodeIdempotencyEntry parses an idempotency entry: one of a newer format
// version is an error wrapping ErrNewerFormat, one that is not an entry of
// version 1 with a well-formed id an error wrapping errBadRecord. Members it
// does not know are ignored: an entry is never rewritten, only replaced.
func decodeIdempotencyEntry(b []byte) (idempotencyEntry, error) {
	var e idempotencyEntry
	v, err := formatVersion(b)
	switch {
	case err != nil:
		return e, fmt.Errorf("%w: idempotency entry: %v", errBadRecord, err)
	case v > idempotencyVersion:
		return e, newerFormat("idempotency entry", v, idempotencyVersion)
	}
	if err := json.Unmarshal(b, &e); err != nil {
		return e, fmt.Errorf("%w: idempotency entry: %v", errBadRecord, err)
	}
	if !validAsyncID(e.ID) {
		return e, fmt.Errorf("%w: idempotency entry: malformed id", errBadRecord)
	}
	return e, nil
}

// resultHeader is the header blob: the result's status and headers
// (docs/async-api.md#the-hand-off-results-and-notifications).
type resultHeader struct {
	Status      int            `json:"status"`
	Headers     http.Header    `json:"headers"`
	ID          string         `json:"id"`
	CompletedAt string         `json:"completedAt"`
	Attempts    []core.Attempt `json:"attempts"`
}

// notification is a lifecycle notification (docs/async-api.md#the-hand-off-results-and-notifications), named as the
// seed proxy names them.
type notification struct {
	RequestGUID string `json:"RequestGuid"`
	Status      string `json:"Status"`
	Timestamp   string `json:"Timestamp"`
	TopicName   string `json:"topicName"`
	// RequestID is the request id (X-Request-Id) of the request, when
	// known: what ties a notification to the gateway's log lines.
	RequestID string `json:"requestId,omitempty"`
}

// The notification statuses.
const (
	notifyQueued     = "Queued"
	notifyProcessing = "Processing"
	notifyProcessed  = "AsyncProcessed"
	notifyFailed     = "Failed"
	notifyExpired    = "Expired"
)

// SweepPrefixes are the key prefixes a store's sweep walks: the
// continuation records and the idempotency index. Result and request
// body blobs are deleted with their record (see Garbage).
func SweepPrefixes() []string {
	return []string{asyncRecordsPrefix, asyncIdempotencyPrefix}
}

// Garbage tells a store's sweep what to delete for the object at key
// (under one of SweepPrefixes) holding data, at time now: nothing
// (nil) until the request it belongs to is past its expiry plus its read
// grace (see ReadGrace), then every key the request owns, the object's own key
// last, so that a sweep interrupted half-way finds the rest next time. For
// a record: its request body blob, its result blobs and itself; for an
// idempotency entry: itself. Objects that cannot be decoded, and entries
// written before they carried an expiry, are kept: a corrupt record stays
// for inspection (its status URI answers CorruptRecord), and a stale entry
// is taken over by the next submission with its key.
func Garbage(key string, data []byte, now time.Time) []string {
	switch {
	case strings.HasPrefix(key, asyncRecordsPrefix):
		r, err := decodeAsyncRecord(data)
		if err != nil || asyncRecordKey(r.ID) != key || now.Before(readEnd(r.Arrival, r.Expiry)) {
			return nil
		}
		return []string{asyncBodyKey(r.ID), asyncDataKey(r.Container, r.ID), asyncHeaderKey(r.Container, r.ID), key}
	case strings.HasPrefix(key, asyncIdempotencyPrefix):
		e, err := decodeIdempotencyEntry(data)
		if err != nil || e.ReadableUntil.IsZero() || now.Before(e.ReadableUntil) {
			return nil
		}
		return []string{key}
	}
	return nil
}

// validRequestID reports whether id is a request id the gateway could have
// made or believed (core.ParseRequestID).
func validRequestID(id string) bool {
	_, ok := core.ParseRequestID(id)
	return ok
}

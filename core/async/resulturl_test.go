package async

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"fngateway/core"
)

// queryOf returns the raw query of a gateway-relative URL.
func queryOf(tb testing.TB, u string) string {
	tb.Helper()
	p, err := url.Parse(u)
	if err != nil {
		tb.Fatalf("parse %q: %v", u, err)
	}
	return p.RawQuery
}

// TestResultURL: a gateway result URL redirects to its one blob, signed
// now for a few minutes; any change to its signature, or its use for
// another part or request, is ErrInvalidSignature; an unfinished request is
// ErrResultPending; past the read end it is Expired and nothing is signed.
func TestResultURL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newAsyncEnv(t, asyncAfter(10*time.Second, asyncOK))
		acc := e.submit(t, asyncRequest())
		req := asyncRequest()
		req.IdempotencyKey = "another-key"
		other := e.submit(t, req)
		if other.ID == acc.ID {
			t.Fatal("the second submission was taken for the first")
		}
		ctx := context.Background()
		dataQ, headerQ := queryOf(t, acc.DataURI), queryOf(t, acc.HeaderURI)
		if !strings.HasPrefix(acc.DataURI, ResultPath(acc.ID, ResultData)+"?sig=") ||
			!strings.HasPrefix(acc.HeaderURI, ResultPath(acc.ID, ResultHeaders)+"?sig=") {
			t.Fatalf("202 URIs %q, %q; want gateway result URLs", acc.DataURI, acc.HeaderURI)
		}

		if _, err := e.a.ResultURL(ctx, acc.ID, ResultData, dataQ); !errors.Is(err, ErrResultPending) {
			t.Errorf("ResultURL before the result = %v; want ErrResultPending", err)
		}
		e.drain(t)

		now := time.Now()
		exp := "exp=" + strconv.FormatInt(now.Add(redirectURLLifetime).Unix(), 10) + "&"
		for _, tt := range []struct {
			part, query, wantKey string
		}{
			{ResultData, dataQ, "alice-results/" + acc.ID + "/data"},
			{ResultHeaders, headerQ, "alice-results/" + acc.ID + "/headers.json"},
			{ResultData, "x=1&" + dataQ + "&y", "alice-results/" + acc.ID + "/data"}, // other parameters are ignored
		} {
			r, err := e.a.ResultURL(ctx, acc.ID, tt.part, tt.query)
			if err != nil {
				t.Fatalf("ResultURL(%s, %q) = %v", tt.part, tt.query, err)
			}
			if want := "/_gateway/blobs/" + tt.wantKey + "?" + exp; !strings.HasPrefix(r.URL, want) || r.Attempts != 1 {
				t.Errorf("ResultURL(%s) = %q, %d attempts; want %s… (signed now for %v), 1 attempt", tt.part, r.URL, r.Attempts, want, redirectURLLifetime)
			}
		}

		sig := strings.TrimPrefix(dataQ, "sig=")
		invalid := map[string]string{
			"no query":                 "",
			"empty signature":          "sig=",
			"two signatures":           dataQ + "&" + dataQ,
			"escaped name":             "%73ig=" + sig,
			"escaped value":            "sig=" + url.QueryEscape(sig[:1]) + "%" + strconv.FormatInt(int64(sig[1]), 16) + sig[2:],
			"the header URL's":         headerQ,
			"another request's":        queryOf(t, other.DataURI),
			"truncated":                "sig=" + sig[:len(sig)-1],
			"padded":                   "sig=" + sig + "=",
			"malformed query escaping": "%zz&" + dataQ,
		}
		for i := range len(sig) {
			for _, c := range []byte{'A', '_'} {
				if sig[i] != c {
					invalid["character "+strconv.Itoa(i)+" changed to "+string(c)] = "sig=" + sig[:i] + string(c) + sig[i+1:]
					break
				}
			}
		}
		for name, q := range invalid {
			if r, err := e.a.ResultURL(ctx, acc.ID, ResultData, q); !errors.Is(err, ErrInvalidSignature) {
				t.Errorf("%s: ResultURL(data, %q) = %+v, %v; want ErrInvalidSignature", name, q, r, err)
			}
		}
		// A valid signature of the data blob, asked for the headers.
		if _, err := e.a.ResultURL(ctx, acc.ID, ResultHeaders, dataQ); !errors.Is(err, ErrInvalidSignature) {
			t.Errorf("data signature for the headers = %v; want ErrInvalidSignature", err)
		}
		// Another request's id with this request's signature.
		if _, err := e.a.ResultURL(ctx, other.ID, ResultData, dataQ); !errors.Is(err, ErrInvalidSignature) {
			t.Errorf("signature on another id = %v; want ErrInvalidSignature", err)
		}
		for _, id := range []string{strings.Repeat("0", 32), "nothex", acc.ID + "0"} {
			if _, err := e.a.ResultURL(ctx, id, ResultData, dataQ); !errors.Is(err, ErrNotFound) {
				t.Errorf("ResultURL(%q) = %v; want ErrNotFound", id, err)
			}
		}

		// Within the read grace: signed until its end at most.
		rec := e.store.record(t, acc.ID)
		end := readEnd(rec.Arrival, rec.Expiry)
		time.Sleep(time.Until(end.Add(-time.Minute)))
		r, err := e.a.ResultURL(ctx, acc.ID, ResultData, dataQ)
		if want := "exp=" + strconv.FormatInt(end.Unix(), 10) + "&"; err != nil || !strings.Contains(r.URL, want) {
			t.Errorf("ResultURL a minute before the read end = %+v, %v; want %s", r, err, want)
		}
		// At the read end: Expired, and the store is asked to sign nothing.
		time.Sleep(time.Until(end))
		signed := 0
		e.store.setFail(func(op, key string) error {
			if op == "sign" {
				signed++
			}
			return nil
		})
		if _, err := e.a.ResultURL(ctx, acc.ID, ResultData, dataQ); core.ReasonOf(err) != core.ReasonExpired {
			t.Errorf("ResultURL at the read end = %v; want Expired", err)
		}
		if signed != 0 {
			t.Errorf("%d URLs signed after the read end; want none", signed)
		}
		// A tampered signature (its first character changed: "x", or "y"
		// where it was "x") is still refused as such.
		tampered := "x" + sig[1:]
		if sig[0] == 'x' {
			tampered = "y" + sig[1:]
		}
		if _, err := e.a.ResultURL(ctx, acc.ID, ResultData, "sig="+tampered); !errors.Is(err, ErrInvalidSignature) {
			t.Errorf("tampered signature after the read end = %v; want ErrInvalidSignature", err)
		}
	})
}

// TestResultURLLastingStore: a store whose own URLs last gets them handed
// out by the 202, valid until the request expires.
func TestResultURLLastingStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newAsyncEnv(t, asyncOK)
		e.store.lasting = true
		arrival := time.Now()
		acc := e.submit(t, asyncRequest())
		exp := strconv.FormatInt(arrival.Add(asyncTestTTL).Unix(), 10)
		if want := "/_gateway/blobs/alice-results/" + acc.ID + "/data?exp=" + exp + "&sig=fake"; acc.DataURI != want {
			t.Errorf("data URI %q; want the store's own %q", acc.DataURI, want)
		}
	})
}

// TestResultURLOldRecord: a record without a result key (written before
// gateway result URLs) verifies no signature.
func TestResultURLOldRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newAsyncEnv(t, asyncOK)
		acc := e.submit(t, asyncRequest())
		e.drain(t)
		rec := e.store.record(t, acc.ID)
		key := rec.ResultKey
		rec.ResultKey = nil
		e.store.putRecord(t, rec)
		for _, q := range []string{queryOf(t, acc.DataURI), "sig=" + resultSignature(nil, acc.ID, ResultData)} {
			if _, err := e.a.ResultURL(context.Background(), acc.ID, ResultData, q); !errors.Is(err, ErrInvalidSignature) {
				t.Errorf("ResultURL(%q) without a key = %v; want ErrInvalidSignature", q, err)
			}
		}
		rec.ResultKey = key[:16]
		if _, err := rec.Encode(); !errors.Is(err, errBadRecord) {
			t.Errorf("Encode with a 16-byte result key = %v; want errBadRecord", err)
		}
	})
}

// FuzzResultURL: CutResultPart and parseResultQuery never panic; a path
// they accept round-trips through ResultPath, and a query they accept
// verifies only with the signature made for that id and part.
func FuzzResultURL(f *testing.F) {
	key := []byte(strings.Repeat("k", resultKeyLen))
	id := strings.Repeat("ab", 16)
	good := resultURL(key, id, ResultData)
	f.Add(strings.TrimPrefix(good[:strings.IndexByte(good, '?')], StatusPrefix), good[strings.IndexByte(good, '?')+1:])
	f.Add(id+"/headers", "sig=abc&sig=abc")
	f.Add(id+"/operation", "%73ig=x")
	f.Add("/data", "sig=%zz")
	f.Add(id+"/data/x", "a=b&sig=c")
	f.Fuzz(func(t *testing.T, rest, rawQuery string) {
		gotID, part, ok := CutResultPart(rest)
		if ok {
			if part != ResultData && part != ResultHeaders {
				t.Fatalf("CutResultPart(%q) part %q", rest, part)
			}
			if ResultPath(gotID, part) != StatusPrefix+rest {
				t.Fatalf("CutResultPart(%q) = %q, %q; ResultPath gives %q", rest, gotID, part, ResultPath(gotID, part))
			}
		}
		sig, err := parseResultQuery(rawQuery)
		if err != nil {
			if sig != "" {
				t.Fatalf("parseResultQuery(%q) = %q with error %v", rawQuery, sig, err)
			}
			return
		}
		if sig == "" || !strings.Contains(rawQuery, "sig="+sig) {
			t.Fatalf("parseResultQuery(%q) = %q; not a sig parameter as written", rawQuery, sig)
		}
		for _, p := range []string{ResultData, ResultHeaders} {
			want := resultSignature(key, id, p)
			if verifyResultSig(key, id, p, sig) != (sig == want) {
				t.Fatalf("verifyResultSig(%q, %s) = %v; want %v", sig, p, !(sig == want), sig == want)
			}
		}
		// Round trip: a URL made for a part parses back to its signature.
		u := resultURL(key, id, ResultHeaders)
		if s, err := parseResultQuery(u[strings.IndexByte(u, '?')+1:]); err != nil || !verifyResultSig(key, id, ResultHeaders, s) {
			t.Fatalf("round trip of %q: %q, %v", u, s, err)
		}
	})
}

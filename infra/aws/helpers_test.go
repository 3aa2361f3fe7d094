package aws

import (
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"testing"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"fngateway/internal/emulators"
	"fngateway/internal/testutil"
)

// newTestStore starts a versitygw and returns a Store on a bucket of its
// own, which does not exist yet (the Store creates it). Each call starts
// its own server, stopped when t ends.
func newTestStore(t *testing.T) *Store {
	t.Helper()
	return newStoreOn(t, emulators.StartVersitygw(t), "s3://"+testutil.UniqueName("bucket"))
}

// newTestQueue starts a fauxqs and returns a Queue on a queue of its own,
// which does not exist yet (the Queue creates it). Each call starts its own
// server, stopped when t ends.
func newTestQueue(t *testing.T) *Queue {
	t.Helper()
	return newQueueOn(t, emulators.StartFauxqs(t), testutil.UniqueName("q"))
}

// versitygwConfig is a Config for v: its root credentials and region.
func versitygwConfig(v *emulators.Versitygw) Config {
	return Config{
		AWS: sdkaws.Config{
			Region:      emulators.VersitygwRegion,
			Credentials: credentials.NewStaticCredentialsProvider(emulators.VersitygwAccessKey, emulators.VersitygwSecretKey, ""),
		},
		S3Endpoint: v.Endpoint(),
	}
}

// fauxqsConfig is a Config for f (which takes any credentials).
func fauxqsConfig(f *emulators.Fauxqs) Config {
	return Config{
		AWS: sdkaws.Config{
			Region:      emulators.FauxqsRegion,
			Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		},
		SQSEndpoint: f.Endpoint(),
		SNSEndpoint: f.Endpoint(), // fauxqs serves SNS on the same port
	}
}

func newStoreOn(tb testing.TB, v *emulators.Versitygw, location string) *Store {
	tb.Helper()
	s, err := NewStore(versitygwConfig(v), location)
	if err != nil {
		tb.Fatalf("NewStore(%q): %v", location, err)
	}
	return s
}

func newQueueOn(tb testing.TB, f *emulators.Fauxqs, name string) *Queue {
	tb.Helper()
	q, err := NewQueue(fauxqsConfig(f), f.QueueURL(name))
	if err != nil {
		tb.Fatalf("NewQueue(%q): %v", f.QueueURL(name), err)
	}
	return q
}

// generated returns a reader of n deterministic pseudo-random bytes for
// seed, made as it is read, so large bodies need not sit in memory.
func generated(seed uint64, n int64) io.Reader {
	var key [32]byte
	key[0] = byte(seed)
	key[1] = byte(seed >> 8)
	return io.LimitReader(rand.NewChaCha8(key), n)
}

// digest returns the SHA-256 of r's bytes and their count.
func digest(tb testing.TB, r io.Reader) ([32]byte, int64) {
	tb.Helper()
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		tb.Fatalf("read: %v", err)
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum, n
}

//go:build race

package httpapi

// raceAllocs is what the race detector adds to a request's allocations:
// under it sync.Pool drops a random quarter of what is put back (sync/pool.go,
// Put), so the pooled key and log buffers are sometimes made anew.
const raceAllocs = 2

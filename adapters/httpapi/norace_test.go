//go:build !race

package httpapi

// raceAllocs is what the race detector adds to a request's allocations:
// nothing without it.
const raceAllocs = 0

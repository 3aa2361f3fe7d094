package core

// Exported for the external tests of package core_test (the port
// conformance suites), which cannot reach the package's own test files.

// NewFakeStore returns the in-memory Store of core's unit tests.
func NewFakeStore() Store { return newFakeStore() }

// NewFakeQueue returns the in-memory Queue of core's unit tests.
func NewFakeQueue() Queue { return &fakeQueue{} }

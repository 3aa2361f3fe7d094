package async

// Exported for the external tests of package core_test (the port
// conformance suites), which cannot reach the package's own test files.

// NewFakeStore returns the in-memory Store of core/async's unit tests.
func NewFakeStore() Store { return newFakeStore() }

// NewFakeQueue returns the in-memory Queue of core/async's unit tests.
func NewFakeQueue() Queue { return &fakeQueue{} }

//go:build !unix

package filestore

// oNoFollow is not available here: openNoFollow relies on its Lstat and
// SameFile checks alone.
const oNoFollow = 0

func isSymlinkErr(error) bool { return false }

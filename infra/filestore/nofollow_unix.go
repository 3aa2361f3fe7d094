//go:build unix

package filestore

import (
	"errors"
	"syscall"
)

// oNoFollow makes open fail on a symlink instead of following it.
const oNoFollow = syscall.O_NOFOLLOW

// isSymlinkErr reports whether err is open's refusal of a symlink under
// O_NOFOLLOW (ELOOP).
func isSymlinkErr(err error) bool { return errors.Is(err, syscall.ELOOP) }

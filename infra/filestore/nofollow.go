package filestore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"fngateway/core/async"
)

// openNoFollow opens the file at path for reading without ever following a
// symlink: path must name a regular file itself. A symlink (whatever it
// points at), a device, a FIFO, a socket or a directory there is an error
// wrapping async.ErrCorruptRecord, and so is a file swapped for another
// between the check and the open. A missing file is fs.ErrNotExist, as
// os.Open reports it.
//
// Only the last element of path is checked: the store's own directories are
// made by the store (Open, ensureDir), and whoever can replace them can
// replace the store.
func openNoFollow(path string) (*os.File, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular(path, fi.Mode())
	}
	f, err := os.OpenFile(path, os.O_RDONLY|oNoFollow, 0)
	if err != nil {
		if isSymlinkErr(err) {
			return nil, notRegular(path, fs.ModeSymlink)
		}
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() || !os.SameFile(fi, st) {
		f.Close()
		return nil, fmt.Errorf("%w: %s was replaced while it was opened", async.ErrCorruptRecord, path)
	}
	return f, nil
}

// errNotRegular is wrapped, with async.ErrCorruptRecord, by the error of a
// path that names something other than a regular file.
var errNotRegular = errors.New("not a regular file")

func notRegular(path string, mode fs.FileMode) error {
	what := "a " + mode.Type().String() + " entry"
	switch {
	case mode&fs.ModeSymlink != 0:
		what = "a symlink, never followed"
	case mode.IsDir():
		what = "a directory"
	}
	return fmt.Errorf("%w: %s is %s: %w", async.ErrCorruptRecord, path, what, errNotRegular)
}

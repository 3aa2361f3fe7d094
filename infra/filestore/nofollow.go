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
// wrapping async.ErrCorruptRecord. A missing file is fs.ErrNotExist, as
// os.Open reports it.
//
// The store replaces a file by renaming a new one over it (see commit), so
// the file at path may change between the Lstat that checks it and the
// open: the file opened is then the new one, whole, which is what a reader
// wants. Where open refuses symlinks itself (O_NOFOLLOW), the opened file
// need only be regular. Elsewhere the Lstat is all that keeps a symlink out,
// so the opened file must be the one it checked; when it is not, the check
// and the open are made again, a few times (maxOpenTries), each time after
// one more concurrent write.
//
// Only the last element of path is checked: the store's own directories are
// made by the store (Open, ensureDir), and whoever can replace them can
// replace the store.
func openNoFollow(path string) (*os.File, error) {
	for try := 1; ; try++ {
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
		switch {
		case !st.Mode().IsRegular():
			f.Close()
			return nil, fmt.Errorf("%w: %s was replaced while it was opened by a file that is not regular", async.ErrCorruptRecord, path)
		case oNoFollow != 0 || os.SameFile(fi, st):
			return f, nil
		}
		f.Close()
		if try == maxOpenTries {
			return nil, fmt.Errorf("open %s: replaced by another file while it was opened, %d times in a row", path, try)
		}
	}
}

// maxOpenTries bounds openNoFollow's checks and opens of one path that
// keeps being replaced in between, where open cannot refuse symlinks.
const maxOpenTries = 5

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

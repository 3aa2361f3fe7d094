package filestore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"fngateway/core/async"
)

var (
	_ async.Store    = (*Store)(nil)
	_ async.Queue    = (*Store)(nil)
	_ async.Notifier = (*Store)(nil)
)

// errInvalidKey is wrapped by every error about a key that cannot name an
// object: not "<container>/<name>", or a path that could leave the store's
// directory.
var errInvalidKey = errors.New("invalid key")

const (
	keyFile       = "signing.key"
	keyLen        = 32
	maxKeyLen     = 1024
	maxSegmentLen = 255
	lockShards    = 64
	tempPrefix    = ".tmp-"
)

// Store is the file-backed store, queue and notifier. Create it with Open;
// the zero value is not usable. Its methods may be called by multiple
// goroutines simultaneously.
type Store struct {
	root, objects, queueDir, topicsDir, quarantine string
	signingKey                                     []byte

	// locks serialise conditional writes, one shard per key hash.
	locks [lockShards]sync.Mutex

	// qmu guards msgs, the index of queue/ kept in memory, and
	// lastEnqueued, the latest EnqueuedAt given out.
	qmu          sync.Mutex
	msgs         map[string]*messageHeader
	lastEnqueued int64
	// queueMod is queue/'s modification time when it was last read
	// whole: Receive reads it again when it changes, to adopt message
	// files another process (the dead-letter command) wrote there.
	queueMod time.Time
	// quarantined reports the files loadQueue set aside, until a Receive
	// returns them.
	quarantined []error

	// nmu serialises appends to topic files.
	nmu sync.Mutex

	// sweepMu guards sweepAfter: per swept prefix, the last name examined
	// by the previous Sweep.
	sweepMu    sync.Mutex
	sweepAfter map[string]string
}

// Open opens the store in dir, creating the directory tree when missing.
// The HMAC key that signs blob URLs is read from dir/signing.key, or
// created there (mode 0600) on first open, so URLs survive restarts.
// Open loads the queue's index; queue files that cannot be decoded are
// moved to dir/quarantine/ and left out (the first Receive reports them).
func Open(dir string) (*Store, error) {
	s, err := newStore(dir)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{s.objects, s.queueDir, s.topicsDir, s.quarantine} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("open file store: %w", err)
		}
	}
	if s.signingKey, err = loadKey(s.root); err != nil {
		return nil, fmt.Errorf("open file store: %w", err)
	}
	if err := s.loadQueue(); err != nil {
		return nil, fmt.Errorf("open file store: %w", err)
	}
	return s, nil
}

// newStore returns the Store for dir without touching the disk.
func newStore(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("open file store: empty directory name")
	}
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open file store %s: %w", dir, err)
	}
	s := &Store{
		root:       root,
		objects:    filepath.Join(root, "objects"),
		queueDir:   filepath.Join(root, "queue"),
		topicsDir:  filepath.Join(root, "topics"),
		quarantine: filepath.Join(root, "quarantine"),
		msgs:       make(map[string]*messageHeader),
	}
	return s, nil
}

// loadKey reads the signing key in dir, creating it when missing.
func loadKey(dir string) ([]byte, error) {
	path := filepath.Join(dir, keyFile)
	for range 2 {
		b, err := os.ReadFile(path)
		if err == nil {
			if len(b) != keyLen {
				return nil, fmt.Errorf("signing key %s: %d bytes, want %d", path, len(b), keyLen)
			}
			return b, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("signing key: %w", err)
		}
		key := make([]byte, keyLen)
		rand.Read(key)
		tmp, err := stage(context.Background(), dir, key, nil)
		if err != nil {
			return nil, fmt.Errorf("signing key: %w", err)
		}
		// A concurrent first open may win; then its key is read back.
		if err := commit(tmp, path, true); err != nil && !errors.Is(err, async.ErrConflict) {
			return nil, fmt.Errorf("signing key: %w", err)
		}
	}
	return nil, fmt.Errorf("signing key %s: cannot be created", path)
}

// checkKey reports why key cannot name an object, or nil.
func checkKey(key string) error {
	bad := func(why string) error { return fmt.Errorf("key %q: %s: %w", key, why, errInvalidKey) }
	switch {
	case key == "":
		return bad("empty")
	case len(key) > maxKeyLen:
		return bad(fmt.Sprintf("longer than %d bytes", maxKeyLen))
	case key[0] == '/':
		return bad("absolute path")
	case strings.ContainsRune(key, '\\'):
		return bad("backslash")
	}
	for _, c := range []byte(key) {
		if c == 0 {
			return bad("NUL byte")
		}
		if c < 0x20 || c == 0x7f {
			return bad("control character")
		}
	}
	segs := strings.Split(key, "/")
	if len(segs) < 2 {
		return bad(`want "<container>/<name>"`)
	}
	for _, seg := range segs {
		switch {
		case seg == "":
			return bad("empty path segment")
		case seg == "." || seg == "..":
			return bad(`"." or ".." segment`)
		case seg[0] == '.':
			return bad(`segment starting with "." (reserved)`)
		case len(seg) > maxSegmentLen:
			return bad(fmt.Sprintf("segment longer than %d bytes", maxSegmentLen))
		}
	}
	if !filepath.IsLocal(filepath.FromSlash(key)) {
		return bad("not a local path")
	}
	return nil
}

func (s *Store) path(key string) string { return filepath.Join(s.objects, filepath.FromSlash(key)) }

func (s *Store) lock(key string) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte(key))
	return &s.locks[h.Sum32()%lockShards]
}

// Get returns the record at key and its version. It returns an error
// wrapping async.ErrNotFound when nothing is there.
func (s *Store) Get(ctx context.Context, key string) ([]byte, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	if err := checkKey(key); err != nil {
		return nil, "", fmt.Errorf("get: %w", err)
	}
	f, err := openObject(s.path(key))
	if err != nil {
		return nil, "", fmt.Errorf("get %s: %w", key, err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, "", fmt.Errorf("get %s: %w", key, err)
	}
	var h objectHeader
	off, err := decodeRecord(b, &h)
	if err != nil {
		return nil, "", fmt.Errorf("get %s: %w", key, err)
	}
	return b[off:], h.Version, nil
}

// Put writes data at key if the current version is ifVersion or, when
// ifVersion is "", only if nothing is there yet. It returns the new
// version, or an error wrapping async.ErrConflict when the condition fails.
// Versions are "<generation>-<random tag>": the generation counts the
// writes to the key and the tag makes every version unique.
func (s *Store) Put(ctx context.Context, key string, data []byte, ifVersion string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := checkKey(key); err != nil {
		return "", fmt.Errorf("put: %w", err)
	}
	path := s.path(key)
	mu := s.lock(key)
	mu.Lock()
	defer mu.Unlock()
	cur, err := readObjectHeader(path)
	switch {
	case errors.Is(err, async.ErrNotFound):
		if ifVersion != "" {
			return "", fmt.Errorf("put %s: want version %s, nothing there: %w", key, ifVersion, async.ErrConflict)
		}
	case err != nil:
		return "", fmt.Errorf("put %s: %w", key, err)
	case ifVersion == "":
		return "", fmt.Errorf("put %s: already exists: %w", key, async.ErrConflict)
	case cur.Version != ifVersion:
		return "", fmt.Errorf("put %s: want version %s, have %s: %w", key, ifVersion, cur.Version, async.ErrConflict)
	}
	version := nextVersion(cur.Version)
	hdr, err := encodeHeader(&objectHeader{Version: version})
	if err != nil {
		return "", fmt.Errorf("put %s: %w", key, err)
	}
	dir := filepath.Dir(path)
	if err := s.ensureDir(dir); err != nil {
		return "", fmt.Errorf("put %s: %w", key, err)
	}
	tmp, err := stage(ctx, dir, hdr, bytes.NewReader(data))
	if err != nil {
		return "", fmt.Errorf("put %s: %w", key, err)
	}
	if err := commit(tmp, path, ifVersion == ""); err != nil {
		return "", fmt.Errorf("put %s: %w", key, err)
	}
	return version, nil
}

// nextVersion returns a fresh version following prev ("" for none).
func nextVersion(prev string) string {
	g, _, _ := strings.Cut(prev, "-")
	gen, err := strconv.ParseUint(g, 10, 64)
	if err != nil {
		gen = 0
	}
	return strconv.FormatUint(gen+1, 10) + "-" + randomHex(8)
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// openObject opens the record file at path; a missing file or a path
// through a file is async.ErrNotFound. It never follows a symlink: a
// symlink, a directory or any other file that is not a regular one is an
// error wrapping async.ErrCorruptRecord (see openNoFollow), as the docs say
// of a record (docs/async-api.md, "Corrupt records and messages"): nothing
// the gateway writes is both an object and a prefix of others, so a
// directory where an object is looked up was put there by something else.
func openObject(path string) (*os.File, error) {
	f, err := openNoFollow(path)
	switch {
	case err == nil:
		return f, nil
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return nil, async.ErrNotFound
	}
	return nil, err
}

// readObjectHeader reads the header of the record at path.
func readObjectHeader(path string) (objectHeader, error) {
	var h objectHeader
	f, err := openObject(path)
	if err != nil {
		return h, err
	}
	defer f.Close()
	_, err = readHeader(f, &h)
	return h, err
}

// ensureDir creates dir and any missing parents, and syncs the directory
// entries it adds so that they survive a crash.
func (s *Store) ensureDir(dir string) error {
	var missing []string
	for d := dir; d != s.objects && len(d) > len(s.objects); d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		missing = append(missing, d)
	}
	if len(missing) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, d := range missing {
		if err := syncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// stage writes head and then body to a new temporary file in dir and syncs
// it. It returns the file's path; on error nothing is left behind.
func stage(ctx context.Context, dir string, head []byte, body io.Reader) (tmp string, err error) {
	f, err := os.CreateTemp(dir, tempPrefix+"*")
	if err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(head); err != nil {
		return "", err
	}
	if body != nil {
		read := readFunc(func(p []byte) (int, error) {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			return body.Read(p)
		})
		if _, err := io.Copy(f, read); err != nil {
			return "", err
		}
	}
	if err := f.Sync(); err != nil {
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return f.Name(), nil
}

// commit moves the staged file tmp to path and syncs the directory. With
// create set it fails with async.ErrConflict, atomically, if path exists.
func commit(tmp, path string, create bool) error {
	if create {
		err := os.Link(tmp, path)
		if err != nil && !errors.Is(err, fs.ErrExist) {
			// No hard links here: callers hold the key's lock, so a
			// check then rename is atomic within the process.
			if _, serr := os.Lstat(path); serr == nil {
				err = fs.ErrExist
			} else {
				err = os.Rename(tmp, path)
			}
		}
		os.Remove(tmp)
		if errors.Is(err, fs.ErrExist) {
			return async.ErrConflict
		}
		if err != nil {
			return err
		}
	} else if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(path))
}

// syncDir makes the entries of dir durable.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// readFunc is an io.Reader made of a function.
type readFunc func(p []byte) (int, error)

func (f readFunc) Read(p []byte) (int, error) { return f(p) }

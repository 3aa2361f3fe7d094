package settings

import (
	"fmt"
	"io"
	"os"
	"strconv"

	"fngateway/core"
)

// MaxProfilesFileBytes is the largest UserProfiles=file: the gateway reads.
const MaxProfilesFileBytes = 1 << 20

// validateLimits checks the bounds docs/settings.md#settings puts on counts.
func (s *Settings) validateLimits() error {
	if s.MaxAttempts > core.MaxAttemptsLimit {
		return &core.SettingError{Name: "MaxAttempts", Value: strconv.FormatInt(int64(s.MaxAttempts), 10),
			Want: fmt.Sprintf("want a whole number from 1 to %d", core.MaxAttemptsLimit)}
	}
	return nil
}

// CheckMemory holds MaxRetryBodyBytes and MaxBufferedBytes against limit,
// the bytes the collector may use (the soft memory limit, not all of the
// host's memory; source says where that figure comes from, for the
// message). A MaxBufferedBytes left at its default (explicit reports the
// settings the environment gave) is lowered to half of limit when that is
// smaller, so that a small host (a 128 MB Lambda) starts with the defaults
// and buffered bodies leave the collector room for everything else; a
// value given beyond limit is an error naming the setting, its value and
// the limit. A zero limit checks nothing.
func (s *Settings) CheckMemory(limit int64, source string, explicit func(name string) bool) error {
	if limit <= 0 {
		return nil
	}
	if !explicit("MaxBufferedBytes") && int64(s.MaxBufferedBytes) > limit/2 {
		s.MaxBufferedBytes = Count(limit / 2)
	}
	for _, c := range []struct {
		name string
		v    Count
	}{{"MaxRetryBodyBytes", s.MaxRetryBodyBytes}, {"MaxBufferedBytes", s.MaxBufferedBytes}} {
		if int64(c.v) > limit {
			return &core.SettingError{Name: c.name, Value: strconv.FormatInt(int64(c.v), 10),
				Want: fmt.Sprintf("want at most %d bytes, %s", limit, source)}
		}
	}
	return nil
}

// readProfilesFile reads the file of UserProfiles=file:<path>: a regular
// file of at most MaxProfilesFileBytes.
func readProfilesFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxProfilesFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxProfilesFileBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, MaxProfilesFileBytes)
	}
	return b, nil
}

package async

import (
	"fmt"
	"io"
)

// ReadObject is a Store's Get over a service that streams an object and
// names its version (an S3 object, an Azure blob): given what opening the
// object at a key returned, the body, its version and the error, it reads
// the body whole and closes it. An open error, which should name the key
// and wrap ErrNotFound for a missing object, is returned wrapped as a
// get's, and so is a failed read; the body is then closed and nothing is
// returned.
func ReadObject(body io.ReadCloser, version string, err error) ([]byte, string, error) {
	if err != nil {
		return nil, "", fmt.Errorf("get: %w", err)
	}
	defer body.Close()
	data, err := io.ReadAll(body)
	if err != nil {
		return nil, "", fmt.Errorf("get: read: %w", err)
	}
	return data, version, nil
}

// OpenObject is a Store's OpenBlob over the same opening as ReadObject:
// it returns the body to stream, or the open error wrapped as an open's.
func OpenObject(body io.ReadCloser, _ string, err error) (io.ReadCloser, error) {
	if err != nil {
		return nil, fmt.Errorf("open blob: %w", err)
	}
	return body, nil
}

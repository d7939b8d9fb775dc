//go:build !unix

package safetensors

import "os"

// mapFile reads the whole file where mmap is not available.
func mapFile(path string) (data []byte, unmap func() error, err error) {
	data, err = os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return data, func() error { return nil }, nil
}

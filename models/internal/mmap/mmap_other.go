//go:build !unix

package mmap

import "os"

// File reads the whole file where mmap is not available.
func File(path string) (data []byte, unmap func() error, err error) {
	data, err = os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return data, func() error { return nil }, nil
}

// Release does nothing where File reads the file into memory.
func Release(mapping []byte, off, end int64) {}

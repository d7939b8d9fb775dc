//go:build unix

// Package mmap maps weight files read-only, so tensors are views of the page
// cache rather than copies (MLX copies host data once when it makes arrays).
package mmap

import (
	"fmt"
	"os"
	"syscall"
)

// File maps path read-only and privately. The mapping outlives the file
// descriptor, which is closed before returning. An empty file cannot be
// mapped and is returned as an empty slice.
func File(path string) (data []byte, unmap func() error, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	size := st.Size()
	if size == 0 {
		return []byte{}, func() error { return nil }, nil
	}
	if size < 0 || int64(int(size)) != size {
		return nil, nil, fmt.Errorf("file of %d bytes is too large to map", size)
	}
	data, err = syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot mmap: %w", err)
	}
	return data, func() error { return syscall.Munmap(data) }, nil
}

// Release drops the pages wholly inside mapping[off:end] from the process's
// resident set once their bytes have been copied elsewhere (MLX copies host
// data when it makes an array): without it, loading a model holds the file's
// pages and MLX's copy at once, twice the weights. The mapping stays valid;
// a later read faults the pages back in from the file. mapping must start
// on a page boundary, as File's mappings do.
func Release(mapping []byte, off, end int64) {
	page := int64(os.Getpagesize())
	start := (off + page - 1) / page * page
	stop := end / page * page
	if stop > int64(len(mapping)) {
		stop = int64(len(mapping)) / page * page
	}
	if start >= stop {
		return
	}
	// Advice only: an error leaves the pages resident, which is still correct.
	dontNeed(mapping[start:stop])
}

package mmap

import "syscall"

// dontNeed drops the pages of b from this process's mapping.
func dontNeed(b []byte) { _ = syscall.Madvise(b, syscall.MADV_DONTNEED) }

//go:build unix && !linux

package mmap

// dontNeed is a no-op where package syscall has no Madvise (darwin): the
// pages stay resident, which is still correct.
func dontNeed([]byte) {}

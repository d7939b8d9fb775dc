package mmap

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Release must never change what the mapping reads, whatever the bounds.
func TestReleaseKeepsContent(t *testing.T) {
	page := os.Getpagesize()
	want := make([]byte, 5*page+123)
	for i := range want {
		want[i] = byte(i * 7)
	}
	path := filepath.Join(t.TempDir(), "w.bin")
	if err := os.WriteFile(path, want, 0o644); err != nil {
		t.Fatal(err)
	}
	data, unmap, err := File(path)
	if err != nil {
		t.Fatal(err)
	}
	defer unmap()
	for _, r := range []struct{ off, end int64 }{
		{0, int64(len(data))},                // everything
		{int64(page) + 1, int64(3*page) - 1}, // unaligned on both sides
		{10, 20},                             // inside one page: nothing to drop
		{int64(4 * page), int64(len(data)) + int64(page)}, // past the end: clamped
		{int64(3 * page), int64(2 * page)},                // empty
	} {
		Release(data, r.off, r.end)
		if !bytes.Equal(data, want) {
			t.Fatalf("after Release(%d, %d) the mapping reads different bytes", r.off, r.end)
		}
	}
}

package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// errShort is wrapped into every "ran off the end" error so callers can tell a
// truncated file from a malformed one.
var errShort = errors.New("unexpected end of file")

// cursor reads little-endian GGUF primitives from an in-memory (usually
// mapped) file. Every read is bounds-checked against the remaining bytes, so a
// corrupt count can never make it read or allocate past the file.
type cursor struct {
	buf []byte
	off int
}

func (c *cursor) remaining() int { return len(c.buf) - c.off }

func (c *cursor) take(n int, what string) ([]byte, error) {
	if n < 0 || n > c.remaining() {
		return nil, fmt.Errorf("cannot read %s at offset %d: %w", what, c.off, errShort)
	}
	b := c.buf[c.off : c.off+n]
	c.off += n
	return b, nil
}

func (c *cursor) u8(what string) (uint8, error) {
	b, err := c.take(1, what)
	if err != nil {
		return 0, err
	}
	return b[0], nil
}

func (c *cursor) u16(what string) (uint16, error) {
	b, err := c.take(2, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint16(b), nil
}

func (c *cursor) u32(what string) (uint32, error) {
	b, err := c.take(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (c *cursor) u64(what string) (uint64, error) {
	b, err := c.take(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// count reads a uint64 element count and checks that count elements of at
// least minSize bytes each could still fit in the file, before anything is
// allocated for them.
func (c *cursor) count(what string, minSize int) (int, error) {
	n, err := c.u64(what)
	if err != nil {
		return 0, err
	}
	if minSize < 1 {
		minSize = 1
	}
	if n > uint64(c.remaining()/minSize) {
		return 0, fmt.Errorf("%s %d at offset %d does not fit in the %d bytes left: %w", what, n, c.off-8, c.remaining(), errShort)
	}
	return int(n), nil
}

// str reads a GGUF string: a uint64 byte length and the bytes (not
// necessarily valid UTF-8; kept as they are).
func (c *cursor) str(what string) (string, error) {
	n, err := c.count(what+" length", 1)
	if err != nil {
		return "", err
	}
	b, err := c.take(n, what)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

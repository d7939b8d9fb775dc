// Package gguf reads GGUF model files (versions 2 and 3) in pure Go: the
// metadata, the tensor directory, and the tensor data, mapped read-only.
//
// It validates everything it reads before trusting it (counts against the
// bytes left, tensor extents against the file, no overlaps) so that a corrupt
// or hostile file yields an error, never a panic or a huge allocation. It
// hands out raw little-endian bytes, shapes and dtypes; turning them into MLX
// arrays, and mapping GGUF tensor names to Hugging Face ones, is the model
// loader's job. F32/F16/BF16 data is returned without copying; Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0, Q4_K and Q5_K are repacked losslessly into MLX's affine
// quantization layout; Q6_K and Q8_K are dequantized exactly to float32 (see
// Load).
package gguf

import (
	"errors"
	"fmt"
	"sort"

	"github.com/mlxgo/mlxgo/models/internal/mmap"
)

// Magic is the first four bytes of every GGUF file.
const Magic = "GGUF"

// DefaultAlignment applies when general.alignment is absent.
const DefaultAlignment = 32

// File is an open GGUF file. Tensor data slices returned by its methods point
// into the mapping and are valid only until Close.
type File struct {
	Version   uint32
	Metadata  map[string]Value
	Tensors   []TensorInfo // in file order
	Alignment int
	// DataOffset is where the tensor data section starts in the file;
	// TensorInfo.Offset is relative to it.
	DataOffset int64

	keys   []string
	byName map[string]int
	data   []byte // the whole file
	unmap  func() error
}

// Open maps the GGUF file at path read-only and parses its header.
func Open(path string) (*File, error) {
	data, unmap, err := mmap.File(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open gguf file: %w", err)
	}
	f, err := Parse(data)
	if err != nil {
		unmap()
		return nil, fmt.Errorf("cannot read gguf file %s: %w", path, err)
	}
	f.unmap = unmap
	return f, nil
}

// Parse reads a GGUF file held in memory. The File keeps data and returns
// slices of it; Close does nothing for a parsed buffer.
func Parse(data []byte) (*File, error) {
	c := &cursor{buf: data}
	magic, err := c.take(4, "magic")
	if err != nil {
		return nil, err
	}
	if string(magic) != Magic {
		return nil, fmt.Errorf("not a gguf file: magic %q", magic)
	}
	f := &File{data: data, Metadata: map[string]Value{}, byName: map[string]int{}}
	if f.Version, err = c.u32("version"); err != nil {
		return nil, err
	}
	switch {
	case f.Version == 2 || f.Version == 3:
	case f.Version == 1:
		return nil, errors.New("gguf version 1 is not supported (re-convert the model with a current llama.cpp)")
	case f.Version&0xffff == 0 && f.Version != 0:
		// A byte-swapped version number: the file was written big-endian.
		return nil, errors.New("big-endian gguf files are not supported")
	default:
		return nil, fmt.Errorf("unsupported gguf version %d", f.Version)
	}
	// A tensor info takes at least 24 bytes and a key/value pair 13, which
	// bounds both counts before anything is allocated for them.
	nTensors, err := c.count("tensor count", 24)
	if err != nil {
		return nil, err
	}
	nKV, err := c.count("metadata count", 13)
	if err != nil {
		return nil, err
	}
	f.keys = make([]string, 0, nKV)
	for i := 0; i < nKV; i++ {
		key, err := c.str("metadata key")
		if err != nil {
			return nil, err
		}
		if _, dup := f.Metadata[key]; dup {
			return nil, fmt.Errorf("metadata key %q appears twice", key)
		}
		t, err := c.u32("value type of " + key)
		if err != nil {
			return nil, err
		}
		v, err := readValue(c, ValueType(t), 0)
		if err != nil {
			return nil, fmt.Errorf("cannot read metadata %q: %w", key, err)
		}
		f.Metadata[key] = v
		f.keys = append(f.keys, key)
	}
	if err := f.readAlignment(); err != nil {
		return nil, err
	}
	f.Tensors = make([]TensorInfo, 0, nTensors)
	for i := 0; i < nTensors; i++ {
		ti, err := readTensorInfo(c)
		if err != nil {
			return nil, fmt.Errorf("cannot read tensor info %d: %w", i, err)
		}
		if _, dup := f.byName[ti.Name]; dup {
			return nil, fmt.Errorf("tensor %q appears twice", ti.Name)
		}
		f.byName[ti.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, ti)
	}
	// The data section starts at the next multiple of the alignment. Files
	// without tensors may end right after the header, with no padding.
	start := alignUp(int64(c.off), int64(f.Alignment))
	if len(f.Tensors) > 0 && start > int64(len(data)) {
		return nil, fmt.Errorf("tensor data section at offset %d starts past the end of the %d-byte file: %w", start, len(data), errShort)
	}
	f.DataOffset = start
	if err := f.checkExtents(); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *File) readAlignment() error {
	f.Alignment = DefaultAlignment
	v, ok := f.Metadata["general.alignment"]
	if !ok {
		return nil
	}
	a, ok := v.Data.(uint32)
	if !ok {
		return fmt.Errorf("general.alignment is a %s, want uint32", v.Type)
	}
	if a == 0 || a&(a-1) != 0 || a > 1<<20 {
		return fmt.Errorf("general.alignment %d is not a power of two up to 1 MiB", a)
	}
	f.Alignment = int(a)
	return nil
}

// checkExtents checks that every tensor's data is aligned, inside the file,
// and overlaps no other tensor's.
func (f *File) checkExtents() error {
	avail := int64(len(f.data)) - f.DataOffset
	order := make([]int, len(f.Tensors))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return f.Tensors[order[a]].Offset < f.Tensors[order[b]].Offset })
	var end uint64
	for k, i := range order {
		t := &f.Tensors[i]
		if t.Offset%uint64(f.Alignment) != 0 {
			return fmt.Errorf("tensor %q data offset %d is not a multiple of the alignment %d", t.Name, t.Offset, f.Alignment)
		}
		if t.Offset > uint64(avail) || t.Size > uint64(avail)-t.Offset {
			return fmt.Errorf("tensor %q data [%d, +%d) runs past the end of the file (%d data bytes): %w", t.Name, t.Offset, t.Size, avail, errShort)
		}
		if k > 0 && t.Offset < end {
			prev := f.Tensors[order[k-1]].Name
			return fmt.Errorf("tensor %q data overlaps tensor %q", t.Name, prev)
		}
		end = t.Offset + t.Size
	}
	return nil
}

func alignUp(x, a int64) int64 { return (x + a - 1) / a * a }

// Close releases the mapping. Slices obtained from the file must not be used
// afterwards.
func (f *File) Close() error {
	if f == nil || f.unmap == nil {
		return nil
	}
	err := f.unmap()
	f.unmap, f.data = nil, nil
	return err
}

// Tensor returns the directory entry of the named tensor.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	i, ok := f.byName[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Tensors[i], true
}

// Raw returns the tensor's bytes exactly as stored, without copying.
func (f *File) Raw(t TensorInfo) []byte {
	start := f.DataOffset + int64(t.Offset)
	return f.data[start : start+int64(t.Size) : start+int64(t.Size)]
}

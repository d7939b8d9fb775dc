// Package safetensors reads safetensors files in pure Go: it validates the
// JSON header completely before trusting it, maps the file read-only, and
// hands out each tensor's bytes without copying. OpenDir opens a model
// directory, single-file or sharded through model.safetensors.index.json.
//
// It never converts data and never builds MLX arrays; the model loader does
// that from the bytes, shape and dtype given here.
package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sort"

	"github.com/mlxgo/mlxgo/models/internal/mmap"
)

// MaxHeaderSize bounds the JSON header (the reference implementation's
// limit): a corrupt length must not make us allocate gigabytes.
const MaxHeaderSize = 100 << 20

// TensorInfo is one header entry.
type TensorInfo struct {
	Name  string
	DType DType
	// Shape is row-major; empty for a scalar.
	Shape []int
	// Begin and End are byte offsets into the data section.
	Begin, End int64
}

// Elements is the number of elements (1 for a scalar).
func (t TensorInfo) Elements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= int64(d)
	}
	return n
}

// File is one open safetensors file. Slices from Data point into the
// mapping and are valid only until Close.
type File struct {
	Path     string
	Metadata map[string]string
	// Tensors are sorted by Begin (their order in the data section).
	Tensors []TensorInfo

	byName map[string]int
	data   []byte // the data section
	mapped []byte // the whole mapping (page-aligned), for Release
	unmap  func() error
}

// Open maps the file at path read-only and validates its header.
func Open(path string) (*File, error) {
	data, unmap, err := mmap.File(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open safetensors file: %w", err)
	}
	f, err := Parse(data)
	if err != nil {
		unmap()
		return nil, fmt.Errorf("cannot read safetensors file %s: %w", path, err)
	}
	f.Path, f.unmap, f.mapped = path, unmap, data
	return f, nil
}

// Parse validates an in-memory safetensors file; the File keeps data.
func Parse(data []byte) (*File, error) {
	if len(data) < 8 {
		return nil, fmt.Errorf("file of %d bytes is too short for a header length", len(data))
	}
	n := binary.LittleEndian.Uint64(data)
	if n > MaxHeaderSize {
		return nil, fmt.Errorf("header length %d exceeds the %d-byte limit", n, MaxHeaderSize)
	}
	if n > uint64(len(data)-8) {
		return nil, fmt.Errorf("header length %d runs past the end of the %d-byte file", n, len(data))
	}
	header := data[8 : 8+n]
	f := &File{data: data[8+n:], Metadata: map[string]string{}, byName: map[string]int{}}
	if err := f.parseHeader(header); err != nil {
		return nil, fmt.Errorf("invalid header: %w", err)
	}
	if err := f.checkOffsets(); err != nil {
		return nil, err
	}
	return f, nil
}

// parseHeader walks the top-level JSON object by hand so that duplicate
// names, unknown fields and trailing garbage are errors, not silently lost.
func (f *File) parseHeader(header []byte) error {
	if len(bytes.TrimLeft(header, " \t\r\n")) == 0 || bytes.TrimLeft(header, " \t\r\n")[0] != '{' {
		return errors.New("not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(header))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil { // the opening brace
		return err
	}
	seenMeta := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name := tok.(string) // object keys are always strings
		if name == "__metadata__" {
			if seenMeta {
				return errors.New("__metadata__ appears twice")
			}
			seenMeta = true
			if err := f.parseMetadata(dec); err != nil {
				return err
			}
			continue
		}
		if _, dup := f.byName[name]; dup {
			return fmt.Errorf("tensor %q appears twice", name)
		}
		ti, err := parseEntry(dec, name)
		if err != nil {
			return err
		}
		f.byName[name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, ti)
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return err
	}
	// Only whitespace (the format pads with spaces) may follow the object.
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON object")
	}
	return nil
}

func (f *File) parseMetadata(dec *json.Decoder) error {
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		return fmt.Errorf("__metadata__ is not an object: %w", err)
	}
	for k, v := range raw {
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("__metadata__ value of %q is not a string", k)
		}
		f.Metadata[k] = s
	}
	return nil
}

// maxElements keeps element and byte counts far from int64 overflow.
const maxElements = 1 << 56

func parseEntry(dec *json.Decoder, name string) (TensorInfo, error) {
	ti := TensorInfo{Name: name}
	var raw map[string]json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return ti, fmt.Errorf("tensor %q: entry is not an object: %w", name, err)
	}
	var dtype string
	var shape []int64
	var offsets []int64
	for key, val := range raw {
		var err error
		switch key {
		case "dtype":
			err = json.Unmarshal(val, &dtype)
		case "shape":
			err = json.Unmarshal(val, &shape)
		case "data_offsets":
			err = json.Unmarshal(val, &offsets)
		default:
			return ti, fmt.Errorf("tensor %q: unknown field %q", name, key)
		}
		if err != nil {
			return ti, fmt.Errorf("tensor %q: bad %s: %w", name, key, err)
		}
	}
	if shape == nil { // absent or null; [] (a scalar) decodes as non-nil

		return ti, fmt.Errorf("tensor %q: missing shape", name)
	}
	ti.DType = DType(dtype)
	if ti.DType.Size() == 0 {
		return ti, fmt.Errorf("unknown dtype %q in tensor %s", dtype, name)
	}
	if len(offsets) != 2 {
		return ti, fmt.Errorf("tensor %q: data_offsets must be two integers, got %d", name, len(offsets))
	}
	ti.Shape = make([]int, len(shape))
	n := uint64(1)
	for i, d := range shape {
		if d < 0 {
			return ti, fmt.Errorf("tensor %q: negative dimension %d", name, d)
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > maxElements {
			return ti, fmt.Errorf("tensor %q: shape %v has too many elements", name, shape)
		}
		n, ti.Shape[i] = lo, int(d)
	}
	ti.Begin, ti.End = offsets[0], offsets[1]
	if ti.Begin < 0 || ti.End < ti.Begin {
		return ti, fmt.Errorf("tensor %q: bad data_offsets [%d, %d]", name, ti.Begin, ti.End)
	}
	if want := int64(n) * int64(ti.DType.Size()); ti.End-ti.Begin != want {
		return ti, fmt.Errorf("tensor %q: data_offsets span %d bytes, shape %v of %s needs %d", name, ti.End-ti.Begin, ti.Shape, ti.DType, want)
	}
	return ti, nil
}

// checkOffsets sorts tensors by position and checks they lie inside the data
// section without overlapping.
func (f *File) checkOffsets() error {
	sort.SliceStable(f.Tensors, func(i, j int) bool { return f.Tensors[i].Begin < f.Tensors[j].Begin })
	var prevEnd int64
	for i, t := range f.Tensors {
		if t.End > int64(len(f.data)) {
			return fmt.Errorf("tensor %q data [%d, %d) runs past the end of the %d-byte data section", t.Name, t.Begin, t.End, len(f.data))
		}
		// Empty tensors occupy no bytes and cannot overlap anything.
		if i > 0 && t.Begin < prevEnd && t.End > t.Begin {
			return fmt.Errorf("tensor %q data overlaps tensor %q", t.Name, f.Tensors[i-1].Name)
		}
		if t.End > prevEnd {
			prevEnd = t.End
		}
		f.byName[t.Name] = i
	}
	return nil
}

// Tensor returns the header entry of the named tensor.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	i, ok := f.byName[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Tensors[i], true
}

// Data returns the tensor's bytes (little-endian, row-major) without copying.
func (f *File) Data(t TensorInfo) []byte {
	return f.data[t.Begin:t.End:t.End]
}

// Close releases the mapping; slices from Data must not be used afterwards.
func (f *File) Close() error {
	if f == nil || f.unmap == nil {
		return nil
	}
	err := f.unmap()
	f.unmap, f.data, f.mapped = nil, nil, nil
	return err
}

// Release tells the kernel that t's bytes have been copied out (see
// mmap.Release): they leave the resident set, and Data(t) stays readable.
func (f *File) Release(t TensorInfo) {
	if f.mapped != nil {
		off := int64(len(f.mapped) - len(f.data)) // the header precedes the data section
		mmap.Release(f.mapped, off+t.Begin, off+t.End)
	}
}

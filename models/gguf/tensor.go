package gguf

import (
	"fmt"
	"math/bits"
)

// GGMLType is a tensor's storage type, numbered as in ggml.
type GGMLType uint32

// The tensor types this package knows the block layout of. Only some can be
// loaded (see Load); the others are named in errors.
const (
	F32     GGMLType = 0
	F16     GGMLType = 1
	Q4_0    GGMLType = 2
	Q4_1    GGMLType = 3
	Q5_0    GGMLType = 6
	Q5_1    GGMLType = 7
	Q8_0    GGMLType = 8
	Q8_1    GGMLType = 9
	Q2_K    GGMLType = 10
	Q3_K    GGMLType = 11
	Q4_K    GGMLType = 12
	Q5_K    GGMLType = 13
	Q6_K    GGMLType = 14
	Q8_K    GGMLType = 15
	IQ2_XXS GGMLType = 16
	IQ2_XS  GGMLType = 17
	IQ3_XXS GGMLType = 18
	IQ1_S   GGMLType = 19
	IQ4_NL  GGMLType = 20
	IQ3_S   GGMLType = 21
	IQ2_S   GGMLType = 22
	IQ4_XS  GGMLType = 23
	I8      GGMLType = 24
	I16     GGMLType = 25
	I32     GGMLType = 26
	I64     GGMLType = 27
	F64     GGMLType = 28
	IQ1_M   GGMLType = 29
	BF16    GGMLType = 30
	TQ1_0   GGMLType = 34
	TQ2_0   GGMLType = 35
	MXFP4   GGMLType = 39
)

// typeInfo is a type's name, elements per block and bytes per block.
type typeInfo struct {
	name        string
	block, size uint64
}

var types = map[GGMLType]typeInfo{
	F32: {"F32", 1, 4}, F16: {"F16", 1, 2}, BF16: {"BF16", 1, 2}, F64: {"F64", 1, 8},
	I8: {"I8", 1, 1}, I16: {"I16", 1, 2}, I32: {"I32", 1, 4}, I64: {"I64", 1, 8},
	Q4_0: {"Q4_0", 32, 18}, Q4_1: {"Q4_1", 32, 20}, Q5_0: {"Q5_0", 32, 22}, Q5_1: {"Q5_1", 32, 24},
	Q8_0: {"Q8_0", 32, 34}, Q8_1: {"Q8_1", 32, 40},
	Q2_K: {"Q2_K", 256, 84}, Q3_K: {"Q3_K", 256, 110}, Q4_K: {"Q4_K", 256, 144},
	Q5_K: {"Q5_K", 256, 176}, Q6_K: {"Q6_K", 256, 210}, Q8_K: {"Q8_K", 256, 292},
	IQ2_XXS: {"IQ2_XXS", 256, 66}, IQ2_XS: {"IQ2_XS", 256, 74}, IQ3_XXS: {"IQ3_XXS", 256, 98},
	IQ1_S: {"IQ1_S", 256, 50}, IQ4_NL: {"IQ4_NL", 32, 18}, IQ3_S: {"IQ3_S", 256, 110},
	IQ2_S: {"IQ2_S", 256, 82}, IQ4_XS: {"IQ4_XS", 256, 136}, IQ1_M: {"IQ1_M", 256, 56},
	TQ1_0: {"TQ1_0", 256, 54}, TQ2_0: {"TQ2_0", 256, 66}, MXFP4: {"MXFP4", 32, 17},
}

func (t GGMLType) String() string {
	if ti, ok := types[t]; ok {
		return ti.name
	}
	return fmt.Sprintf("GGMLType(%d)", uint32(t))
}

// BlockSize is the number of elements in one block (1 for plain types).
func (t GGMLType) BlockSize() int { return int(types[t].block) }

// BlockBytes is the number of bytes one block occupies.
func (t GGMLType) BlockBytes() int { return int(types[t].size) }

// maxDims is ggml's GGML_MAX_DIMS.
const maxDims = 4

// TensorInfo is one entry of the tensor directory.
type TensorInfo struct {
	Name string
	// Dims is in GGUF (ggml) order: Dims[0] is the fastest-varying axis.
	Dims []uint64
	Type GGMLType
	// Offset is relative to File.DataOffset; Size is the byte count.
	Offset, Size uint64
}

// Shape is the row-major shape as numpy and MLX see it: Dims reversed.
func (t TensorInfo) Shape() []int {
	s := make([]int, len(t.Dims))
	for i, d := range t.Dims {
		s[len(s)-1-i] = int(d)
	}
	return s
}

// Elements is the number of elements.
func (t TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// maxElements keeps element and byte counts far from uint64 overflow and
// int conversion trouble (2^48 elements is 256 TiB of F32).
const maxElements = 1 << 48

func readTensorInfo(c *cursor) (TensorInfo, error) {
	var t TensorInfo
	var err error
	if t.Name, err = c.str("tensor name"); err != nil {
		return t, err
	}
	nd, err := c.u32("dimension count of " + t.Name)
	if err != nil {
		return t, err
	}
	if nd == 0 || nd > maxDims {
		return t, fmt.Errorf("tensor %q has %d dimensions, want 1 to %d", t.Name, nd, maxDims)
	}
	t.Dims = make([]uint64, nd)
	n := uint64(1)
	for i := range t.Dims {
		if t.Dims[i], err = c.u64("dimension of " + t.Name); err != nil {
			return t, err
		}
		hi, lo := bits.Mul64(n, t.Dims[i])
		if hi != 0 || lo > maxElements {
			return t, fmt.Errorf("tensor %q has too many elements (dims %v)", t.Name, t.Dims[:i+1])
		}
		n = lo
	}
	ty, err := c.u32("type of " + t.Name)
	if err != nil {
		return t, err
	}
	t.Type = GGMLType(ty)
	info, ok := types[t.Type]
	if !ok {
		return t, fmt.Errorf("unknown tensor type %d in tensor %s", ty, t.Name)
	}
	// ggml quantizes along rows: the fastest axis must hold whole blocks.
	if t.Dims[0]%info.block != 0 {
		return t, fmt.Errorf("tensor %q: row length %d is not a multiple of the %s block size %d", t.Name, t.Dims[0], info.name, info.block)
	}
	t.Size = n / info.block * info.size
	if t.Offset, err = c.u64("data offset of " + t.Name); err != nil {
		return t, err
	}
	return t, nil
}

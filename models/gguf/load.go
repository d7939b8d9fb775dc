package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
)

// DType names an element type the way MLX spells it.
type DType string

// The element types Load hands out.
const (
	Float32  DType = "float32"
	Float16  DType = "float16"
	BFloat16 DType = "bfloat16"
	Float64  DType = "float64"
	Int8     DType = "int8"
	Int16    DType = "int16"
	Int32    DType = "int32"
	Int64    DType = "int64"
	Uint32   DType = "uint32"
)

// Tensor is a loaded tensor: either dense (Data) or affine-quantized (Quant).
type Tensor struct {
	Name string
	// Type is how the file stores it.
	Type GGMLType
	// Shape is the row-major logical shape (GGUF dims reversed).
	Shape []int
	// DType and Data describe a dense tensor: little-endian values in
	// row-major order. For F32/F16/BF16 and the integer types Data points
	// into the mapping; k-quants are dequantized into a new float32 buffer.
	DType DType
	Data  []byte
	// Quant is set instead of Data for the types AffineBits accepts.
	Quant *Affine
}

// Affine is a tensor in MLX's affine quantization layout: along the last
// axis, each group of GroupSize values shares a scale and a bias, and value
// = scale*q + bias for the unsigned Bits-bit integer q. Weight packs q into
// little-endian uint32 words, 32/Bits per word, element j of a word in bits
// [Bits*j, Bits*j+Bits).
type Affine struct {
	Bits, GroupSize int
	// Weight has shape WeightShape (dtype uint32); Scales and Biases have
	// shape ScaleShape and dtype ScaleDType.
	Weight                  []byte
	WeightShape, ScaleShape []int
	Scales, Biases          []byte
	ScaleDType              DType
}

// UnsupportedTypeError reports a tensor whose storage type Load cannot
// convert.
type UnsupportedTypeError struct {
	Type   GGMLType
	Tensor string
}

func (e *UnsupportedTypeError) Error() string {
	return fmt.Sprintf("unsupported tensor type %s in tensor %s", e.Type, e.Tensor)
}

var plainTypes = map[GGMLType]DType{
	F32: Float32, F16: Float16, BF16: BFloat16, F64: Float64,
	I8: Int8, I16: Int16, I32: Int32, I64: Int64,
}

// Load returns the named tensor ready to become an MLX array:
//
//   - F32, F16, BF16, F64 and I8…I64 pass through without copying;
//   - Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 are repacked losslessly into MLX
//     affine quantization with group size 32 and float16 scales (see
//     Affine and convertAffine);
//   - Q4_K and Q5_K are repacked losslessly into MLX affine quantization
//     with group size 32 and float32 scales (see convertKAffine);
//   - Q6_K and Q8_K are dequantized to float32 with exactly the arithmetic
//     of ggml's reference dequantize_row_* functions: Q6_K's 16-element
//     groups are no MLX group size (32, 64, 128), and two of them with
//     different scales are no one affine map, so no affine form is exact;
//   - any other type (Q2_K, Q3_K: 16-element groups; IQ*, TQ*, MXFP4:
//     codebooks or other formats) is an *UnsupportedTypeError.
func (f *File) Load(name string) (*Tensor, error) {
	ti, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("no tensor %q in gguf file", name)
	}
	t := &Tensor{Name: name, Type: ti.Type, Shape: ti.Shape()}
	raw := f.Raw(ti)
	if dt, ok := plainTypes[ti.Type]; ok {
		t.DType, t.Data = dt, raw
		return t, nil
	}
	switch ti.Type {
	case Q4_0, Q4_1, Q5_0, Q5_1, Q8_0:
		q, err := convertAffine(ti, raw)
		if err != nil {
			return nil, fmt.Errorf("cannot convert tensor %s: %w", name, err)
		}
		t.Quant = q
		return t, nil
	case Q4_K, Q5_K:
		if ti.Shape()[len(ti.Shape())-1]%32 != 0 {
			return nil, fmt.Errorf("cannot convert tensor %s: rows of %d are not whole groups of 32", name, ti.Shape()[len(ti.Shape())-1])
		}
		t.Quant = convertKAffine(ti, raw)
		return t, nil
	case Q6_K, Q8_K:
		t.DType, t.Data = Float32, dequantizeK(ti.Type, raw)
		return t, nil
	}
	return nil, &UnsupportedTypeError{Type: ti.Type, Tensor: name}
}

// Float32s returns the tensor's values as float32: dense float types are
// widened exactly, affine tensors are dequantized as scale*q + bias in
// float32 (see convertAffine for why that is exact). It serves tests and
// callers that want plain floats; the loader normally keeps the layout.
func (t *Tensor) Float32s() ([]float32, error) {
	if t.Quant != nil {
		return t.Quant.dequantize(), nil
	}
	switch t.DType {
	case Float32:
		out := make([]float32, len(t.Data)/4)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
		}
		return out, nil
	case Float16, BFloat16:
		widen := halfToFloat32
		if t.DType == BFloat16 {
			widen = bf16ToFloat32
		}
		out := make([]float32, len(t.Data)/2)
		for i := range out {
			out[i] = widen(binary.LittleEndian.Uint16(t.Data[2*i:]))
		}
		return out, nil
	}
	return nil, fmt.Errorf("cannot read tensor %s of dtype %s as float32", t.Name, t.DType)
}

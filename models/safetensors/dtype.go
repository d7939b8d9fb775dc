package safetensors

// DType is a tensor element type as safetensors spells it in the header.
type DType string

// The dtypes a header may name. F8 types are passed through as raw bytes
// (one byte per element); whether a model can use them is the loader's call.
const (
	F64    DType = "F64"
	F32    DType = "F32"
	F16    DType = "F16"
	BF16   DType = "BF16"
	I64    DType = "I64"
	I32    DType = "I32"
	I16    DType = "I16"
	I8     DType = "I8"
	U64    DType = "U64"
	U32    DType = "U32"
	U16    DType = "U16"
	U8     DType = "U8"
	Bool   DType = "BOOL"
	F8E4M3 DType = "F8_E4M3"
	F8E5M2 DType = "F8_E5M2"
	F8E8M0 DType = "F8_E8M0"
)

var dtypeSizes = map[DType]int{
	F64: 8, F32: 4, F16: 2, BF16: 2,
	I64: 8, I32: 4, I16: 2, I8: 1,
	U64: 8, U32: 4, U16: 2, U8: 1,
	Bool: 1, F8E4M3: 1, F8E5M2: 1, F8E8M0: 1,
}

// Size is the number of bytes per element, 0 for an unknown dtype.
func (d DType) Size() int { return dtypeSizes[d] }

var mlxNames = map[DType]string{
	F64: "float64", F32: "float32", F16: "float16", BF16: "bfloat16",
	I64: "int64", I32: "int32", I16: "int16", I8: "int8",
	U64: "uint64", U32: "uint32", U16: "uint16", U8: "uint8", Bool: "bool",
}

// MLX is the MLX dtype name holding this type bit for bit, or "" when MLX
// has no such dtype (the F8 types).
func (d DType) MLX() string { return mlxNames[d] }

package gguf

import (
	"fmt"
	"math"
)

// ValueType is the type tag of a GGUF metadata value, as stored in the file.
type ValueType uint32

// Metadata value types, numbered as in the GGUF specification.
const (
	TypeUint8 ValueType = iota
	TypeInt8
	TypeUint16
	TypeInt16
	TypeUint32
	TypeInt32
	TypeFloat32
	TypeBool
	TypeString
	TypeArray
	TypeUint64
	TypeInt64
	TypeFloat64
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("ValueType(%d)", uint32(t))
}

// minSize is the fewest bytes one value of type t can occupy in a file; it
// bounds array counts before anything is allocated for them.
func (t ValueType) minSize() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeString, TypeUint64, TypeInt64, TypeFloat64:
		return 8
	case TypeArray:
		return 12 // element type + count
	}
	return 1
}

// Value is one metadata value. Data holds, by Type:
//
//	TypeUint8 … TypeFloat64  uint8, int8, uint16, int16, uint32, int32,
//	                         float32, bool, uint64, int64, float64
//	TypeString               string (the file's bytes, not checked for UTF-8)
//	TypeArray                a slice of the element type ([]uint8 … []string);
//	                         []Value when the elements are themselves arrays
//
// Elem is the element type when Type is TypeArray.
type Value struct {
	Type ValueType
	Elem ValueType
	Data any
}

// maxDepth bounds nesting of arrays in arrays; real files use one level.
const maxDepth = 16

func readValue(c *cursor, t ValueType, depth int) (Value, error) {
	v := Value{Type: t}
	var err error
	switch t {
	case TypeUint8:
		v.Data, err = c.u8("uint8 value")
	case TypeInt8:
		var u uint8
		u, err = c.u8("int8 value")
		v.Data = int8(u)
	case TypeUint16:
		v.Data, err = c.u16("uint16 value")
	case TypeInt16:
		var u uint16
		u, err = c.u16("int16 value")
		v.Data = int16(u)
	case TypeUint32:
		v.Data, err = c.u32("uint32 value")
	case TypeInt32:
		var u uint32
		u, err = c.u32("int32 value")
		v.Data = int32(u)
	case TypeFloat32:
		var u uint32
		u, err = c.u32("float32 value")
		v.Data = math.Float32frombits(u)
	case TypeBool:
		var u uint8
		u, err = c.u8("bool value")
		if err == nil && u > 1 {
			err = fmt.Errorf("bool value %d at offset %d is neither 0 nor 1", u, c.off-1)
		}
		v.Data = u == 1
	case TypeString:
		v.Data, err = c.str("string value")
	case TypeUint64:
		v.Data, err = c.u64("uint64 value")
	case TypeInt64:
		var u uint64
		u, err = c.u64("int64 value")
		v.Data = int64(u)
	case TypeFloat64:
		var u uint64
		u, err = c.u64("float64 value")
		v.Data = math.Float64frombits(u)
	case TypeArray:
		return readArray(c, depth)
	default:
		return v, fmt.Errorf("unknown value type %d at offset %d", uint32(t), c.off-4)
	}
	return v, err
}

func readArray(c *cursor, depth int) (Value, error) {
	if depth >= maxDepth {
		return Value{}, fmt.Errorf("arrays nested deeper than %d at offset %d", maxDepth, c.off)
	}
	et, err := c.u32("array element type")
	if err != nil {
		return Value{}, err
	}
	elem := ValueType(et)
	if elem > TypeFloat64 {
		return Value{}, fmt.Errorf("unknown array element type %d at offset %d", et, c.off-4)
	}
	n, err := c.count("array length", elem.minSize())
	if err != nil {
		return Value{}, err
	}
	v := Value{Type: TypeArray, Elem: elem}
	// Fixed-size elements are decoded in one pass over a bounds-checked span.
	switch elem {
	case TypeUint8:
		b, err := c.take(n, "uint8 array")
		v.Data = append([]uint8(nil), b...)
		return v, err
	case TypeInt8:
		b, err := c.take(n, "int8 array")
		v.Data = decode(b, 1, func(p []byte) int8 { return int8(p[0]) })
		return v, err
	case TypeBool:
		b, err := c.take(n, "bool array")
		if err != nil {
			return v, err
		}
		out := make([]bool, n)
		for i, x := range b {
			if x > 1 {
				return v, fmt.Errorf("bool array element %d is %d, neither 0 nor 1", i, x)
			}
			out[i] = x == 1
		}
		v.Data = out
		return v, nil
	case TypeUint16:
		b, err := c.take(2*n, "uint16 array")
		v.Data = decode(b, 2, le16)
		return v, err
	case TypeInt16:
		b, err := c.take(2*n, "int16 array")
		v.Data = decode(b, 2, func(p []byte) int16 { return int16(le16(p)) })
		return v, err
	case TypeUint32:
		b, err := c.take(4*n, "uint32 array")
		v.Data = decode(b, 4, le32)
		return v, err
	case TypeInt32:
		b, err := c.take(4*n, "int32 array")
		v.Data = decode(b, 4, func(p []byte) int32 { return int32(le32(p)) })
		return v, err
	case TypeFloat32:
		b, err := c.take(4*n, "float32 array")
		v.Data = decode(b, 4, func(p []byte) float32 { return math.Float32frombits(le32(p)) })
		return v, err
	case TypeUint64:
		b, err := c.take(8*n, "uint64 array")
		v.Data = decode(b, 8, le64)
		return v, err
	case TypeInt64:
		b, err := c.take(8*n, "int64 array")
		v.Data = decode(b, 8, func(p []byte) int64 { return int64(le64(p)) })
		return v, err
	case TypeFloat64:
		b, err := c.take(8*n, "float64 array")
		v.Data = decode(b, 8, func(p []byte) float64 { return math.Float64frombits(le64(p)) })
		return v, err
	case TypeString:
		out := make([]string, n)
		for i := range out {
			if out[i], err = c.str("string array element"); err != nil {
				return v, err
			}
		}
		v.Data = out
		return v, nil
	}
	// Arrays of arrays.
	out := make([]Value, n)
	for i := range out {
		if out[i], err = readArray(c, depth+1); err != nil {
			return v, err
		}
	}
	v.Data = out
	return v, nil
}

// decode converts a span of fixed-size little-endian elements; b is nil when
// the span was out of bounds, giving a nil slice alongside the error.
func decode[T any](b []byte, size int, f func([]byte) T) []T {
	if b == nil {
		return nil
	}
	out := make([]T, len(b)/size)
	for i := range out {
		out[i] = f(b[i*size:])
	}
	return out
}

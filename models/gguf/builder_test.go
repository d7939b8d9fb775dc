package gguf

import (
	"encoding/binary"
	"math"
)

// builder writes GGUF files for tests: the byte layout is spelled out here,
// independently of the parser, so a parser bug cannot hide in shared code.
type builder struct {
	buf []byte
}

func (b *builder) u8(v uint8)   { b.buf = append(b.buf, v) }
func (b *builder) u16(v uint16) { b.buf = binary.LittleEndian.AppendUint16(b.buf, v) }
func (b *builder) u32(v uint32) { b.buf = binary.LittleEndian.AppendUint32(b.buf, v) }
func (b *builder) u64(v uint64) { b.buf = binary.LittleEndian.AppendUint64(b.buf, v) }
func (b *builder) str(s string) { b.u64(uint64(len(s))); b.buf = append(b.buf, s...) }

func (b *builder) header(version uint32, nTensors, nKV uint64) {
	b.buf = append(b.buf, Magic...)
	b.u32(version)
	b.u64(nTensors)
	b.u64(nKV)
}

// kv writes one key/value pair; v's Go type picks the GGUF type.
func (b *builder) kv(key string, v any) {
	b.str(key)
	b.value(v, true)
}

func (b *builder) value(v any, tagged bool) {
	tag := func(t ValueType) {
		if tagged {
			b.u32(uint32(t))
		}
	}
	switch x := v.(type) {
	case uint8:
		tag(TypeUint8)
		b.u8(x)
	case int8:
		tag(TypeInt8)
		b.u8(uint8(x))
	case uint16:
		tag(TypeUint16)
		b.u16(x)
	case int16:
		tag(TypeInt16)
		b.u16(uint16(x))
	case uint32:
		tag(TypeUint32)
		b.u32(x)
	case int32:
		tag(TypeInt32)
		b.u32(uint32(x))
	case float32:
		tag(TypeFloat32)
		b.u32(math.Float32bits(x))
	case bool:
		tag(TypeBool)
		if x {
			b.u8(1)
		} else {
			b.u8(0)
		}
	case string:
		tag(TypeString)
		b.str(x)
	case uint64:
		tag(TypeUint64)
		b.u64(x)
	case int64:
		tag(TypeInt64)
		b.u64(uint64(x))
	case float64:
		tag(TypeFloat64)
		b.u64(math.Float64bits(x))
	case array:
		tag(TypeArray)
		b.u32(uint32(x.elem))
		b.u64(uint64(len(x.items)))
		for _, it := range x.items {
			b.value(it, false)
		}
	default:
		panic("builder: unsupported value type")
	}
}

// array is a GGUF array value for the builder.
type array struct {
	elem  ValueType
	items []any
}

func arr[T any](elem ValueType, xs ...T) array {
	a := array{elem: elem}
	for _, x := range xs {
		a.items = append(a.items, x)
	}
	return a
}

// tensorInfo writes one tensor directory entry; dims in GGUF order.
func (b *builder) tensorInfo(name string, t GGMLType, offset uint64, dims ...uint64) {
	b.str(name)
	b.u32(uint32(len(dims)))
	for _, d := range dims {
		b.u64(d)
	}
	b.u32(uint32(t))
	b.u64(offset)
}

// pad aligns the buffer to a multiple of a with zero bytes.
func (b *builder) pad(a int) {
	for len(b.buf)%a != 0 {
		b.buf = append(b.buf, 0)
	}
}

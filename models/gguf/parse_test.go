package gguf

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// TestValueTypes writes one value of every type (and nested arrays) and reads
// it back through Value and the typed getters.
func TestValueTypes(t *testing.T) {
	nested := arr(TypeArray, arr(TypeInt32, int32(1), int32(-2)), arr(TypeInt32, int32(3)))
	kvs := []struct {
		key  string
		v    any
		want any
	}{
		{"u8", uint8(200), uint8(200)},
		{"i8", int8(-100), int8(-100)},
		{"u16", uint16(60000), uint16(60000)},
		{"i16", int16(-30000), int16(-30000)},
		{"u32", uint32(4e9), uint32(4e9)},
		{"i32", int32(-2e9), int32(-2e9)},
		{"f32", float32(1.5), float32(1.5)},
		{"bool", true, true},
		{"str", "héllo", "héllo"},
		{"u64", uint64(math.MaxUint64), uint64(math.MaxUint64)},
		{"i64", int64(math.MinInt64), int64(math.MinInt64)},
		{"f64", 0.1, 0.1},
		{"strs", arr(TypeString, "a", "", "ccc"), []string{"a", "", "ccc"}},
		{"f32s", arr(TypeFloat32, float32(-1), float32(0.25)), []float32{-1, 0.25}},
		{"u8s", arr(TypeUint8, uint8(1), uint8(255)), []uint8{1, 255}},
		{"i16s", arr(TypeInt16, int16(-1), int16(7)), []int16{-1, 7}},
		{"u64s", arr(TypeUint64, uint64(1), uint64(math.MaxUint64)), []uint64{1, math.MaxUint64}},
		{"bools", arr(TypeBool, true, false), []bool{true, false}},
		{"empty", arr[int](TypeInt32), []int32{}},
	}
	var b builder
	b.header(3, 0, uint64(len(kvs)+1))
	for _, kv := range kvs {
		b.kv(kv.key, kv.v)
	}
	b.kv("nested", nested)
	f, err := Parse(b.buf)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range kvs {
		t.Run(kv.key, func(t *testing.T) {
			v, ok := f.Value(kv.key)
			if !ok || !reflect.DeepEqual(v.Data, kv.want) {
				t.Errorf("got %#v, want %#v", v.Data, kv.want)
			}
		})
	}
	n, _ := f.Value("nested")
	if inner, ok := n.Data.([]Value); !ok || len(inner) != 2 || !reflect.DeepEqual(inner[0].Data, []int32{1, -2}) || n.Elem != TypeArray {
		t.Errorf("nested array = %#v", n)
	}
	if got := f.Keys(); len(got) != len(kvs)+1 || got[0] != "u8" || got[len(got)-1] != "nested" {
		t.Errorf("Keys() = %v, want file order", got)
	}
}

func TestGetters(t *testing.T) {
	var b builder
	b.header(3, 0, 8)
	b.kv("u8", uint8(7))
	b.kv("i8", int8(-3))
	b.kv("big", uint64(math.MaxUint64))
	b.kv("f32", float32(0.5))
	b.kv("u16s", arr(TypeUint16, uint16(1), uint16(65535)))
	b.kv("u32s", arr(TypeUint32, uint32(1), uint32(1<<31)))
	b.kv("f64s", arr(TypeFloat64, 0.5, 0.1))
	b.kv("s", "x")
	f, err := Parse(b.buf)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		got, want  any
		ok, wantOK bool
	}
	check := map[string]func() result{
		"Int of uint8":             func() result { v, ok := f.Int("u8"); return result{v, int64(7), ok, true} },
		"Int of int8":              func() result { v, ok := f.Int("i8"); return result{v, int64(-3), ok, true} },
		"Int of huge uint64":       func() result { _, ok := f.Int("big"); return result{nil, nil, ok, false} },
		"Uint of huge uint64":      func() result { v, ok := f.Uint("big"); return result{v, uint64(math.MaxUint64), ok, true} },
		"Uint of negative":         func() result { _, ok := f.Uint("i8"); return result{nil, nil, ok, false} },
		"Float of float32":         func() result { v, ok := f.Float("f32"); return result{v, 0.5, ok, true} },
		"Float of int":             func() result { v, ok := f.Float("u8"); return result{v, 7.0, ok, true} },
		"Int of string":            func() result { _, ok := f.Int("s"); return result{nil, nil, ok, false} },
		"String of int":            func() result { _, ok := f.String("u8"); return result{nil, nil, ok, false} },
		"missing key":              func() result { _, ok := f.String("nope"); return result{nil, nil, ok, false} },
		"Int32s of uint16":         func() result { v, ok := f.Int32s("u16s"); return result{v, []int32{1, 65535}, ok, true} },
		"Int32s overflow":          func() result { _, ok := f.Int32s("u32s"); return result{nil, nil, ok, false} },
		"Ints of uint32":           func() result { v, ok := f.Ints("u32s"); return result{v, []int64{1, 1 << 31}, ok, true} },
		"Float32s of exact f64":    func() result { _, ok := f.Float32s("f64s"); return result{nil, nil, ok, false} },
		"Float32s of string array": func() result { _, ok := f.Float32s("s"); return result{nil, nil, ok, false} },
	}
	for name, fn := range check {
		t.Run(name, func(t *testing.T) {
			r := fn()
			if r.ok != r.wantOK || r.wantOK && !reflect.DeepEqual(r.got, r.want) {
				t.Errorf("got %#v, %v; want %#v, %v", r.got, r.ok, r.want, r.wantOK)
			}
		})
	}
}

// TestParseErrors feeds malformed files and checks each fails with a message
// naming the problem.
func TestParseErrors(t *testing.T) {
	valid := func(mod func(b *builder)) []byte {
		var b builder
		mod(&b)
		return b.buf
	}
	oneTensor := func(t GGMLType, offset uint64, dataBytes int, dims ...uint64) func(b *builder) {
		return func(b *builder) {
			b.header(3, 1, 0)
			b.tensorInfo("w", t, offset, dims...)
			b.pad(32)
			b.buf = append(b.buf, make([]byte, dataBytes)...)
		}
	}
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "magic"},
		{"bad magic", []byte("GGML\x03\x00\x00\x00"), "not a gguf file"},
		{"version 1", valid(func(b *builder) { b.header(1, 0, 0) }), "version 1"},
		{"big endian", valid(func(b *builder) { b.header(0x03000000, 0, 0) }), "big-endian"},
		{"version 9", valid(func(b *builder) { b.header(9, 0, 0) }), "unsupported gguf version 9"},
		{"huge tensor count", valid(func(b *builder) { b.header(3, 1<<60, 0) }), "tensor count"},
		{"huge kv count", valid(func(b *builder) { b.header(3, 0, 1<<40) }), "metadata count"},
		{"truncated key", valid(func(b *builder) { b.header(3, 0, 1); b.u64(100); b.buf = append(b.buf, "abcdefghijklmnopqrst"...) }), "metadata key"},
		{"unknown value type", valid(func(b *builder) { b.header(3, 0, 1); b.str("k"); b.u32(13) }), "unknown value type 13"},
		{"bad bool", valid(func(b *builder) { b.header(3, 0, 1); b.str("k"); b.u32(uint32(TypeBool)); b.u8(2) }), "neither 0 nor 1"},
		{"huge array", valid(func(b *builder) {
			b.header(3, 0, 1)
			b.str("k")
			b.u32(uint32(TypeArray))
			b.u32(uint32(TypeUint64))
			b.u64(1 << 50)
		}), "array length"},
		{"array of unknown type", valid(func(b *builder) { b.header(3, 0, 1); b.str("k"); b.u32(uint32(TypeArray)); b.u32(99); b.u64(0) }), "unknown array element type 99"},
		{"deep nesting", valid(func(b *builder) {
			b.header(3, 0, 1)
			b.str("k")
			b.u32(uint32(TypeArray))
			for i := 0; i < 20; i++ {
				b.u32(uint32(TypeArray))
				b.u64(1)
			}
		}), "nested deeper"},
		{"duplicate key", valid(func(b *builder) { b.header(3, 0, 2); b.kv("k", uint8(1)); b.kv("k", uint8(2)) }), `"k" appears twice`},
		{"bad alignment", valid(func(b *builder) { b.header(3, 0, 1); b.kv("general.alignment", uint32(24)) }), "power of two"},
		{"alignment wrong type", valid(func(b *builder) { b.header(3, 0, 1); b.kv("general.alignment", uint64(32)) }), "want uint32"},
		{"five dims", valid(oneTensor(F32, 0, 4, 1, 1, 1, 1, 1)), "5 dimensions"},
		{"element overflow", valid(oneTensor(F32, 0, 4, 1<<40, 1<<40)), "too many elements"},
		{"unknown tensor type", valid(oneTensor(GGMLType(99), 0, 4, 1)), "unknown tensor type 99 in tensor w"},
		{"partial block", valid(oneTensor(Q4_0, 0, 18, 16)), "not a multiple of the Q4_0 block size 32"},
		{"data past end", valid(oneTensor(F32, 0, 12, 4)), "runs past the end"},
		{"offset past end", valid(oneTensor(F32, 1<<62, 16, 4)), "runs past the end"},
		{"misaligned offset", valid(oneTensor(F32, 4, 32, 4)), "not a multiple of the alignment"},
		{"overlap", valid(func(b *builder) {
			b.header(3, 2, 0)
			b.tensorInfo("a", F32, 0, 16)
			b.tensorInfo("b", F32, 32, 16)
			b.pad(32)
			b.buf = append(b.buf, make([]byte, 96)...)
		}), `"b" data overlaps tensor "a"`},
		{"duplicate tensor", valid(func(b *builder) {
			b.header(3, 2, 0)
			b.tensorInfo("a", F32, 0, 8)
			b.tensorInfo("a", F32, 32, 8)
			b.pad(32)
			b.buf = append(b.buf, make([]byte, 64)...)
		}), `"a" appears twice`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse(tc.data)
			if err == nil {
				t.Fatalf("parsed %d tensors, want an error containing %q", len(f.Tensors), tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestTruncatedIsErrShort(t *testing.T) {
	var b builder
	b.header(3, 1, 1)
	b.kv("general.architecture", "llama")
	b.tensorInfo("w", F32, 0, 8)
	b.pad(32)
	b.buf = append(b.buf, make([]byte, 32)...)
	if _, err := Parse(b.buf); err != nil {
		t.Fatalf("the complete file does not parse: %v", err)
	}
	// Every proper prefix must fail, and with the truncation sentinel.
	for n := 0; n < len(b.buf); n++ {
		if _, err := Parse(b.buf[:n]); err == nil || (n >= 4 && !errors.Is(err, errShort)) {
			t.Fatalf("prefix of %d bytes: err = %v, want a truncation error", n, err)
		}
	}
}

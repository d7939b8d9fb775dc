package gguf

import (
	"encoding/binary"
	"math"
)

func le16(p []byte) uint16 { return binary.LittleEndian.Uint16(p) }
func le32(p []byte) uint32 { return binary.LittleEndian.Uint32(p) }
func le64(p []byte) uint64 { return binary.LittleEndian.Uint64(p) }

// Keys returns the metadata keys in the order the file stores them.
func (f *File) Keys() []string { return append([]string(nil), f.keys...) }

// Value returns the metadata value stored under key.
func (f *File) Value(key string) (Value, bool) {
	v, ok := f.Metadata[key]
	return v, ok
}

// String returns a string value.
func (f *File) String(key string) (string, bool) {
	s, ok := f.Metadata[key].Data.(string)
	return s, ok
}

// Strings returns an array of strings.
func (f *File) Strings(key string) ([]string, bool) {
	s, ok := f.Metadata[key].Data.([]string)
	return s, ok
}

// Bool returns a bool value.
func (f *File) Bool(key string) (bool, bool) {
	b, ok := f.Metadata[key].Data.(bool)
	return b, ok
}

// Int returns a value of any integer type as an int64; a uint64 above
// math.MaxInt64 is reported as absent rather than wrapped.
func (f *File) Int(key string) (int64, bool) {
	return asInt(f.Metadata[key].Data)
}

// Uint returns a value of any integer type as a uint64; a negative value is
// reported as absent rather than wrapped.
func (f *File) Uint(key string) (uint64, bool) {
	v := f.Metadata[key].Data
	if u, ok := v.(uint64); ok {
		return u, true
	}
	i, ok := asInt(v)
	if !ok || i < 0 {
		return 0, false
	}
	return uint64(i), true
}

// Float returns a float32 or float64 value as a float64 (exactly). Integer
// values are accepted too, since some converters write whole numbers such as
// rope bases as integers; they are converted only when exactly representable.
func (f *File) Float(key string) (float64, bool) {
	switch x := f.Metadata[key].Data.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	i, ok := asInt(f.Metadata[key].Data)
	if !ok || i > 1<<53 || i < -(1<<53) {
		return 0, false
	}
	return float64(i), true
}

// Float32s returns an array of float32 (e.g. tokenizer.ggml.scores). A
// float64 array is accepted when every element converts exactly.
func (f *File) Float32s(key string) ([]float32, bool) {
	switch x := f.Metadata[key].Data.(type) {
	case []float32:
		return x, true
	case []float64:
		out := make([]float32, len(x))
		for i, v := range x {
			out[i] = float32(v)
			if float64(out[i]) != v && !math.IsNaN(v) {
				return nil, false
			}
		}
		return out, true
	}
	return nil, false
}

// Int32s returns an array of any integer type as int32 (e.g.
// tokenizer.ggml.token_type); it is absent if an element does not fit.
func (f *File) Int32s(key string) ([]int32, bool) {
	if x, ok := f.Metadata[key].Data.([]int32); ok {
		return x, true
	}
	ints, ok := f.Ints(key)
	if !ok {
		return nil, false
	}
	out := make([]int32, len(ints))
	for i, v := range ints {
		if v < math.MinInt32 || v > math.MaxInt32 {
			return nil, false
		}
		out[i] = int32(v)
	}
	return out, true
}

// Ints returns an array of any integer type as int64; it is absent if a
// uint64 element exceeds math.MaxInt64.
func (f *File) Ints(key string) ([]int64, bool) {
	switch x := f.Metadata[key].Data.(type) {
	case []uint8:
		return widen(x), true
	case []int8:
		return widen(x), true
	case []uint16:
		return widen(x), true
	case []int16:
		return widen(x), true
	case []uint32:
		return widen(x), true
	case []int32:
		return widen(x), true
	case []int64:
		return x, true
	case []uint64:
		out := make([]int64, len(x))
		for i, v := range x {
			if v > math.MaxInt64 {
				return nil, false
			}
			out[i] = int64(v)
		}
		return out, true
	}
	return nil, false
}

func widen[T uint8 | int8 | uint16 | int16 | uint32 | int32](x []T) []int64 {
	out := make([]int64, len(x))
	for i, v := range x {
		out[i] = int64(v)
	}
	return out
}

func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case uint8:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case int16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint64:
		if x > math.MaxInt64 {
			return 0, false
		}
		return int64(x), true
	}
	return 0, false
}

// Architecture returns general.architecture (e.g. "llama"), the prefix of
// the model's hyper-parameter keys.
func (f *File) Architecture() string {
	s, _ := f.String("general.architecture")
	return s
}

package whisper

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/mlxgo/mlxgo/mlx"
)

// A CTranslate2 model.bin (binary versions 1 to 6, as ctranslate2's
// models/model.cc reads them), all integers little-endian:
//
//	uint32 binary_version
//	string spec name (v2+), uint32 spec revision (v2+)
//	uint32 variable count, then per variable:
//	    string name; uint8 rank; rank × uint32 dims;
//	    v4+: uint8 dtype, uint32 byte count   (v1-3: uint8 item size, uint32 element count)
//	    the bytes
//	v3+: uint32 alias count, then per alias: string alias, string variable name
//
// where a string is a uint16 byte count followed by that many bytes, the last
// of them a NUL. The dtype ids are CTranslate2's DataType enum.

// CT2Dtype is a CTranslate2 DataType.
type CT2Dtype uint8

const (
	CT2Float32 CT2Dtype = iota
	CT2Int8
	CT2Int16
	CT2Int32
	CT2Float16
	CT2BFloat16
)

var ct2Sizes = [...]int{4, 1, 2, 4, 2, 2}
var ct2Names = [...]string{"float32", "int8", "int16", "int32", "float16", "bfloat16"}

func (d CT2Dtype) String() string {
	if int(d) < len(ct2Names) {
		return ct2Names[d]
	}
	return fmt.Sprintf("dtype(%d)", d)
}

// Size is the dtype's item size in bytes.
func (d CT2Dtype) Size() int { return ct2Sizes[d] }

// CT2Var is one variable of a model.bin; Data aliases the file's bytes.
type CT2Var struct {
	Name  string
	Shape []int
	Dtype CT2Dtype
	Data  []byte
}

// Scalar returns a rank-0 integer variable's value.
func (v *CT2Var) Scalar() (int64, error) {
	if len(v.Shape) != 0 {
		return 0, fmt.Errorf("%s has shape %v, want a scalar", v.Name, v.Shape)
	}
	switch v.Dtype {
	case CT2Int8:
		return int64(int8(v.Data[0])), nil
	case CT2Int16:
		return int64(int16(binary.LittleEndian.Uint16(v.Data))), nil
	case CT2Int32:
		return int64(int32(binary.LittleEndian.Uint32(v.Data))), nil
	}
	return 0, fmt.Errorf("%s is %s, want an integer scalar", v.Name, v.Dtype)
}

// CT2Model is a parsed model.bin.
type CT2Model struct {
	Version  int
	Spec     string
	Revision int
	Vars     map[string]*CT2Var
	Aliases  map[string]string
}

// Var returns a variable by name, following aliases.
func (m *CT2Model) Var(name string) (*CT2Var, bool) {
	if v, ok := m.Vars[name]; ok {
		return v, true
	}
	if a, ok := m.Aliases[name]; ok {
		v, ok := m.Vars[a]
		return v, ok
	}
	return nil, false
}

// Names lists the variables in sorted order.
func (m *CT2Model) Names() []string {
	names := make([]string, 0, len(m.Vars))
	for n := range m.Vars {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// ReadCT2File reads a model.bin into memory and parses it.
func ReadCT2File(path string) (*CT2Model, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m, err := ParseCT2(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

type ct2Reader struct {
	b   []byte
	off int
	err error
}

func (r *ct2Reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("at byte %d: %s", r.off, fmt.Sprintf(format, args...))
	}
}

func (r *ct2Reader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b)-r.off {
		r.fail("truncated %s (%d bytes wanted, %d left)", what, n, len(r.b)-r.off)
		return nil
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s
}

func (r *ct2Reader) u8(what string) int {
	s := r.take(1, what)
	if s == nil {
		return 0
	}
	return int(s[0])
}

func (r *ct2Reader) u16(what string) int {
	s := r.take(2, what)
	if s == nil {
		return 0
	}
	return int(binary.LittleEndian.Uint16(s))
}

func (r *ct2Reader) u32(what string) uint32 {
	s := r.take(4, what)
	if s == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(s)
}

func (r *ct2Reader) str(what string) string {
	n := r.u16(what + " length")
	s := r.take(n, what)
	if r.err != nil {
		return ""
	}
	if n == 0 || s[n-1] != 0 {
		r.fail("%s is not NUL-terminated", what)
		return ""
	}
	return string(s[:n-1])
}

// ParseCT2 parses a model.bin held in b. Variables alias b.
func ParseCT2(b []byte) (*CT2Model, error) {
	r := &ct2Reader{b: b}
	m := &CT2Model{Vars: map[string]*CT2Var{}, Aliases: map[string]string{}}
	m.Version = int(r.u32("binary version"))
	if r.err == nil && (m.Version < 1 || m.Version > 6) {
		return nil, fmt.Errorf("CTranslate2 model.bin binary version %d is not supported (1 to 6)", m.Version)
	}
	if m.Version >= 2 {
		m.Spec = r.str("spec name")
		m.Revision = int(r.u32("spec revision"))
	}
	n := r.u32("variable count")
	if r.err == nil && int64(n) > int64(len(b)/8) {
		r.fail("%d variables cannot fit in %d bytes", n, len(b))
	}
	for i := 0; i < int(n) && r.err == nil; i++ {
		v := &CT2Var{Name: r.str("variable name")}
		rank := r.u8("rank")
		elems := int64(1)
		for range rank {
			d := int(r.u32("dimension"))
			v.Shape = append(v.Shape, d)
			elems *= int64(d)
			if elems > int64(len(b)) {
				r.fail("variable %q has shape %v, larger than the file", v.Name, v.Shape)
				break
			}
		}
		var nbytes int64
		if m.Version >= 4 {
			dt := r.u8("dtype")
			nbytes = int64(r.u32("byte count"))
			if r.err == nil && dt >= len(ct2Sizes) {
				r.fail("variable %q has unknown dtype %d", v.Name, dt)
			}
			v.Dtype = CT2Dtype(dt)
		} else {
			size := r.u8("item size")
			count := int64(r.u32("element count"))
			// Versions before 4 stored floats as 4 bytes and int8/int16 by size.
			switch size {
			case 4:
				v.Dtype = CT2Float32
			case 2:
				v.Dtype = CT2Int16
			case 1:
				v.Dtype = CT2Int8
			default:
				r.fail("variable %q has item size %d", v.Name, size)
			}
			nbytes = count * int64(size)
		}
		if r.err != nil {
			break
		}
		if want := elems * int64(v.Dtype.Size()); nbytes != want {
			r.fail("variable %q holds %d bytes, want %d for %v %s", v.Name, nbytes, want, v.Shape, v.Dtype)
			break
		}
		v.Data = r.take(int(nbytes), "data of "+v.Name)
		if _, dup := m.Vars[v.Name]; dup && r.err == nil {
			r.fail("variable %q appears twice", v.Name)
		}
		m.Vars[v.Name] = v
	}
	if m.Version >= 3 && r.err == nil {
		na := r.u32("alias count")
		for i := 0; i < int(na) && r.err == nil; i++ {
			alias, target := r.str("alias"), r.str("alias target")
			if r.err == nil {
				if _, ok := m.Vars[target]; !ok {
					r.fail("alias %q names no variable (%q)", alias, target)
				}
				m.Aliases[alias] = target
			}
		}
	}
	if r.err == nil && r.off != len(b) {
		r.fail("%d bytes after the last record", len(b)-r.off)
	}
	if r.err != nil {
		return nil, fmt.Errorf("malformed CTranslate2 model.bin: %w", r.err)
	}
	return m, nil
}

// floats returns a float variable as float32 values (for checks and tests).
func (v *CT2Var) floats() ([]float32, error) {
	out := make([]float32, len(v.Data)/max(1, v.Dtype.Size()))
	switch v.Dtype {
	case CT2Float32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(v.Data[4*i:]))
		}
	case CT2Float16:
		for i := range out {
			out[i] = mlx.Float16ToFloat32(binary.LittleEndian.Uint16(v.Data[2*i:]))
		}
	case CT2BFloat16:
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(v.Data[2*i:])) << 16)
		}
	default:
		return nil, fmt.Errorf("%s is %s, not a float", v.Name, v.Dtype)
	}
	return out, nil
}

var errNotWhisperSpec = errors.New("not a Whisper model (spec is not WhisperSpec)")

func isWhisperSpec(spec string) bool { return strings.EqualFold(spec, "WhisperSpec") }

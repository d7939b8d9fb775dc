package whisper

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// ct2File builds a model.bin of binary version 6.
type ct2Var struct {
	name  string
	shape []int
	dtype CT2Dtype
	data  []byte
}

func ct2File(vars []ct2Var, aliases [][2]string) []byte {
	var b bytes.Buffer
	w := func(v any) { binary.Write(&b, binary.LittleEndian, v) }
	str := func(s string) { w(uint16(len(s) + 1)); b.WriteString(s); b.WriteByte(0) }
	w(uint32(6))
	str("WhisperSpec")
	w(uint32(3))
	w(uint32(len(vars)))
	for _, v := range vars {
		str(v.name)
		w(uint8(len(v.shape)))
		for _, d := range v.shape {
			w(uint32(d))
		}
		w(uint8(v.dtype))
		w(uint32(len(v.data)))
		b.Write(v.data)
	}
	w(uint32(len(aliases)))
	for _, a := range aliases {
		str(a[0])
		str(a[1])
	}
	return b.Bytes()
}

func TestParseCT2(t *testing.T) {
	good := ct2File([]ct2Var{
		{"encoder/num_heads", nil, CT2Int16, []byte{6, 0}},
		{"w", []int{2, 3}, CT2Float16, make([]byte, 12)},
		{"f", []int{2}, CT2Float32, []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0x40}},
	}, [][2]string{{"alias/w", "w"}})
	m, err := ParseCT2(good)
	if err != nil {
		t.Fatal(err)
	}
	if m.Version != 6 || m.Spec != "WhisperSpec" || m.Revision != 3 || len(m.Vars) != 3 {
		t.Fatalf("%+v", m)
	}
	if n, err := m.Vars["encoder/num_heads"].Scalar(); err != nil || n != 6 {
		t.Fatalf("num_heads %d %v", n, err)
	}
	if v, ok := m.Var("alias/w"); !ok || v.Name != "w" {
		t.Fatal("alias/w does not resolve to w")
	}
	if f, err := m.Vars["f"].floats(); err != nil || f[0] != 1 || f[1] != 2 {
		t.Fatalf("floats %v %v", f, err)
	}
	for _, tc := range []struct {
		name string
		b    []byte
		msg  string
	}{
		{"empty", nil, "truncated binary version"},
		{"version", []byte{9, 0, 0, 0}, "binary version 9 is not supported"},
		{"truncated", good[:len(good)-9], "truncated"},
		{"trailing", append(append([]byte(nil), good...), 1), "1 bytes after the last record"},
		{"byte count", ct2File([]ct2Var{{"w", []int{2}, CT2Float32, make([]byte, 4)}}, nil), `holds 4 bytes, want 8`},
		{"dtype", ct2File([]ct2Var{{"w", []int{1}, CT2Dtype(9), make([]byte, 4)}}, nil), "unknown dtype 9"},
		{"alias", ct2File(nil, [][2]string{{"a", "nothing"}}), `alias "a" names no variable`},
		{"duplicate", ct2File([]ct2Var{{"w", nil, CT2Int8, []byte{1}}, {"w", nil, CT2Int8, []byte{1}}}, nil), "appears twice"},
		{"huge shape", ct2File([]ct2Var{{"w", []int{1 << 30, 1 << 30}, CT2Float32, nil}}, nil), "larger than the file"},
	} {
		_, err := ParseCT2(tc.b)
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.msg)
		}
	}
}

// FuzzParseCT2: any bytes parse or fail with an error, never panic, and
// every variable's data lies inside the input.
func FuzzParseCT2(f *testing.F) {
	f.Add(ct2File([]ct2Var{{"encoder/num_heads", nil, CT2Int16, []byte{6, 0}}, {"w", []int{2, 3}, CT2Float16, make([]byte, 12)}}, [][2]string{{"a", "w"}}))
	f.Add(ct2File(nil, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseCT2(b)
		if err != nil {
			return
		}
		for _, v := range m.Vars {
			n := v.Dtype.Size()
			for _, d := range v.shape() {
				n *= d
			}
			if n != len(v.Data) || len(v.Data) > len(b) {
				t.Fatalf("%s: %d bytes for shape %v %s", v.Name, len(v.Data), v.Shape, v.Dtype)
			}
			if len(v.Shape) == 0 {
				v.Scalar()
			}
		}
	})
}

func (v *CT2Var) shape() []int { return v.Shape }

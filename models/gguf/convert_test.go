package gguf

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/internal/testenv"
)

// genQuants runs testdata/gen_quants.py into a temporary directory.
func genQuants(t *testing.T) string {
	t.Helper()
	py := testenv.Python(t)
	dir := t.TempDir()
	if out, err := exec.Command(py, "testdata/gen_quants.py", dir).CombinedOutput(); err != nil {
		testenv.Missing(t, "gguf-py and mlx in .venv ("+err.Error()+": "+lastLine(out)+")", "make venv (gguf==0.19.0)")
	}
	return dir
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

func openT(t *testing.T, path string) *File {
	t.Helper()
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func load(t *testing.T, f *File, name string) *Tensor {
	t.Helper()
	x, err := f.Load(name)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func floats(t *testing.T, x *Tensor) []float32 {
	t.Helper()
	v, err := x.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// compareBits reports the first difference between got and want: with
// zeroSign, -0 and +0 count as equal (see convertAffine), else every bit
// must match.
func compareBits(got, want []float32, zeroSign bool) (int, bool) {
	if len(got) != len(want) {
		return -1, false
	}
	for i := range got {
		g, w := math.Float32bits(got[i]), math.Float32bits(want[i])
		if g != w && !(zeroSign && got[i] == 0 && want[i] == 0) {
			return i, false
		}
	}
	return 0, true
}

// TestConvertOracle checks every conversion against gguf-py's dequantize
// (values) and, for the affine types, against mx.load's arrays (bytes).
func TestConvertOracle(t *testing.T) {
	dir := genQuants(t)
	ref := openT(t, filepath.Join(dir, "ref.gguf"))
	for _, file := range []string{"affine.gguf", "kquants.gguf"} {
		f := openT(t, filepath.Join(dir, file))
		for _, ti := range f.Tensors {
			t.Run(ti.Name, func(t *testing.T) {
				x, err := f.Load(ti.Name)
				if ti.Type == Q2_K {
					var ue *UnsupportedTypeError
					if !errors.As(err, &ue) || err.Error() != "unsupported tensor type Q2_K in tensor q2_k" {
						t.Fatalf("Load = %v, want the unsupported-type error", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				want := load(t, ref, "deq/"+ti.Name)
				if !reflect.DeepEqual(x.Shape, want.Shape) {
					t.Errorf("shape %v, gguf-py %v", x.Shape, want.Shape)
				}
				got := floats(t, x)
				// Only the types whose bias is -2^k*d give +0 where ggml gives -0.
				zeroSign := ti.Type == Q4_0 || ti.Type == Q5_0 || ti.Type == Q8_0
				if i, ok := compareBits(got, floats(t, want), zeroSign); !ok {
					t.Fatalf("differs from gguf-py at %d (len %d)", i, len(got))
				}
				checkMLX(t, ref, ti, x)
			})
		}
	}
}

// checkMLX compares the converted bytes with mx.load's for the same tensor.
func checkMLX(t *testing.T, ref *File, ti TensorInfo, x *Tensor) {
	base := strings.TrimSuffix(ti.Name, ".weight")
	mxWeight, ok := ref.Tensor("mx/" + ti.Name)
	if !ok || ti.Type == BF16 { // mx.load has no k-quants; its bf16 comes back as float16
		if x.Quant != nil && strings.HasSuffix(base, "_huge") && x.Quant.ScaleDType != Float32 {
			t.Errorf("scales are %s; a bias overflowing float16 needs float32", x.Quant.ScaleDType)
		}
		return
	}
	if x.Quant == nil {
		if !bytes.Equal(x.Data, ref.Raw(mxWeight)) {
			t.Errorf("bytes differ from mx.load's")
		}
		return
	}
	q := x.Quant
	if !bytes.Equal(q.Weight, ref.Raw(mxWeight)) || !reflect.DeepEqual(q.WeightShape, mxWeight.Shape()) {
		t.Errorf("packed weight differs from mx.load's (shape %v vs %v)", q.WeightShape, mxWeight.Shape())
	}
	mxScales, _ := ref.Tensor("mx/" + base + ".scales")
	mxBiases, _ := ref.Tensor("mx/" + base + ".biases")
	if !reflect.DeepEqual(q.ScaleShape, mxScales.Shape()) {
		t.Errorf("scale shape %v, mx.load %v", q.ScaleShape, mxScales.Shape())
	}
	if strings.HasSuffix(base, "_huge") {
		// mx.load overflows -8d/-128d to -inf in float16; we must not.
		if q.ScaleDType != Float32 {
			t.Errorf("scales are %s; a bias overflowing float16 needs float32", q.ScaleDType)
		}
		if b := halfToFloat32(binary.LittleEndian.Uint16(ref.Raw(mxBiases))); !math.IsInf(float64(b), -1) {
			t.Errorf("mx.load's first bias is %v; the fixture meant to overflow it", b)
		}
		return
	}
	if q.ScaleDType != Float16 || !bytes.Equal(q.Scales, ref.Raw(mxScales)) || !bytes.Equal(q.Biases, ref.Raw(mxBiases)) {
		t.Errorf("%s scales/biases differ from mx.load's float16 ones", q.ScaleDType)
	}
}

// TestSmolLM2Oracle converts every tensor of the real SmolLM2 file and
// compares digests with gguf-py's dequantization and mx.load's arrays.
func TestSmolLM2Oracle(t *testing.T) {
	path := testenv.DataFile(t, smollm2)
	py := testenv.Python(t)
	out, err := exec.Command(py, "testdata/smollm2_digest.py", path).Output()
	if err != nil {
		testenv.Missing(t, "gguf-py and mlx in .venv ("+err.Error()+")", "make venv (gguf==0.19.0)")
	}
	var want map[string]struct {
		Deq string
		MX  map[string]string
	}
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	f := openT(t, path)
	seen := map[GGMLType]int{}
	for _, ti := range f.Tensors {
		w := want[ti.Name]
		x := load(t, f, ti.Name)
		seen[ti.Type]++
		vals := floats(t, x)
		for i := range vals {
			vals[i] += 0 // -0 → +0, as the script does
		}
		if got := digest(float32Bytes(vals)); got != w.Deq {
			t.Errorf("%s (%s): dequantized values differ from gguf-py's", ti.Name, ti.Type)
		}
		parts := map[string][]byte{"weight": x.Data}
		if x.Quant != nil {
			parts = map[string][]byte{"weight": x.Quant.Weight, "scales": x.Quant.Scales, "biases": x.Quant.Biases}
		}
		if len(parts) != len(w.MX) {
			t.Errorf("%s: %d parts, mx.load has %d", ti.Name, len(parts), len(w.MX))
		}
		for p, b := range parts {
			if digest(b) != w.MX[p] {
				t.Errorf("%s: %s bytes differ from mx.load's", ti.Name, p)
			}
		}
	}
	if seen[Q4_1] == 0 || seen[Q8_0] == 0 || seen[F32] == 0 {
		t.Errorf("tensor types seen %v; expected Q4_1, Q8_0 and F32", seen)
	}
}

func digest(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// BenchmarkLoadSmolLM2 measures converting every tensor of the real file
// (model start-up time is spent here).
func BenchmarkLoadSmolLM2(b *testing.B) {
	f, err := Open(testenv.DataFile(b, smollm2))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.SetBytes(int64(len(f.data)))
	for b.Loop() {
		for _, ti := range f.Tensors {
			if _, err := f.Load(ti.Name); err != nil {
				b.Fatal(err)
			}
		}
	}
}

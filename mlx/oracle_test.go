package mlx_test

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/mlx"
)

// oracleArray is an array as testdata/oracle_ops.py writes it: raw bit
// patterns (uint32 for float32, uint16 for half types, values for integers).
type oracleArray struct {
	Dtype string   `json:"dtype"`
	Shape []int    `json:"shape"`
	Bits  []uint64 `json:"bits"`
}

// TestOracleBitExact builds the same op graphs as Python mlx on the same
// libmlx version and inputs, and requires bit-identical results: the
// op-level half of the fidelity contract (DESIGN.md §6, L1), including the
// dtype rules of weak Python scalars.
func TestOracleBitExact(t *testing.T) {
	mlxtest.Need(t)
	py := testenv.Python(t)
	cmd := exec.Command(py, filepath.Join("testdata", "oracle_ops.py"))
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("oracle_ops.py: %v", err)
	}
	var oracle struct {
		Inputs  map[string]oracleArray `json:"inputs"`
		Outputs map[string]oracleArray `json:"outputs"`
	}
	if err := json.Unmarshal(raw, &oracle); err != nil {
		t.Fatalf("cannot parse the oracle's output: %v", err)
	}
	q := mlx.Quant{GroupSize: 64, Bits: 4, Mode: "affine"}
	graphs := map[string]func(in map[string]*mlx.Array) *mlx.Array{}
	bf := func(in map[string]*mlx.Array, k string) *mlx.Array { return mlx.AsType(in[k], mlx.BFloat16) }
	weak := func(v float32, a *mlx.Array) *mlx.Array { return mlx.ScalarLike(v, a) }
	quantized := func(in map[string]*mlx.Array) (w, s, b *mlx.Array) { return mlx.Quantize(bf(in, "w"), q) }
	graphs["matmul_bf16"] = func(in map[string]*mlx.Array) *mlx.Array { return mlx.Matmul(bf(in, "x"), mlx.Transpose(bf(in, "w"))) }
	graphs["addmm_bf16"] = func(in map[string]*mlx.Array) *mlx.Array {
		return mlx.Addmm(bf(in, "g"), bf(in, "x"), mlx.Transpose(mlx.Slice(bf(in, "w"), []int{0, 0}, []int{64, 64})), 0.5, 2)
	}
	graphs["rms_norm_bf16"] = func(in map[string]*mlx.Array) *mlx.Array { return mlx.RMSNorm(bf(in, "x"), bf(in, "g"), 1e-5) }
	graphs["layer_norm_bf16"] = func(in map[string]*mlx.Array) *mlx.Array {
		return mlx.LayerNorm(bf(in, "x"), bf(in, "g"), bf(in, "b"), 1e-5)
	}
	graphs["rope_bf16"] = func(in map[string]*mlx.Array) *mlx.Array { return mlx.RoPE(bf(in, "q"), 16, false, 10000, 1, 3, nil) }
	graphs["rope_dynamic_bf16"] = func(in map[string]*mlx.Array) *mlx.Array {
		return mlx.RoPEDynamic(bf(in, "q"), 16, true, 500000, 0.5, mlx.ScalarInt(9, mlx.Int32), nil)
	}
	graphs["sdpa_causal_bf16"] = func(in map[string]*mlx.Array) *mlx.Array {
		return mlx.ScaledDotProductAttention(bf(in, "q"), bf(in, "k"), bf(in, "v"), 0.25, mlx.MaskCausal, nil, nil)
	}
	graphs["softmax_precise_bf16"] = func(in map[string]*mlx.Array) *mlx.Array { return mlx.Softmax(bf(in, "x"), []int{-1}, true) }
	graphs["silu_bf16"] = func(in map[string]*mlx.Array) *mlx.Array {
		x := bf(in, "x")
		return mlx.Multiply(x, mlx.Sigmoid(x))
	}
	graphs["gelu_f32"] = func(in map[string]*mlx.Array) *mlx.Array {
		x := in["x"]
		inner := mlx.Add(weak(1, x), mlx.Erf(mlx.Divide(x, weak(1.4142135623730951, x))))
		return mlx.Divide(mlx.Multiply(x, inner), weak(2, x))
	}
	graphs["scale_weak_bf16"] = func(in map[string]*mlx.Array) *mlx.Array {
		x := bf(in, "x")
		return mlx.Multiply(x, weak(0.125, x))
	}
	graphs["quantized_w"] = func(in map[string]*mlx.Array) *mlx.Array { w, _, _ := quantized(in); return w }
	graphs["quantized_scales"] = func(in map[string]*mlx.Array) *mlx.Array { _, s, _ := quantized(in); return s }
	graphs["quantized_biases"] = func(in map[string]*mlx.Array) *mlx.Array { _, _, b := quantized(in); return b }
	graphs["qmm_bf16"] = func(in map[string]*mlx.Array) *mlx.Array {
		w, s, b := quantized(in)
		return mlx.QuantizedMatmul(bf(in, "x"), w, s, b, true, q)
	}
	graphs["logsumexp_f32"] = func(in map[string]*mlx.Array) *mlx.Array { return mlx.LogSumExp(in["x"], []int{-1}, false) }
	graphs["argmax_f32"] = func(in map[string]*mlx.Array) *mlx.Array { return mlx.Argmax(in["x"], -1, false) }
	graphs["conv1d_f32"] = func(in map[string]*mlx.Array) *mlx.Array { return mlx.Conv1d(in["audio"], in["cw"], 2, 1, 1, 1) }
	graphs["rfft_abs_f32"] = func(in map[string]*mlx.Array) *mlx.Array { return mlx.Abs(mlx.RFFT(in["sig"], 0, -1)) }
	graphs["astype_bf16"] = func(in map[string]*mlx.Array) *mlx.Array { return mlx.AsType(in["x"], mlx.BFloat16) }
	graphs["astype_f16"] = func(in map[string]*mlx.Array) *mlx.Array {
		return mlx.AsType(mlx.Multiply(in["x"], weak(1000, in["x"])), mlx.Float16)
	}

	names := make([]string, 0, len(oracle.Outputs))
	for name := range oracle.Outputs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		want := oracle.Outputs[name]
		t.Run(name, func(t *testing.T) {
			graph, ok := graphs[name]
			if !ok {
				t.Fatalf("the oracle computes %s, which this test does not build", name)
			}
			mlxtest.Do(t, func() error {
				in := map[string]*mlx.Array{}
				for k, a := range oracle.Inputs {
					f := make([]float32, len(a.Bits))
					for i, b := range a.Bits {
						f[i] = math.Float32frombits(uint32(b))
					}
					in[k] = mlx.FromSlice(f, a.Shape...)
				}
				got := graph(in)
				if err := got.Err(); err != nil {
					return err
				}
				if got.Dtype().String() != want.Dtype || !slices.Equal(got.Shape(), want.Shape) {
					t.Fatalf("got %v, oracle %s %v", got, want.Dtype, want.Shape)
				}
				b, err := got.Bytes()
				if err != nil {
					return err
				}
				size := got.Itemsize()
				diff := 0
				for i, w := range want.Bits {
					var g uint64
					switch size {
					case 1:
						g = uint64(b[i])
					case 2:
						g = uint64(binary.LittleEndian.Uint16(b[2*i:]))
					case 4:
						g = uint64(binary.LittleEndian.Uint32(b[4*i:]))
					default:
						g = binary.LittleEndian.Uint64(b[8*i:])
					}
					if g != w {
						if diff++; diff <= 3 {
							t.Errorf("element %d: bits %#x, oracle %#x", i, g, w)
						}
					}
				}
				if diff > 0 {
					t.Errorf("%d of %d elements differ from Python mlx", diff, len(want.Bits))
				}
				return nil
			})
		})
	}
}

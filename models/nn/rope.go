package nn

import (
	"fmt"
	"math"

	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
)

// RopeScaling is a rope_scaling object: a type name and numeric settings.
type RopeScaling map[string]any

// Type is rope_scaling's "type" or "rope_type" ("default" when absent).
func (r RopeScaling) Type() string {
	if r == nil {
		return "default"
	}
	if t, ok := r["type"].(string); ok && t != "" {
		return t
	}
	if t, ok := r["rope_type"].(string); ok && t != "" {
		return t
	}
	return "default"
}

// Float returns a numeric setting, or def when absent.
func (r RopeScaling) Float(key string, def float64) (float64, error) {
	v, ok := r[key]
	if !ok || v == nil {
		return def, nil
	}
	f, ok := v.(float64)
	if !ok {
		return 0, fmt.Errorf("rope_scaling.%s is %T, want a number", key, v)
	}
	return f, nil
}

// RoPE is nn.RoPE or one of rope_utils' variants with precomputed freqs.
type RoPE struct {
	dims        int
	traditional bool
	base, scale float32
	freqs       *mlx.Array // nil: frequencies from base
	// mscale, when not 1, multiplies the rotated dimensions first (YarnRoPE).
	mscale float64
}

// Apply rotates x [B, H, L, D] whose first position is offset.
func (r *RoPE) Apply(x *mlx.Array, offset int) *mlx.Array {
	return mlx.RoPE(r.prescale(x), r.dims, r.traditional, r.base, r.scale, offset, r.freqs)
}

// prescale is YarnRoPE's x.at[..., :dims].multiply(mscale): the update is
// the Python float as x's dtype, and each element is multiplied once, as a
// scatter_prod does it.
func (r *RoPE) prescale(x *mlx.Array) *mlx.Array {
	if r.mscale == 0 || r.mscale == 1 {
		return x
	}
	s := mlx.Scalar(float32(r.mscale), x.Dtype())
	sh := x.Shape()
	if sh[len(sh)-1] == r.dims {
		return mlx.Multiply(x, s)
	}
	start, stop := make([]int, len(sh)), append([]int(nil), sh...)
	stop[len(sh)-1] = r.dims
	return mlx.SliceUpdate(x, mlx.Multiply(mlx.Slice(x, start, stop), s), start, stop)
}

// Spec implements kv.Rotary: the rotation as mlx.CacheWrite and CacheAttend take it,
// except YarnRoPE's, whose prescale is an op of its own.
func (r *RoPE) Spec() (mlx.RopeSpec, bool) {
	if r.mscale != 0 && r.mscale != 1 {
		return mlx.RopeSpec{}, false
	}
	return mlx.RopeSpec{Dims: r.dims, Traditional: r.traditional, Base: r.base, Scale: r.scale, Freqs: r.freqs}, true
}

// At rotates x [B, H, L, D] at a cache's position (kv.PositionOf): one
// offset, or each row at its own.
func (r *RoPE) At(x *mlx.Array, p kv.Position) *mlx.Array {
	if p.Rows != nil {
		return r.ApplyRows(x, p.Rows)
	}
	return r.Apply(x, p.Offset)
}

// ApplyRows is Apply on x [B, H, L, D] with row b at offsets[b] (int32 [B]):
// one node for a decode batch's rows, each computed as Apply computes it
// alone (positions (t + offset) * scale in float32 either way).
func (r *RoPE) ApplyRows(x, offsets *mlx.Array) *mlx.Array {
	return mlx.RoPEDynamic(r.prescale(x), r.dims, r.traditional, r.base, r.scale, offsets, r.freqs)
}

// NewRoPE is rope_utils.initialize_rope for the types whose result does not
// depend on the sequence: default, linear, llama3 and yarn.
func NewRoPE(ws *Weights, dims int, base float64, traditional bool, scaling RopeScaling) (*RoPE, error) {
	switch t := scaling.Type(); t {
	case "default", "linear":
		scale := 1.0
		if t == "linear" {
			f, err := scaling.Float("factor", math.NaN())
			if err != nil || math.IsNaN(f) || f == 0 {
				return nil, fmt.Errorf("linear rope_scaling needs a non-zero factor")
			}
			scale = 1 / f
		}
		return &RoPE{dims: dims, traditional: traditional, base: float32(base), scale: float32(scale)}, nil
	case "llama3":
		freqs, err := llama3Freqs(dims, base, scaling)
		if err != nil {
			return nil, err
		}
		return &RoPE{dims: dims, traditional: traditional, scale: 1, freqs: ws.Keep(freqs)}, nil
	case "yarn", "deepseek_yarn", "telechat3-yarn":
		freqs, mscale, err := yarnFreqs(dims, base, scaling)
		if err != nil {
			return nil, err
		}
		return &RoPE{dims: dims, traditional: traditional, scale: 1, freqs: ws.Keep(freqs), mscale: mscale}, nil
	case "proportional":
		freqs, err := proportionalFreqs(dims, base, scaling)
		if err != nil {
			return nil, err
		}
		return &RoPE{dims: dims, traditional: traditional, scale: 1, freqs: ws.Keep(freqs)}, nil
	default:
		return nil, fmt.Errorf("rope_scaling type %q is not supported (default, linear, llama3, yarn, proportional)", t)
	}
}

// llama3Freqs is Llama3RoPE's frequency table, computed with MLX ops in
// rope_utils' order so the float32 results are the same bits.
func llama3Freqs(dims int, base float64, sc RopeScaling) (*mlx.Array, error) {
	factor, err1 := sc.Float("factor", math.NaN())
	low, err2 := sc.Float("low_freq_factor", 1)
	high, err3 := sc.Float("high_freq_factor", 4)
	old, err4 := sc.Float("original_max_position_embeddings", 8192)
	for _, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			return nil, err
		}
	}
	if math.IsNaN(factor) || factor == 0 || high == low || low == 0 || high == 0 {
		return nil, fmt.Errorf("llama3 rope_scaling needs factor != 0 and low_freq_factor != high_freq_factor")
	}
	lowWavelen := old / low
	highWavelen := old / high
	f32 := func(v float64) *mlx.Array { return mlx.Scalar(float32(v), mlx.Float32) }

	// freqs = base ** (arange(0, dims, 2) / dims)
	exps := mlx.Divide(mlx.Arange(0, float64(dims), 2, mlx.Int32), mlx.ScalarInt(int64(dims), mlx.Int32))
	freqs := mlx.Power(f32(base), exps)
	wavelens := mlx.Multiply(f32(2*math.Pi), freqs)
	freqs = mlx.Where(mlx.Greater(wavelens, f32(lowWavelen)), mlx.Multiply(freqs, f32(factor)), freqs)
	isMedium := mlx.LogicalAnd(mlx.Greater(wavelens, f32(highWavelen)), mlx.Less(wavelens, f32(lowWavelen)))
	smooth := mlx.Divide(mlx.Subtract(mlx.Divide(f32(old), wavelens), f32(low)), f32(high-low))
	smoothFreqs := mlx.Divide(freqs, mlx.Add(mlx.Divide(mlx.Subtract(f32(1), smooth), f32(factor)), smooth))
	out := mlx.Where(isMedium, smoothFreqs, freqs)
	return out, mlx.Eval(out)
}

// proportionalFreqs is ProportionalRoPE's frequency table (gemma4's global
// layers): factor * base ** (arange(0, rotated, 2) / dims) for the first
// rotated = int(dims * partial_rotary_factor) dimensions, infinity (no
// rotation) for the rest, in float32 as rope_utils computes it.
func proportionalFreqs(dims int, base float64, sc RopeScaling) (*mlx.Array, error) {
	partial, err1 := sc.Float("partial_rotary_factor", 1)
	factor, err2 := sc.Float("factor", 1)
	for _, err := range []error{err1, err2} {
		if err != nil {
			return nil, err
		}
	}
	rotated := int(float64(dims) * partial)
	if rotated > dims || rotated < 0 || dims < 2 {
		return nil, fmt.Errorf("proportional rope: rotated dims %d for head dim %d", rotated, dims)
	}
	f32 := func(v float64) *mlx.Array { return mlx.Scalar(float32(v), mlx.Float32) }
	exps := mlx.Divide(mlx.Arange(0, float64(rotated), 2, mlx.Float32), f32(float64(dims)))
	parts := []*mlx.Array{mlx.Multiply(f32(factor), mlx.Power(f32(base), exps))}
	if rest := (dims - rotated) / 2; rest > 0 {
		parts = append(parts, mlx.Full([]int{rest}, mlx.Scalar(float32(math.Inf(1)), mlx.Float32), mlx.Float32))
	}
	out := mlx.Concatenate(parts, 0)
	return out, mlx.Eval(out)
}

// yarnFreqs is YarnRoPE's frequency table and input scale, the table
// computed with MLX ops in rope_utils' order (float32), the scale in float64
// as Python computes it.
func yarnFreqs(dims int, base float64, sc RopeScaling) (*mlx.Array, float64, error) {
	factor, err1 := sc.Float("factor", math.NaN())
	old, err2 := sc.Float("original_max_position_embeddings", 4096)
	fast, err3 := sc.Float("beta_fast", 32)
	slow, err4 := sc.Float("beta_slow", 1)
	ms, err5 := sc.Float("mscale", 1)
	msAll, err6 := sc.Float("mscale_all_dim", 0)
	for _, err := range []error{err1, err2, err3, err4, err5, err6} {
		if err != nil {
			return nil, 0, err
		}
	}
	if math.IsNaN(factor) || base <= 0 || base == 1 || dims < 2 {
		return nil, 0, fmt.Errorf("yarn rope_scaling needs a factor and a rope base > 0, != 1")
	}
	correction := func(rotations float64) float64 {
		return float64(dims) * math.Log(old/(rotations*2*math.Pi)) / (2 * math.Log(base))
	}
	low := max(math.Floor(correction(fast)), 0)
	high := min(math.Ceil(correction(slow)), float64(dims-1))
	getMscale := func(scale, m float64) float64 {
		if scale <= 1 {
			return 1
		}
		return 0.1*m*math.Log(scale) + 1
	}
	mscale := getMscale(factor, ms) / getMscale(factor, msAll)
	f32 := func(v float64) *mlx.Array { return mlx.Scalar(float32(v), mlx.Float32) }

	// freq_extra = base ** (arange(0, dims, 2) / dims); freq_inter = factor * freq_extra
	extra := mlx.Power(f32(base), mlx.Divide(mlx.Arange(0, float64(dims), 2, mlx.Float32), f32(float64(dims))))
	inter := mlx.Multiply(extra, f32(factor))
	// yarn_linear_ramp_mask(low, high, dims // 2)
	lo, hi := low, high
	if lo == hi {
		hi += 0.001
	}
	ramp := mlx.Divide(mlx.Subtract(mlx.Arange(0, float64(dims/2), 1, mlx.Float32), f32(lo)), f32(hi-lo))
	ramp = mlx.Clip(ramp, f32(0), f32(1))
	mask := mlx.Subtract(f32(1), ramp)
	out := mlx.Divide(mlx.Multiply(inter, extra),
		mlx.Add(mlx.Multiply(inter, mask), mlx.Multiply(extra, mlx.Subtract(f32(1), mask))))
	return out, mscale, mlx.Eval(out)
}

// NewSuScaledRoPE is rope_utils.SuScaledRoPE (phi3's longrope): the
// frequencies long_factor * base ** (arange(0, dims, 2) / dims) in float32,
// and the first dims of the input scaled by sqrt(1 + log(factor) /
// log(original)) when factor = max / original > 1. short_factor is unused,
// as in mlx-lm.
func NewSuScaledRoPE(ws *Weights, dims int, base float64, maxPos, origMax int, longFactor []float64) (*RoPE, error) {
	if dims < 2 || base <= 0 || maxPos <= 0 || origMax <= 1 {
		return nil, fmt.Errorf("longrope needs rotary dims >= 2, rope_theta > 0, max_position_embeddings > 0 and original_max_position_embeddings > 1")
	}
	if n := len(longFactor); n != 1 && n != dims/2 {
		return nil, fmt.Errorf("rope_scaling.long_factor has %d entries, want 1 or %d", n, dims/2)
	}
	f32 := func(v float64) *mlx.Array { return mlx.Scalar(float32(v), mlx.Float32) }
	lf := make([]float32, len(longFactor))
	for i, v := range longFactor {
		lf[i] = float32(v)
	}
	var long *mlx.Array
	if len(lf) == 1 {
		long = mlx.Scalar(lf[0], mlx.Float32)
	} else {
		long = mlx.FromSlice(lf, len(lf))
	}
	freqs := mlx.Power(f32(base), mlx.Divide(mlx.Arange(0, float64(dims), 2, mlx.Float32), f32(float64(dims))))
	freqs = mlx.Multiply(long, freqs)
	if err := mlx.Eval(freqs); err != nil {
		return nil, err
	}
	scale := 1.0
	if factor := float64(maxPos) / float64(origMax); factor > 1 {
		scale = math.Sqrt(1 + math.Log(factor)/math.Log(float64(origMax)))
	}
	return &RoPE{dims: dims, scale: 1, freqs: ws.Keep(freqs), mscale: scale}, nil
}

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
}

// Apply rotates x [B, H, L, D] whose first position is offset.
func (r *RoPE) Apply(x *mlx.Array, offset int) *mlx.Array {
	return mlx.RoPE(x, r.dims, r.traditional, r.base, r.scale, offset, r.freqs)
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
	return mlx.RoPEDynamic(x, r.dims, r.traditional, r.base, r.scale, offsets, r.freqs)
}

// NewRoPE is rope_utils.initialize_rope for the types whose result does not
// depend on the sequence: default, linear and llama3.
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
	default:
		return nil, fmt.Errorf("rope_scaling type %q is not supported (default, linear, llama3)", t)
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

package server

import (
	"testing"

	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/models"
)

// schemeModel is a stubModel with the caches and info of an architecture.
type schemeModel struct {
	stubModel
	info   models.Info
	caches func() []kv.Cache
}

func (m schemeModel) Info() models.Info               { return m.info }
func (m schemeModel) NewCaches(kv.Options) []kv.Cache { return m.caches() }

// TestSchemes: x_mlxgo's weight and KV schemes say what runs: Gemma 3's
// sliding-window layers are rotating caches, unquantized weights name their
// dtype.
func TestSchemes(t *testing.T) {
	gemma := func() []kv.Cache {
		var out []kv.Cache
		for i := range 6 {
			if i%3 == 2 {
				out = append(out, kv.NewKVCache())
			} else {
				out = append(out, kv.NewRotating(512, 0))
			}
		}
		return out
	}
	growing := func() []kv.Cache { return []kv.Cache{kv.NewKVCache(), kv.NewKVCache()} }
	for _, tc := range []struct {
		name         string
		m            schemeModel
		weight, kvSc string
	}{
		{"gemma3 sliding window", schemeModel{info: models.Info{ModelType: "gemma3_text", Dtype: "bfloat16", Quantization: "none", Format: "safetensors"}, caches: gemma},
			"gemma3_text bfloat16 weights, not quantized (safetensors)",
			"bfloat16, not quantized; 6 layers: 2 growing, 4 rotating (sliding window of 512 tokens)"},
		{"qwen3 unquantized", schemeModel{info: models.Info{ModelType: "qwen3", Dtype: "float32", Quantization: "none", Format: "safetensors"}, caches: growing},
			"qwen3 float32 weights, not quantized (safetensors)", "float32, not quantized"},
		{"llama quantized", schemeModel{info: models.Info{ModelType: "llama", Dtype: "float16", Quantization: "affine 4-bit g32", Format: "gguf"}, caches: growing},
			"llama affine 4-bit g32, float16 activations (gguf)", "float16, not quantized"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewMLXModel(tc.m, testTokenizer(t), "m", "test", 0).Composition
			if c.WeightScheme != tc.weight || c.KVScheme != tc.kvSc {
				t.Errorf("weight scheme %q, KV scheme %q\nwant %q, %q", c.WeightScheme, c.KVScheme, tc.weight, tc.kvSc)
			}
		})
	}
}

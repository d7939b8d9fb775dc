// Package bert is the BERT encoder (Hugging Face BertModel, post-layer-norm,
// absolute positions, exact GELU) on MLX, as sentence-transformers models such
// as all-MiniLM-L6-v2 use it. It returns the last hidden state; pooling and
// normalization belong to the embedding pipeline (models/embed).
//
// Everything that touches MLX runs on the executor (inside mlx.Do). Weights
// are detached from scopes and freed by Close. It must never guess at a
// checkpoint it does not understand: an unknown tensor or setting is an error.
package bert

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models/nn"
	"github.com/mlxgo/mlxgo/models/safetensors"
)

// Config is the part of a BERT config.json the encoder reads.
type Config struct {
	ModelType             string  `json:"model_type"`
	HiddenSize            int     `json:"hidden_size"`
	NumHiddenLayers       int     `json:"num_hidden_layers"`
	NumAttentionHeads     int     `json:"num_attention_heads"`
	IntermediateSize      int     `json:"intermediate_size"`
	MaxPositionEmbeddings int     `json:"max_position_embeddings"`
	TypeVocabSize         int     `json:"type_vocab_size"`
	VocabSize             int     `json:"vocab_size"`
	LayerNormEps          float64 `json:"layer_norm_eps"`
	HiddenAct             string  `json:"hidden_act"`
	PositionEmbeddingType string  `json:"position_embedding_type"`
}

// ParseConfig decodes and checks a BERT config.json.
func ParseConfig(data []byte) (*Config, error) {
	c := &Config{LayerNormEps: 1e-12, HiddenAct: "gelu", PositionEmbeddingType: "absolute", TypeVocabSize: 2}
	if err := json.Unmarshal(data, c); err != nil {
		return nil, fmt.Errorf("cannot parse config.json: %w", err)
	}
	switch {
	case c.ModelType != "bert":
		return nil, fmt.Errorf("model_type %q is not bert", c.ModelType)
	case c.HiddenSize <= 0 || c.NumHiddenLayers <= 0 || c.NumAttentionHeads <= 0 || c.IntermediateSize <= 0:
		return nil, fmt.Errorf("hidden_size, num_hidden_layers, num_attention_heads and intermediate_size must be positive")
	case c.HiddenSize%c.NumAttentionHeads != 0:
		return nil, fmt.Errorf("hidden_size %d is not a multiple of num_attention_heads %d", c.HiddenSize, c.NumAttentionHeads)
	case c.MaxPositionEmbeddings <= 0 || c.VocabSize <= 0 || c.TypeVocabSize <= 0:
		return nil, fmt.Errorf("max_position_embeddings, vocab_size and type_vocab_size must be positive")
	case c.HiddenAct != "gelu":
		// gelu_new and friends would change every vector; refuse rather than approximate.
		return nil, fmt.Errorf("hidden_act %q is not supported (gelu)", c.HiddenAct)
	case c.PositionEmbeddingType != "absolute":
		return nil, fmt.Errorf("position_embedding_type %q is not supported (absolute)", c.PositionEmbeddingType)
	case !(c.LayerNormEps > 0) || math.IsInf(c.LayerNormEps, 0):
		return nil, fmt.Errorf("layer_norm_eps %v must be a positive number", c.LayerNormEps)
	}
	return c, nil
}

// dense is a torch Linear; wT is its weight transposed once at load to
// [in, out] and made contiguous: MLX's CPU matmul runs about twice as fast on
// it as on a transposed view.
type dense struct{ wT, b *mlx.Array }

func (d dense) apply(x *mlx.Array) *mlx.Array {
	return mlx.Addmm(d.b, x, d.wT, 1, 1)
}

type norm struct{ w, b *mlx.Array }

type layer struct {
	q, k, v, attnOut  dense
	attnNorm          norm
	intermediate, out dense
	outNorm           norm
}

// Model is a loaded BERT encoder.
type Model struct {
	cfg                Config
	word, pos, tokType *mlx.Array
	embNorm            norm
	layers             []layer
	eps                float32
	w                  *nn.Weights // the one loader's arrays, freed by Close
}

// Config returns the model's configuration.
func (m *Model) Config() Config { return m.cfg }

// Load reads config.json and the safetensors weights in dir. Call it inside
// mlx.Do. Names may carry the "bert." prefix of BertForX checkpoints.
func Load(dir string) (*Model, error) {
	data, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, fmt.Errorf("cannot read bert config: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "config.json"), err)
	}
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot open bert weights: %w", err)
	}
	// MLX copies the bytes, so the mapping can go once the model is built.
	defer set.Close()
	m := &Model{cfg: *cfg, eps: float32(cfg.LayerNormEps), w: nn.NewWeights(nn.Safetensors(set), nil)}
	if err := m.build(m.w); err != nil {
		m.Close()
		return nil, fmt.Errorf("cannot load bert model from %s: %w", dir, err)
	}
	return m, nil
}

// get takes a weight as float32 (activations run in float32 whatever the
// storage: the reference does), evaluated so the stored one can go.
func get(w *nn.Weights, name string, shape ...int) *mlx.Array {
	a := w.Get(name, shape...)
	if a == nil || a.Dtype() == mlx.Float32 {
		return a
	}
	if a.Dtype() != mlx.Float16 && a.Dtype() != mlx.BFloat16 {
		w.Fail(fmt.Errorf("weight %s has dtype %s, want F32, F16 or BF16", name, a.Dtype()))
		return nil
	}
	f := w.Keep(mlx.AsType(a, mlx.Float32))
	if err := mlx.Eval(f); err != nil {
		w.Fail(fmt.Errorf("cannot load weight %s: %w", name, err))
		return nil
	}
	w.Release(a)
	return f
}

func linear(w *nn.Weights, p string, in, out int) dense {
	wt := get(w, p+".weight", out, in)
	if w.Err() != nil {
		return dense{}
	}
	wT := w.Keep(mlx.Contiguous(mlx.Transpose(wt)))
	if err := mlx.Eval(wT); err != nil {
		w.Fail(fmt.Errorf("cannot transpose weight %s: %w", p, err))
		return dense{}
	}
	// Only the transposed copy is used: free the original now rather than
	// keep the layer's weights twice.
	w.Release(wt)
	return dense{wT: wT, b: get(w, p+".bias", out)}
}

func layerNorm(w *nn.Weights, p string, dims int) norm {
	return norm{w: get(w, p+".weight", dims), b: get(w, p+".bias", dims)}
}

func (m *Model) build(w *nn.Weights) error {
	w.Rename(func(n string) string { return strings.TrimPrefix(n, "bert.") })
	// The pooler (BertModel's CLS head) and the position_ids buffer are not
	// part of the sentence-transformers Transformer output; anything else
	// unused means a layout we do not understand.
	w.Drop(func(n string) bool { return n == "embeddings.position_ids" || strings.HasPrefix(n, "pooler.") })
	c, h := m.cfg, m.cfg.HiddenSize
	s := mlx.NewScope()
	defer s.Close()
	m.word = get(w, "embeddings.word_embeddings.weight", c.VocabSize, h)
	m.pos = get(w, "embeddings.position_embeddings.weight", c.MaxPositionEmbeddings, h)
	m.tokType = get(w, "embeddings.token_type_embeddings.weight", c.TypeVocabSize, h)
	m.embNorm = layerNorm(w, "embeddings.LayerNorm", h)
	m.layers = make([]layer, c.NumHiddenLayers)
	for i := range m.layers {
		p := fmt.Sprintf("encoder.layer.%d.", i)
		m.layers[i] = layer{
			q:            linear(w, p+"attention.self.query", h, h),
			k:            linear(w, p+"attention.self.key", h, h),
			v:            linear(w, p+"attention.self.value", h, h),
			attnOut:      linear(w, p+"attention.output.dense", h, h),
			attnNorm:     layerNorm(w, p+"attention.output.LayerNorm", h),
			intermediate: linear(w, p+"intermediate.dense", h, c.IntermediateSize),
			out:          linear(w, p+"output.dense", c.IntermediateSize, h),
			outNorm:      layerNorm(w, p+"output.LayerNorm", h),
		}
	}
	return w.Finish()
}

// Close frees the weights (call inside mlx.Do).
func (m *Model) Close() { m.w.Free() }

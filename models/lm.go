package models

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models/gemma3"
	"github.com/mlxgo/mlxgo/models/gemma4"
	"github.com/mlxgo/mlxgo/models/gpt_oss"
	"github.com/mlxgo/mlxgo/models/llama"
	"github.com/mlxgo/mlxgo/models/minicpm"
	"github.com/mlxgo/mlxgo/models/ministral3"
	"github.com/mlxgo/mlxgo/models/mistral3"
	"github.com/mlxgo/mlxgo/models/nn"
	"github.com/mlxgo/mlxgo/models/phi3"
	"github.com/mlxgo/mlxgo/models/qwen2"
	"github.com/mlxgo/mlxgo/models/qwen3"
	"github.com/mlxgo/mlxgo/models/qwen3_5"
	"github.com/mlxgo/mlxgo/models/qwen3_moe"
	"github.com/mlxgo/mlxgo/models/qwen3_next"
)

// architectures maps config.json's model_type to the package building it.
var architectures = map[string]nn.Builder{
	"llama":       llama.New,
	"minicpm":     minicpm.New,
	"ministral3":  ministral3.New,
	"mistral3":    mistral3.New,
	"qwen2":       qwen2.New,
	"qwen3":       qwen3.New,
	"gemma3":      gemma3.NewVLM,
	"gemma3_text": gemma3.New,
	"gemma4":      gemma4.NewVLM,
	"gemma4_text": gemma4.New,
	"gpt_oss":     gpt_oss.New,
	"phi3":        phi3.New,
	"qwen3_moe":   qwen3_moe.New,
	"qwen3_next":  qwen3_next.New,
	"qwen3_5":     qwen3_5.New,
	"qwen3_5_moe": qwen3_5.NewMoE,
}

// ggufArchs maps a GGUF file's general.architecture (llama.cpp's name) to
// its architecture package's reading of it (nn.GGUF); the model_type it
// names is built by architectures above.
var ggufArchs = map[string]nn.GGUF{
	"gemma3":  gemma3.GGUF,
	"llama":   llama.GGUF,
	"minicpm": minicpm.GGUF,
	"phi3":    phi3.GGUF,
	"qwen2":   qwen2.GGUF,
	"qwen3":   qwen3.GGUF,
	// llama.cpp's names: no underscore
	"qwen3moe": qwen3_moe.GGUF,
}

// textConfigs maps the model_type of a multimodal wrapper to its language
// model's config.json (text_config as the wrapper's ModelArgs completes
// it), which ParseConfig reads the sizes from.
var textConfigs = map[string]func(config []byte) ([]byte, error){
	"gemma3":   gemma3.TextConfig,
	"gemma4":   gemma4.TextConfig,
	"mistral3": mistral3.TextConfig,
	// qwen3_5 and qwen3_5_moe: text_config with TextModelArgs' defaults
	"qwen3_5":     qwen3_5.TextConfig,
	"qwen3_5_moe": qwen3_5.TextConfig,
}

// Supported lists the model types Load accepts.
func Supported() []string {
	out := make([]string, 0, len(architectures))
	for k := range architectures {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ErrUnsupportedModel is wrapped by Load's error for an unknown model_type.
var ErrUnsupportedModel = errors.New("unsupported model type")

func unsupported(modelType string) error {
	return fmt.Errorf("%w %q: supported model types are %s", ErrUnsupportedModel, modelType, strings.Join(Supported(), ", "))
}

// build is the one way every format becomes a Model: the architecture's
// package reads config (its own ModelArgs) and takes its weights from w;
// cfg, the header every decoder's config.json shares, describes it.
func build(cfg *Config, config []byte, w *nn.Weights) (*lm, error) {
	arch, err := architectures[cfg.ModelType](config, w)
	if err != nil {
		w.Free()
		return nil, err
	}
	f := arch.Facts()
	caches := f.Layers
	if f.Caches > 0 {
		caches = f.Caches
	}
	return &lm{arch: arch, w: w, layers: caches, info: Info{
		ModelType:     cfg.ModelType,
		VocabSize:     cfg.VocabSize,
		ContextLength: f.ContextLength,
		NumLayers:     f.Layers,
		EOS:           append([]int(nil), cfg.EOSTokenID...),
		Dtype:         f.Dtype,
		Quantization:  cfg.Quantization.String(),
	}}, nil
}

// RowModel is a Model that can run one decode step for several independent
// sequences at once (the rows of a continuous batch), each with its own
// caches at its own offset. Every architecture Load returns implements it.
type RowModel interface {
	Model
	// ForwardRows runs tokens [B, 1] (int32), row r's token with rows[r],
	// that row's per-layer caches (as NewCaches makes them), and returns the
	// logits [B, 1, vocab]. Row r's logits are bit-identical to
	// Forward(tokens[r:r+1], rows[r]). Errors come back as error arrays.
	ForwardRows(tokens *mlx.Array, rows [][]kv.Cache) *mlx.Array
}

// DecoderModel is what Load returns: a RowModel around its architecture's
// own model, whose Forward gives the final hidden states (what decoder
// embedding models such as Qwen3-Embedding pool).
type DecoderModel interface {
	RowModel
	Decoder() nn.Decoder
}

// lm is every architecture's Model: the checks, the scope and the unembed
// around its Decoder, and the decode batch's rows as kv.Rows caches.
type lm struct {
	arch   nn.Decoder
	w      *nn.Weights
	info   Info
	layers int // caches per sequence: one per layer but for KV-shared layers
}

func (m *lm) Decoder() nn.Decoder                  { return m.arch }
func (m *lm) NewCaches(opts kv.Options) []kv.Cache { return m.arch.NewCaches(opts) }
func (m *lm) Info() Info                           { return m.info }

func (m *lm) Close() error {
	m.w.Free()
	return nil
}

// Forward implements Model.
func (m *lm) Forward(tokens *mlx.Array, caches []kv.Cache) *mlx.Array {
	if err := tokens.Err(); err != nil {
		return tokens
	}
	if tokens.Ndim() != 2 {
		return mlx.ErrorArray(fmt.Errorf("cannot run the model: token ids of shape %v, want [batch, length]", tokens.Shape()))
	}
	if caches != nil && len(caches) != m.layers {
		return mlx.ErrorArray(fmt.Errorf("cannot run the model: %d caches for %d layers", len(caches), m.layers))
	}
	return m.logits(tokens, caches)
}

// logits keeps only the logits: handles on intermediate activations would
// keep MLX from freeing them while the logits are evaluated (peak memory).
func (m *lm) logits(tokens *mlx.Array, caches []kv.Cache) *mlx.Array {
	s := mlx.NewScope()
	defer s.Close()
	out := m.arch.Unembed(m.arch.Forward(tokens, caches))
	s.Keep(out)
	return out
}

// ForwardRows implements RowModel: one forward pass over the [B, 1] batch
// whose caches are kv.Rows, so that everything that treats tokens
// independently (embedding, projections, norms, MLP, lm head) runs once for
// all rows (on MLX's CPU backend each row of a matmul, quantized matmul or
// norm is accumulated in the same order as a one-row call: rows_test.go
// checks it) and attention fans out to each row's caches.
func (m *lm) ForwardRows(tokens *mlx.Array, rows [][]kv.Cache) *mlx.Array {
	if err := tokens.Err(); err != nil {
		return tokens
	}
	if tokens.Ndim() != 2 || tokens.Dim(1) != 1 {
		return mlx.ErrorArray(fmt.Errorf("cannot run the model on rows: token ids of shape %v, want [rows, 1]", tokens.Shape()))
	}
	if len(rows) != tokens.Dim(0) {
		return mlx.ErrorArray(fmt.Errorf("cannot run the model on rows: %d rows of caches for %d tokens", len(rows), tokens.Dim(0)))
	}
	for r, caches := range rows {
		if len(caches) != m.layers {
			return mlx.ErrorArray(fmt.Errorf("cannot run the model on rows: row %d has %d caches for %d layers", r, len(caches), m.layers))
		}
		for i, c := range caches {
			if c == nil {
				return mlx.ErrorArray(fmt.Errorf("cannot run the model on rows: row %d has no cache for layer %d", r, i))
			}
		}
	}
	if len(rows) == 1 {
		return m.logits(tokens, rows[0])
	}
	layers := make([]kv.Cache, m.layers)
	for i := range layers {
		layers[i] = kv.NewRows(rows, i)
	}
	return m.logits(tokens, layers)
}

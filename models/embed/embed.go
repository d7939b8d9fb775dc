// Package embed turns texts (or token id lists) into sentence embeddings:
// tokenize, run an encoder (BERT, models/bert) or a decoder without its
// output head (qwen3: its architecture's Forward, models.DecoderModel), pool as the model's
// sentence-transformers modules say, and L2-normalize. One call, Embed, serves
// both the CLI and a server's /v1/embeddings.
//
// Inputs are sorted by length and batched, so padding stays small; padding
// never changes a vector beyond float rounding (masked attention for BERT;
// right padding under a causal mask for decoders). It must never cut an
// input silently: an input over the maximum length is a TooLongError unless
// the caller asks for truncation.
package embed

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
	"github.com/mlxgo/mlxgo/models/bert"
	"github.com/mlxgo/mlxgo/tok"
)

// Input is one text or one list of token ids (used as given: no special
// tokens are added).
type Input struct {
	Text string
	IDs  []int32
}

// Options tune one Embed call.
type Options struct {
	BatchSize int // inputs per forward pass; <= 0 means 32
	// NoNormalize returns the pooled vectors without L2 normalization even
	// when the pipeline has a Normalize module (one without it never
	// normalizes, as sentence-transformers runs it).
	NoNormalize bool
	// Truncate cuts inputs to the maximum length instead of failing.
	Truncate bool
	// Instruction, when set, prefixes each text as Qwen3-Embedding's model
	// card does for queries: "Instruct: {instruction}\nQuery:{text}".
	Instruction string
}

// Result is the vectors in input order and the tokens consumed (usage).
type Result struct {
	Embeddings [][]float32
	Tokens     int
}

// TooLongError is an input over the model's maximum length.
type TooLongError struct {
	Index, Tokens, Max int
}

func (e *TooLongError) Error() string {
	return fmt.Sprintf("input %d has %d tokens, more than the model's maximum of %d", e.Index, e.Tokens, e.Max)
}

// ErrEmptyInput is an input with no text and no ids.
var ErrEmptyInput = errors.New("empty input")

// encoder is the network part: ids [B, L] and a validity mask [B, L] in,
// token vectors [B, L, H] out (inside mlx.Do).
type encoder interface {
	hidden(ids, mask *mlx.Array) *mlx.Array
	close()
}

type bertEncoder struct{ m *bert.Model }

func (b bertEncoder) hidden(ids, mask *mlx.Array) *mlx.Array { return b.m.Forward(ids, mask) }
func (b bertEncoder) close()                                 { b.m.Close() }

// decoderEncoder pads on the right: under the causal mask no real token sees
// a pad, and positions start at 0 as they do for the input alone.
// Its hidden states are the architecture's final normalized ones with no
// cache (causal mask): mlx-lm's model.model(tokens).
type decoderEncoder struct{ m models.DecoderModel }

func (d decoderEncoder) close() { d.m.Close() }

func (d decoderEncoder) hidden(ids, _ *mlx.Array) *mlx.Array {
	if err := ids.Err(); err != nil {
		return ids
	}
	// Only the hidden states leave the scope (peak memory).
	s := mlx.NewScope()
	defer s.Close()
	h := d.m.Decoder().Forward(ids, nil)
	s.Keep(h)
	return h
}

// Model is a loaded embedding model.
type Model struct {
	Pipeline Pipeline
	Kind     string // "bert" or the decoder's model_type
	Dims     int
	MaxLen   int
	tk       *tok.Tokenizer
	tkTrunc  *tok.Tokenizer // the same tokenizer, truncating at MaxLen
	enc      encoder
	vocab    int // the embedding table's rows: ids past it are an error, not a read out of bounds
}

// Load reads an embedding model directory: config.json, safetensors weights,
// tokenizer.json, and optionally modules.json, 1_Pooling/config.json and
// sentence_bert_config.json. It runs MLX work on the executor itself.
func Load(dir string) (*Model, error) { return LoadWith(dir, models.LoadOptions{}) }

// LoadWith is Load with the decoder's load options (--dtype). BERT
// encoders run in float32 whatever their storage, as the reference does:
// another dtype is refused for them.
func LoadWith(dir string, opts models.LoadOptions) (*Model, error) {
	data, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, fmt.Errorf("cannot read model config: %w", err)
	}
	var head struct {
		ModelType  string `json:"model_type"`
		HiddenSize int    `json:"hidden_size"`
		VocabSize  int    `json:"vocab_size"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("cannot parse %s: %w", filepath.Join(dir, "config.json"), err)
	}
	m := &Model{Kind: head.ModelType, Dims: head.HiddenSize, vocab: head.VocabSize}
	def := Pipeline{Pooling: PoolMean, Normalize: true}
	if head.ModelType != "bert" {
		def.Pooling = PoolLast
	}
	p, err := readPipeline(dir, def)
	if err != nil {
		return nil, fmt.Errorf("cannot read the embedding pipeline of %s: %w", dir, err)
	}
	m.Pipeline = *p
	if m.tk, err = loadTokenizer(dir); err != nil {
		return nil, err
	}
	err = mlx.Do(func() error {
		if head.ModelType == "bert" {
			if opts.Dtype != "" && opts.Dtype != "float32" {
				return fmt.Errorf("cannot load %s as %s: BERT encoders run in float32, as the reference does", dir, opts.Dtype)
			}
			b, err := bert.Load(dir)
			if err != nil {
				return err
			}
			m.enc, m.MaxLen = bertEncoder{b}, b.Config().MaxPositionEmbeddings
			return nil
		}
		d, err := models.Load(dir, opts)
		if err != nil {
			return fmt.Errorf("cannot load model %s: %w", dir, err)
		}
		dm, ok := d.(models.DecoderModel)
		if !ok {
			d.Close()
			return fmt.Errorf("cannot load model %s: a %T has no hidden states", dir, d)
		}
		m.enc, m.MaxLen = decoderEncoder{dm}, d.Info().ContextLength
		return nil
	})
	if err != nil {
		return nil, err
	}
	if p.MaxSeqLength > 0 && (m.MaxLen <= 0 || p.MaxSeqLength < m.MaxLen) {
		m.MaxLen = p.MaxSeqLength
	}
	if m.MaxLen <= 0 {
		m.Close()
		return nil, fmt.Errorf("cannot tell the maximum input length of %s", dir)
	}
	if m.tkTrunc, err = loadTokenizer(dir); err != nil {
		m.Close()
		return nil, err
	}
	m.tkTrunc.Truncation = &tok.Truncation{MaxLength: m.MaxLen}
	return m, nil
}

// loadTokenizer loads dir's tokenizer without tokenizer.json's padding and
// truncation: Embed pads per batch and decides about long inputs itself.
func loadTokenizer(dir string) (*tok.Tokenizer, error) {
	t, err := tok.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot load the tokenizer of %s: %w", dir, err)
	}
	t.Padding, t.Truncation = nil, nil
	return t, nil
}

// Close frees the weights.
func (m *Model) Close() {
	if m.enc != nil {
		_ = mlx.Do(func() error { m.enc.close(); return nil })
		m.enc = nil
	}
}

// Tokenize is the token ids Embed would run for in (after the instruction
// prefix, truncation and length checks). index is used in errors.
func (m *Model) Tokenize(index int, in Input, opts Options) ([]int32, error) {
	ids := in.IDs
	if ids == nil {
		if in.Text == "" {
			return nil, fmt.Errorf("input %d: %w", index, ErrEmptyInput)
		}
		text := in.Text
		if opts.Instruction != "" {
			text = "Instruct: " + opts.Instruction + "\nQuery:" + text
		}
		t := m.tk
		if opts.Truncate {
			t = m.tkTrunc
		}
		var err error
		if ids, err = t.Encode(text, true); err != nil {
			return nil, fmt.Errorf("cannot tokenize input %d: %w", index, err)
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("input %d: %w", index, ErrEmptyInput)
	}
	if len(ids) > m.MaxLen {
		if !opts.Truncate {
			return nil, &TooLongError{Index: index, Tokens: len(ids), Max: m.MaxLen}
		}
		ids = ids[:m.MaxLen]
	}
	for _, id := range ids {
		if id < 0 || int(id) >= m.vocab {
			return nil, fmt.Errorf("input %d: token id %d is outside the model's vocabulary (0..%d)", index, id, m.vocab-1)
		}
	}
	return ids, nil
}

package nn

import (
	"fmt"

	"github.com/mlxgo/mlxgo/models/gguf"
)

// GGUF is what one architecture's package knows about the GGUF files
// llama.cpp's convert_hf_to_gguf.py writes for it, beyond the keys every
// architecture shares (models reads those): its model_type, the block
// tensor names and the config.json keys its metadata stands for. Each
// package declares it next to its safetensors Builder; models registers
// both under the same architecture.
type GGUF struct {
	// ModelType is the config.json model_type the file stands for.
	ModelType string
	// Layer maps a block tensor kind (blk.N.<kind>.weight) to its module
	// path under model.layers.N.
	Layer map[string]string
	// Config returns the config.json keys of this architecture that the
	// shared ones (GGUFHeader) do not cover, read from the metadata (and,
	// where the converter leaves no key, from which tensors the file has).
	Config func(m GGUFMeta, h GGUFHeader) (map[string]any, error)
	// MetaTensors are tensors Config reads (phi3's rope factors), not
	// weights.
	MetaTensors []string
	// PermutedQK: the converter permuted the q/k rows for ggml's rope
	// (convert_hf_to_gguf.py LlamaModel.permute), which the loader undoes.
	PermutedQK bool
	// Float32 widens the token embedding's float16 scales (exactly) so
	// that activations are float32 rather than float16.
	Float32 bool
}

// GGUFHeader is what the shared path has read already.
type GGUFHeader struct {
	HiddenSize, NumHiddenLayers, NumAttentionHeads int
	HasContextLength, HasRopeTheta                 bool
}

// GGUFMeta reads the metadata keys of one architecture ("<arch>.<key>").
type GGUFMeta struct {
	File *gguf.File
	Arch string
}

// ggufMax bounds every count read from metadata (models' maxVocab).
const ggufMax = 1 << 24

// Num is a required positive count.
func (m GGUFMeta) Num(key string) (int, error) {
	v, ok := m.File.Int(m.Arch + "." + key)
	if !ok || v <= 0 || v > ggufMax {
		return 0, fmt.Errorf("GGUF metadata %s.%s is missing or out of range", m.Arch, key)
	}
	return int(v), nil
}

// DividedHeadDim is hidden/heads, refused unless exact.
func (h GGUFHeader) DividedHeadDim() (int, error) {
	if h.HiddenSize%h.NumAttentionHeads != 0 {
		return 0, fmt.Errorf("embedding_length %d is not a multiple of head_count %d", h.HiddenSize, h.NumAttentionHeads)
	}
	return h.HiddenSize / h.NumAttentionHeads, nil
}

// HeadDim is attention.key_length, checked against value_length (the
// supported architectures have one head dimension), else hidden/heads.
func (m GGUFMeta) HeadDim(h GGUFHeader) (int, error) {
	k, err := m.Num("attention.key_length")
	if err != nil {
		return h.DividedHeadDim()
	}
	if v, err := m.Num("attention.value_length"); err == nil && v != k {
		return 0, fmt.Errorf("attention key_length %d differs from value_length %d", k, v)
	}
	return k, nil
}

// FullRope refuses partial rotary embeddings for an architecture that has
// none.
func (m GGUFMeta) FullRope(headDim int) error {
	if rd, ok := m.File.Int(m.Arch + ".rope.dimension_count"); ok && int(rd) != headDim {
		return fmt.Errorf("partial rotary embeddings (rope dims %d, head dim %d) are not supported", rd, headDim)
	}
	return nil
}

// GGUFLlamaLayer is llama.cpp's names for a llama block, which most
// architectures share.
var GGUFLlamaLayer = map[string]string{
	"attn_norm":   "input_layernorm",
	"ffn_norm":    "post_attention_layernorm",
	"attn_q":      "self_attn.q_proj",
	"attn_k":      "self_attn.k_proj",
	"attn_v":      "self_attn.v_proj",
	"attn_output": "self_attn.o_proj",
	"ffn_gate":    "mlp.gate_proj",
	"ffn_up":      "mlp.up_proj",
	"ffn_down":    "mlp.down_proj",
}

// GGUFLayerWith is GGUFLlamaLayer with entries replaced or added ("" drops
// one).
func GGUFLayerWith(extra map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range GGUFLlamaLayer {
		m[k] = v
	}
	for k, v := range extra {
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	return m
}

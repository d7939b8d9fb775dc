package models

import (
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/models/gguf"
)

// ggufFile writes a GGUF v3 file of metadata and F32 tensors of one
// element each (enough for the config and name mapping).
func ggufFile(kvs [][2]any, tensors ...string) []byte {
	var b []byte
	u32 := func(v uint32) { b = binary.LittleEndian.AppendUint32(b, v) }
	u64 := func(v uint64) { b = binary.LittleEndian.AppendUint64(b, v) }
	str := func(s string) { u64(uint64(len(s))); b = append(b, s...) }
	b = append(b, "GGUF"...)
	u32(3)
	u64(uint64(len(tensors)))
	u64(uint64(len(kvs)))
	for _, kv := range kvs {
		str(kv[0].(string))
		switch v := kv[1].(type) {
		case uint32:
			u32(4)
			u32(v)
		case float32:
			u32(6)
			u32(math.Float32bits(v))
		case string:
			u32(8)
			str(v)
		case []string:
			u32(9)
			u32(8)
			u64(uint64(len(v)))
			for _, s := range v {
				str(s)
			}
		default:
			panic("ggufFile: unsupported value type")
		}
	}
	for i, name := range tensors {
		str(name)
		u32(1)
		u64(1)
		u32(uint32(gguf.F32))
		u64(uint64(32 * i))
	}
	for len(b)%32 != 0 {
		b = append(b, 0)
	}
	for range tensors {
		b = append(b, make([]byte, 32)...)
	}
	return b
}

// gemma3Meta is Gemma 3 270M's metadata (make data-gemma3), vocabulary cut.
func gemma3Meta() [][2]any {
	return [][2]any{
		{"general.architecture", "gemma3"},
		{"gemma3.context_length", uint32(32768)}, {"gemma3.embedding_length", uint32(640)},
		{"gemma3.block_count", uint32(18)}, {"gemma3.feed_forward_length", uint32(2048)},
		{"gemma3.attention.head_count", uint32(4)}, {"gemma3.attention.layer_norm_rms_epsilon", float32(1e-6)},
		{"gemma3.attention.key_length", uint32(256)}, {"gemma3.attention.value_length", uint32(256)},
		{"gemma3.rope.freq_base", float32(1e6)}, {"gemma3.attention.sliding_window", uint32(512)},
		{"gemma3.attention.head_count_kv", uint32(1)},
		{"tokenizer.ggml.model", "llama"}, {"tokenizer.ggml.tokens", []string{"<pad>", "<eos>", "<bos>"}},
		{"tokenizer.ggml.eos_token_id", uint32(1)},
	}
}

func qwen3Meta() [][2]any {
	return [][2]any{
		{"general.architecture", "qwen3"},
		{"qwen3.context_length", uint32(40960)}, {"qwen3.embedding_length", uint32(1024)},
		{"qwen3.block_count", uint32(28)}, {"qwen3.feed_forward_length", uint32(3072)},
		{"qwen3.attention.head_count", uint32(16)}, {"qwen3.attention.head_count_kv", uint32(8)},
		{"qwen3.rope.freq_base", float32(1e6)}, {"qwen3.attention.layer_norm_rms_epsilon", float32(1e-6)},
		{"qwen3.attention.key_length", uint32(128)}, {"qwen3.attention.value_length", uint32(128)},
		{"qwen3.vocab_size", uint32(151936)}, {"tokenizer.ggml.eos_token_id", uint32(151645)},
	}
}

func qwen2Meta() [][2]any {
	return [][2]any{
		{"general.architecture", "qwen2"},
		{"qwen2.context_length", uint32(32768)}, {"qwen2.embedding_length", uint32(896)},
		{"qwen2.block_count", uint32(24)}, {"qwen2.feed_forward_length", uint32(4864)},
		{"qwen2.attention.head_count", uint32(14)}, {"qwen2.attention.head_count_kv", uint32(2)},
		{"qwen2.rope.freq_base", float32(1e6)}, {"qwen2.attention.layer_norm_rms_epsilon", float32(1e-6)},
		{"qwen2.vocab_size", uint32(151936)},
	}
}

// set replaces or adds a key.
func set(kvs [][2]any, key string, v any) [][2]any {
	out := append([][2]any(nil), kvs...)
	for i := range out {
		if out[i][0] == key {
			if v == nil {
				return append(out[:i], out[i+1:]...)
			}
			out[i][1] = v
			return out
		}
	}
	return append(out, [2]any{key, v})
}

func parseGGUF(t *testing.T, data []byte) *gguf.File {
	t.Helper()
	f, err := gguf.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestGGUFConfig(t *testing.T) {
	ip := func(v int) *int { return &v }
	fp := func(v float64) *float64 { return &v }
	bp := func(v bool) *bool { return &v }
	eps := float64(float32(1e-6))
	for _, tc := range []struct {
		name    string
		meta    [][2]any
		tensors []string
		want    *Config
		wantErr string
	}{
		{name: "gemma3 270M", meta: gemma3Meta(), want: &Config{ModelType: "gemma3_text", HiddenSize: 640, NumHiddenLayers: 18,
			IntermediateSize: 2048, NumAttentionHeads: 4, NumKeyValueHeads: ip(1), HeadDim: ip(256), RMSNormEps: &eps,
			VocabSize: 3, MaxPositionEmbeddings: ip(32768), RopeTheta: fp(1e6), TieWordEmbeddings: bp(true),
			SlidingWindow: ip(512), SlidingWindowPattern: ip(6), RopeLocalBaseFreq: fp(10000), QueryPreAttnScalar: fp(256),
			EOSTokenID: TokenIDs{1}}},
		{name: "gemma3 27B query scale", meta: set(set(set(gemma3Meta(), "gemma3.block_count", uint32(62)),
			"gemma3.embedding_length", uint32(5376)), "gemma3.attention.head_count", uint32(32)),
			want: &Config{ModelType: "gemma3_text", HiddenSize: 5376, NumHiddenLayers: 62, IntermediateSize: 2048,
				NumAttentionHeads: 32, NumKeyValueHeads: ip(1), HeadDim: ip(256), RMSNormEps: &eps, VocabSize: 3,
				MaxPositionEmbeddings: ip(32768), RopeTheta: fp(1e6), TieWordEmbeddings: bp(true), SlidingWindow: ip(512),
				SlidingWindowPattern: ip(6), RopeLocalBaseFreq: fp(10000), QueryPreAttnScalar: fp(168),
				EOSTokenID: TokenIDs{1}}},
		{name: "gemma3 linear rope and pattern", meta: set(set(set(gemma3Meta(), "gemma3.rope.scaling.type", "linear"),
			"gemma3.rope.scaling.factor", float32(8)), "gemma3.attention.sliding_window_pattern", uint32(2)),
			tensors: []string{"output.weight"},
			want: &Config{ModelType: "gemma3_text", HiddenSize: 640, NumHiddenLayers: 18, IntermediateSize: 2048,
				NumAttentionHeads: 4, NumKeyValueHeads: ip(1), HeadDim: ip(256), RMSNormEps: &eps, VocabSize: 3,
				MaxPositionEmbeddings: ip(32768), RopeTheta: fp(1e6), TieWordEmbeddings: bp(false), SlidingWindow: ip(512),
				SlidingWindowPattern: ip(2), RopeLocalBaseFreq: fp(10000), QueryPreAttnScalar: fp(256),
				RopeScaling: RopeScaling{"type": "linear", "factor": 8.0}, EOSTokenID: TokenIDs{1}}},
		{name: "qwen3 0.6B", meta: qwen3Meta(), want: &Config{ModelType: "qwen3", HiddenSize: 1024, NumHiddenLayers: 28,
			IntermediateSize: 3072, NumAttentionHeads: 16, NumKeyValueHeads: ip(8), HeadDim: ip(128), RMSNormEps: &eps,
			VocabSize: 151936, MaxPositionEmbeddings: ip(40960), RopeTheta: fp(1e6), TieWordEmbeddings: bp(true),
			EOSTokenID: TokenIDs{151645}}},
		{name: "qwen2 0.5B", meta: qwen2Meta(), want: &Config{ModelType: "qwen2", HiddenSize: 896, NumHiddenLayers: 24,
			IntermediateSize: 4864, NumAttentionHeads: 14, NumKeyValueHeads: ip(2), RMSNormEps: &eps, VocabSize: 151936,
			MaxPositionEmbeddings: ip(32768), RopeTheta: fp(1e6), TieWordEmbeddings: bp(true)}},
		{name: "unsupported architecture", meta: set(qwen2Meta(), "general.architecture", "mamba"),
			wantErr: `unsupported model type "mamba" in GGUF: supported GGUF architectures are gemma3, llama, minicpm, phi3, qwen2, qwen3, qwen3moe`},
		{name: "gemma3 without window", meta: set(gemma3Meta(), "gemma3.attention.sliding_window", nil),
			wantErr: "gemma3.attention.sliding_window is missing"},
		{name: "qwen3 without context", meta: set(qwen3Meta(), "qwen3.context_length", nil),
			wantErr: "qwen3.context_length is missing"},
		{name: "key and value lengths differ", meta: set(qwen3Meta(), "qwen3.attention.value_length", uint32(64)),
			wantErr: "key_length 128 differs from value_length 64"},
		{name: "partial rope", meta: set(qwen2Meta(), "qwen2.rope.dimension_count", uint32(32)),
			wantErr: "partial rotary embeddings"},
		{name: "yarn", meta: set(qwen3Meta(), "qwen3.rope.scaling.type", "yarn"),
			wantErr: `GGUF rope scaling "yarn" is not supported`},
		{name: "no eps", meta: set(qwen2Meta(), "qwen2.attention.layer_norm_rms_epsilon", nil),
			wantErr: "layer_norm_rms_epsilon is missing"},
		{name: "huge block count", meta: set(qwen2Meta(), "qwen2.block_count", uint32(1<<20)),
			wantErr: "num_hidden_layers = 1048576"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ggufConfig(parseGGUF(t, ggufFile(tc.meta, tc.tensors...)))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if strings.Contains(tc.wantErr, "unsupported model type") && !errors.Is(err, ErrUnsupportedModel) {
					t.Errorf("err does not wrap ErrUnsupportedModel")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c, tc.want) {
				t.Errorf("config\n got %+v\nwant %+v", *c, *tc.want)
			}
		})
	}
}

func TestGGUFName(t *testing.T) {
	for _, tc := range []struct{ arch, name, path, kind, err string }{
		{"llama", "blk.3.ffn_norm.weight", "model.layers.3.post_attention_layernorm.weight", "ffn_norm", ""},
		{"gemma3", "blk.3.ffn_norm.weight", "model.layers.3.pre_feedforward_layernorm.weight", "ffn_norm", ""},
		{"gemma3", "blk.0.post_attention_norm.weight", "model.layers.0.post_attention_layernorm.weight", "post_attention_norm", ""},
		{"gemma3", "blk.0.post_ffw_norm.weight", "model.layers.0.post_feedforward_layernorm.weight", "post_ffw_norm", ""},
		{"gemma3", "blk.17.attn_q_norm.weight", "model.layers.17.self_attn.q_norm.weight", "attn_q_norm", ""},
		{"qwen3", "blk.1.attn_k_norm.weight", "model.layers.1.self_attn.k_norm.weight", "attn_k_norm", ""},
		{"qwen2", "blk.1.attn_v.bias", "model.layers.1.self_attn.v_proj.bias", "attn_v", ""},
		{"qwen2", "token_embd.weight", "model.embed_tokens.weight", "token_embd", ""},
		{"qwen2", "output.weight", "lm_head.weight", "output", ""},
		{"llama", "blk.0.attn_q_norm.weight", "", "", "cannot map GGUF tensor blk.0.attn_q_norm.weight to a llama module"},
		{"qwen2", "blk.0.post_ffw_norm.weight", "", "", "to a qwen2 module"},
		{"gemma3", "rope_freqs.weight", "", "", "cannot map"},
		{"gemma3", "blk.0.attn_q.scale", "", "", "cannot map"},
		{"gemma3", "noparam", "", "", "cannot map"},
	} {
		t.Run(tc.arch+"/"+tc.name, func(t *testing.T) {
			path, kind, err := ggufName(ggufArchs[tc.arch], tc.name)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || path != tc.path || kind != tc.kind {
				t.Fatalf("ggufName = %q, %q, %v; want %q, %q", path, kind, err, tc.path, tc.kind)
			}
		})
	}
}

// FuzzGGUFConfig feeds arbitrary GGUF files to the metadata → config and
// tensor name mapping: an error or a valid config, never a panic.
func FuzzGGUFConfig(f *testing.F) {
	f.Add(ggufFile(gemma3Meta(), "token_embd.weight", "blk.0.post_ffw_norm.weight"))
	f.Add(ggufFile(qwen3Meta(), "blk.0.attn_q_norm.weight", "output.weight"))
	f.Add(ggufFile(qwen2Meta(), "blk.0.attn_q.bias"))
	f.Add(ggufFile(set(gemma3Meta(), "gemma3.rope.scaling.type", "linear")))
	f.Add(ggufFile(qwen3moeMeta(), "blk.0.ffn_gate_inp.weight", "blk.0.ffn_gate_exps.weight"))
	f.Add(ggufFile(phi3Meta(), "rope_factors_long.weight", "rope_factors_short.weight", "blk.0.attn_qkv.weight"))
	f.Add(ggufFile(minicpmMeta(), "token_embd.weight"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := gguf.Parse(data)
		if err != nil {
			return
		}
		c, err := ggufConfig(file)
		if err != nil {
			return
		}
		if err := c.validate(); err != nil {
			t.Fatalf("ggufConfig returned an invalid config: %v", err)
		}
		a := ggufArchs[file.Architecture()]
		for _, ti := range file.Tensors {
			_, _, _ = ggufName(a, ti.Name)
		}
	})
}

// FuzzGGUFConfigValues fuzzes the metadata values themselves (FuzzGGUFConfig
// rarely gets past the parser): any values give an error or a valid config.
func FuzzGGUFConfigValues(f *testing.F) {
	f.Add("gemma3", uint32(32768), uint32(640), uint32(18), uint32(2048), uint32(4), uint32(1), uint32(256), uint32(256),
		uint32(512), uint32(0), float32(1e-6), float32(1e6), "", float32(0), false)
	f.Add("qwen3", uint32(40960), uint32(1024), uint32(28), uint32(3072), uint32(16), uint32(8), uint32(128), uint32(128),
		uint32(0), uint32(0), float32(1e-6), float32(1e6), "linear", float32(4), true)
	f.Add("qwen2", uint32(0), uint32(896), uint32(62), uint32(4864), uint32(14), uint32(0), uint32(0), uint32(0),
		uint32(0), uint32(3), float32(-1), float32(0), "yarn", float32(1), false)
	f.Add("phi3", uint32(131072), uint32(3072), uint32(32), uint32(8192), uint32(32), uint32(32), uint32(0), uint32(0),
		uint32(0), uint32(0), float32(1e-5), float32(1e4), "", float32(0), true)
	f.Fuzz(func(t *testing.T, arch string, ctx, emb, blocks, ff, heads, kvh, keyLen, valLen, window, pattern uint32,
		eps, theta float32, scaling string, factor float32, output bool) {
		meta := [][2]any{{"general.architecture", arch}}
		for _, kv := range []struct {
			key string
			v   uint32
		}{{"context_length", ctx}, {"embedding_length", emb}, {"block_count", blocks}, {"feed_forward_length", ff},
			{"attention.head_count", heads}, {"attention.head_count_kv", kvh}, {"attention.key_length", keyLen},
			{"attention.value_length", valLen}, {"attention.sliding_window", window},
			{"attention.sliding_window_pattern", pattern}} {
			if kv.v != 0 {
				meta = append(meta, [2]any{arch + "." + kv.key, kv.v})
			}
		}
		meta = append(meta, [2]any{arch + ".attention.layer_norm_rms_epsilon", eps}, [2]any{arch + ".rope.freq_base", theta},
			[2]any{"tokenizer.ggml.tokens", []string{"a", "b"}})
		if scaling != "" {
			meta = append(meta, [2]any{arch + ".rope.scaling.type", scaling}, [2]any{arch + ".rope.scaling.factor", factor})
		}
		var tensors []string
		if output {
			tensors = append(tensors, "output.weight")
		}
		file, err := gguf.Parse(ggufFile(meta, tensors...))
		if err != nil {
			return // e.g. a key that is not valid UTF-8 twice
		}
		c, err := ggufConfig(file)
		if err != nil {
			return
		}
		if err := c.validate(); err != nil {
			t.Fatalf("ggufConfig returned an invalid config: %v", err)
		}
		if c.HeadDim != nil && *c.HeadDim <= 0 {
			t.Fatalf("head dim %d", *c.HeadDim)
		}
	})
}

package models_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
)

// TestInfoAndCaches loads one model of each kind and checks what Info
// reports and which caches NewCaches makes (mlx-lm's make_prompt_cache).
func TestInfoAndCaches(t *testing.T) {
	oracleCases(t) // generates the tiny models when absent
	dir := filepath.Join(oracleDir(), "models")
	for _, tc := range []struct {
		path              string
		want              models.Info
		opts              kv.Options
		wantCaches        string
		fingerprintPrefix string
	}{
		{path: filepath.Join(dir, "llama_tied-q4g64"), want: models.Info{ModelType: "llama", VocabSize: 512, ContextLength: 2048,
			NumLayers: 3, Dtype: "bfloat16", Quantization: "affine 4-bit g64", Format: "safetensors"},
			opts: kv.Options{MaxKVSize: 16}, wantCaches: "KVCache KVCache KVCache "}, // llama's make_cache ignores max kv size
		{path: filepath.Join(dir, "qwen2-f32"), want: models.Info{ModelType: "qwen2", VocabSize: 512, ContextLength: 2048,
			NumLayers: 2, Dtype: "float32", Quantization: "none", Format: "safetensors"},
			opts: kv.Options{MaxKVSize: 16}, wantCaches: "RotatingKVCache RotatingKVCache "},
		{path: filepath.Join(dir, "qwen3-bf16"), want: models.Info{ModelType: "qwen3", VocabSize: 512, ContextLength: 2048,
			NumLayers: 2, Dtype: "bfloat16", Quantization: "none", Format: "safetensors"},
			wantCaches: "KVCache KVCache "},
		{path: filepath.Join(dir, "gemma3_text-f32"), want: models.Info{ModelType: "gemma3_text", VocabSize: 512, ContextLength: 2048,
			NumLayers: 4, Dtype: "float32", Quantization: "none", Format: "safetensors"},
			wantCaches: "RotatingKVCache KVCache RotatingKVCache KVCache "},
		{path: filepath.Join(dir, "llama_tied-mixed36"), want: models.Info{ModelType: "llama", VocabSize: 512, ContextLength: 2048,
			NumLayers: 3, Dtype: "bfloat16", Quantization: "affine 4-bit g64 (+22 module overrides)", Format: "safetensors"},
			wantCaches: "KVCache KVCache KVCache "},
		// a hybrid: kv.Arrays for the Gated DeltaNet layers; its make_cache
		// ignores max kv size
		{path: filepath.Join(dir, "qwen3_5-q4g64"), want: models.Info{ModelType: "qwen3_5", VocabSize: 512, ContextLength: 2048,
			NumLayers: 4, Dtype: "bfloat16", Quantization: "affine 4-bit g64", Format: "safetensors"},
			opts: kv.Options{MaxKVSize: 16}, wantCaches: "ArraysCache ArraysCache ArraysCache KVCache "},
		// gemma4: the KV-shared layers 4 and 5 get no cache of their own; its
		// make_cache ignores max kv size
		{path: filepath.Join(dir, "gemma4_text-q4g64"), want: models.Info{ModelType: "gemma4_text", VocabSize: 512, ContextLength: 2048,
			NumLayers: 6, Dtype: "bfloat16", Quantization: "affine 4-bit g64", Format: "safetensors"},
			opts: kv.Options{MaxKVSize: 16}, wantCaches: "RotatingKVCache RotatingKVCache KVCache RotatingKVCache "},
		{path: "gguf", want: models.Info{ModelType: "llama", VocabSize: 49152, ContextLength: 8192, NumLayers: 30,
			EOS: []int{2}, Dtype: "float16", Quantization: "affine 4-bit g32 (+1 module overrides)", Format: "gguf"},
			wantCaches: strings.Repeat("KVCache ", 30)},
	} {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			path := tc.path
			if path == "gguf" {
				path = testenv.DataFile(t, "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
			}
			mlxtest.Do(t, func() error {
				m, err := models.Load(path, models.LoadOptions{})
				if err != nil {
					return err
				}
				defer m.Close()
				got := m.Info()
				art := got.Artifact
				got.Artifact, got.Path = nil, ""
				if !reflect.DeepEqual(got, tc.want) {
					return fmt.Errorf("info %+v, want %+v", got, tc.want)
				}
				fp, err := art.Fingerprint()
				if err != nil || len(fp) != 64 {
					return fmt.Errorf("fingerprint %q, %v", fp, err)
				}
				caches := m.NewCaches(tc.opts)
				defer kv.FreeAll(caches)
				if k := cacheKinds(caches); k != tc.wantCaches {
					return fmt.Errorf("caches %q, want %q", k, tc.wantCaches)
				}
				// Misuse is an error carried by the result, not a panic.
				if err := mlx.Eval(m.Forward(mlx.FromSlice([]int32{1, 2}), caches)); err == nil || !strings.Contains(err.Error(), "want [batch, length]") {
					return fmt.Errorf("forward on 1-D ids: %v", err)
				}
				out := m.Forward(mlx.FromSlice([]int32{1, 2}, 1, 2), caches[:1])
				if err := mlx.Eval(out); err == nil || !strings.Contains(err.Error(), "caches for") {
					return fmt.Errorf("forward with one cache: %v", err)
				}
				return nil
			})
		})
	}
}

// TestStrictWeights: like mlx-lm's strict load_weights, a checkpoint must
// hold exactly what the config describes (after the architecture's
// sanitize), with the shapes it implies.
func TestStrictWeights(t *testing.T) {
	oracleCases(t)
	models_ := filepath.Join(oracleDir(), "models")
	for _, tc := range []struct {
		name, src string
		edit      func(cfg string) string
		extra     bool   // add a tensor the model has no place for
		want      string // "" loads
	}{
		{name: "as saved", src: "qwen2-f32"},
		{name: "tied config drops lm_head (sanitize)", src: "qwen2-f32",
			edit: func(c string) string {
				return strings.Replace(c, `"tie_word_embeddings": false`, `"tie_word_embeddings": true`, 1)
			}},
		{name: "missing layer", src: "qwen2-f32", want: "cannot find weight model.layers.2",
			edit: func(c string) string {
				return strings.Replace(c, `"num_hidden_layers": 2`, `"num_hidden_layers": 3`, 1)
			}},
		{name: "wrong shape", src: "qwen2-f32", want: "has shape [128 64], want [256 64]",
			edit: func(c string) string {
				return strings.Replace(c, `"intermediate_size": 128`, `"intermediate_size": 256`, 1)
			}},
		{name: "unused tensor", src: "qwen2-f32", extra: true, want: "does not use: model.bogus.weight"},
		{name: "quantized without quantization config", src: "qwen2-q4g32", want: "no quantization",
			edit: func(c string) string {
				i, j := strings.Index(c, `"quantization"`), strings.Index(c, `"rms_norm_eps"`)
				return c[:i] + c[j:]
			}},
		{name: "unknown rope type", src: "qwen2-f32", want: `rope_scaling type "dynamic"`,
			edit: func(c string) string {
				return strings.Replace(c, `"rope_theta"`, `"rope_scaling": {"type": "dynamic", "factor": 2.0}, "rope_theta"`, 1)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyModel(t, filepath.Join(models_, tc.src), tc.edit, tc.extra)
			mlxtest.Do(t, func() error {
				m, err := models.Load(dir, models.LoadOptions{})
				if tc.want == "" {
					if err != nil {
						return err
					}
					return m.Close()
				}
				if err == nil {
					m.Close()
					return fmt.Errorf("loaded; want an error containing %q", tc.want)
				}
				if !strings.Contains(err.Error(), tc.want) {
					return fmt.Errorf("error %q, want it to contain %q", err, tc.want)
				}
				return nil
			})
		})
	}
}

// copyModel copies a model directory into a temporary one, editing its
// config.json, and with extra adds a shard holding a tensor no model uses
// (the index is dropped so that every model*.safetensors file is read).
func copyModel(t *testing.T, src string, edit func(string) string, extra bool) string {
	t.Helper()
	dst := t.TempDir()
	cfg, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	c := string(cfg)
	if edit != nil {
		c = edit(c)
	}
	must(t, os.WriteFile(filepath.Join(dst, "config.json"), []byte(c), 0o644))
	w, err := os.ReadFile(filepath.Join(src, "model.safetensors"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dst, "model.safetensors"), w, 0o644))
	if extra {
		hdr := `{"model.bogus.weight":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`
		for len(hdr)%8 != 0 {
			hdr += " "
		}
		b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
		b = append(append(b, hdr...), 0, 0, 128, 63)
		must(t, os.WriteFile(filepath.Join(dst, "model-extra.safetensors"), b, 0o644))
	}
	return dst
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestForwardWithoutCache: mlx-lm's model(inputs) with cache=None (plain
// causal attention over the prompt) gives the same last-position logits as a
// first call through fresh caches, for every architecture.
func TestForwardWithoutCache(t *testing.T) {
	oracleCases(t)
	for _, name := range []string{"llama-bf16", "llama_rope3-f32", "qwen2-q4g32", "qwen3-bf16", "gemma3_text-f32",
		"qwen3_moe-q4g64", "ministral3-bf16", "mistral3-f32", "phi3-f32", "gemma3-bf16",
		"qwen3_5-bf16", "qwen3_5_moe-f32", "qwen3_next-q4g64", "gemma4_text-f32", "gemma4_text_moe-q4g32", "gemma4-bf16",
		"gpt_oss-q4g64", "minicpm-bf16"} {
		t.Run(name, func(t *testing.T) {
			mlxtest.Do(t, func() error {
				m, err := models.Load(filepath.Join(oracleDir(), "models", name), models.LoadOptions{})
				if err != nil {
					return err
				}
				defer m.Close()
				ids := make([]int32, 24) // longer than gemma's window of 16
				for i := range ids {
					ids[i] = int32(7 * i % 512)
				}
				x := mlx.FromSlice(ids, 1, len(ids))
				caches := m.NewCaches(kv.Options{})
				defer kv.FreeAll(caches)
				a, err := mlx.AsType(m.Forward(x, nil), mlx.Float32).Float32s()
				if err != nil {
					return err
				}
				b, err := mlx.AsType(m.Forward(x, caches), mlx.Float32).Float32s()
				if err != nil {
					return err
				}
				if len(a) != len(ids)*512 {
					return fmt.Errorf("%d logits, want %d", len(a), len(ids)*512)
				}
				if i, d := compareRow(a, b); i >= 0 {
					return fmt.Errorf("logit %d differs: %v without cache, %v with; max abs diff %g", i, a[i], b[i], d)
				}
				return nil
			})
		})
	}
}

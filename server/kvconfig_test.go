package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/models"
)

// TestParseKVConfig: optiq's kv_config.json (a list of layer_idx, bits,
// group_size), group_size defaulting to 64, and what is refused.
func TestParseKVConfig(t *testing.T) {
	got, err := ParseKVConfig([]byte(`[{"layer_idx":0,"bits":8,"group_size":64},{"layer_idx":3,"bits":4}]`))
	if err != nil || len(got) != 2 || got[0] != (kv.LayerQuant{Bits: 8, GroupSize: 64}) || got[3] != (kv.LayerQuant{Bits: 4, GroupSize: 64}) {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, tc := range []struct{ name, in, want string }{
		{"not a list", `{"kv_bits":8}`, "JSON array"},
		{"no bits", `[{"layer_idx":0}]`, "needs layer_idx and bits"},
		{"odd bits", `[{"layer_idx":0,"bits":7}]`, "bits 7"},
		{"odd group", `[{"layer_idx":0,"bits":4,"group_size":48}]`, "group_size 48"},
		{"twice", `[{"layer_idx":1,"bits":4},{"layer_idx":1,"bits":8}]`, "listed twice"},
		{"empty", `[]`, "no layers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseKVConfig([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
	dir := t.TempDir()
	if l, err := ReadKVConfig(dir); l != nil || err != nil {
		t.Errorf("no file: %v, %v", l, err)
	}
	os.WriteFile(filepath.Join(dir, KVConfigFile), []byte(`[{"layer_idx":1,"bits":4}]`), 0o644)
	gguf := filepath.Join(dir, "m.gguf")
	os.WriteFile(gguf, nil, 0o644)
	for _, p := range []string{dir, gguf} {
		if l, err := ReadKVConfig(p); err != nil || l[1].Bits != 4 {
			t.Errorf("ReadKVConfig(%s): %v, %v", p, l, err)
		}
	}
}

// kvRowModel is a batchable stub with the caches of an architecture.
type kvRowModel struct {
	stubRowModel
	caches func(kv.Options) []kv.Cache
}

func (m kvRowModel) NewCaches(o kv.Options) []kv.Cache { return m.caches(o) }
func (m kvRowModel) Info() models.Info {
	return models.Info{ModelType: "llama", Dtype: "float16", Quantization: "affine 4-bit g32", Format: "gguf"}
}

// TestWithKV: the KV options reach the runner and kv_scheme; quantizing a
// rotating cache, a layer the model lacks, and batching quantized KV are
// startup errors naming what to change.
func TestWithKV(t *testing.T) {
	growing := kvRowModel{caches: func(o kv.Options) []kv.Cache {
		out := make([]kv.Cache, 4)
		for i := range out {
			out[i] = kv.NewKVCache()
			if o.MaxKVSize > 0 {
				out[i] = kv.NewRotating(o.MaxKVSize, 4)
			}
		}
		return out
	}}
	sliding := kvRowModel{caches: func(kv.Options) []kv.Cache {
		return []kv.Cache{kv.NewRotating(512, 0), kv.NewKVCache()}
	}}
	tk := testTokenizer(t)
	for _, tc := range []struct {
		name   string
		m      kvRowModel
		o      kv.Options
		scheme string
		err    string
	}{
		{"bits", growing, kv.Options{KVBits: 8, KVGroupSize: 64}, "float16, quantized 8-bit affine g64 (mlx-lm's QuantizedKVCache) from 0 cached tokens", ""},
		{"layers", growing, kv.Options{Layers: map[int]kv.LayerQuant{0: {Bits: 8, GroupSize: 64}, 2: {Bits: 4, GroupSize: 32}, 3: {Bits: 4, GroupSize: 32}}},
			"float16, quantized per layer by kv_config.json (of 4 layers: 1 at 8-bit affine g64, 2 at 4-bit affine g32, 1 not quantized) from 0 cached tokens", ""},
		{"max kv size", growing, kv.Options{MaxKVSize: 256}, "float16, not quantized; 4 layers: 0 growing, 4 rotating (sliding window of 256 tokens)", ""},
		{"sliding window bits", sliding, kv.Options{KVBits: 4}, "", "layer 0 of m: it is a rotating cache"},
		{"sliding window layer", sliding, kv.Options{Layers: map[int]kv.LayerQuant{0: {Bits: 4, GroupSize: 64}}}, "", "layer 0 of m: it is a rotating cache"},
		{"sliding window other layer", sliding, kv.Options{Layers: map[int]kv.LayerQuant{1: {Bits: 4, GroupSize: 64}}}, "float16, quantized per layer by kv_config.json (of 2 layers: 1 at 4-bit affine g64, 1 not quantized) from 0 cached tokens; 2 layers: 1 growing, 1 rotating (sliding window of 512 tokens)", ""},
		{"no such layer", growing, kv.Options{Layers: map[int]kv.LayerQuant{9: {Bits: 4, GroupSize: 64}}}, "", "names layer 9, and m has 4 layers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := WithKV(NewMLXModel(tc.m, tk, "m", "test", 0), tc.o, 0)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Composition.KVScheme; got != tc.scheme {
				t.Errorf("kv_scheme %q\nwant      %q", got, tc.scheme)
			}
			if r := m.Runner.(*MLXRunner); r.KV.KVBits != tc.o.KVBits || len(r.KV.Layers) != len(tc.o.Layers) || r.KV.MaxKVSize != tc.o.MaxKVSize {
				t.Errorf("runner KV %+v", r.KV)
			}
			_, berr := WithBatch(m, 4)
			quantized := tc.o.KVBits > 0 || len(tc.o.Layers) > 0
			if quantized != (berr != nil) || (berr != nil && !strings.Contains(berr.Error(), "--batch 4 cannot be combined with --kv-bits or kv_config.json")) {
				t.Errorf("WithBatch: %v", berr)
			}
		})
	}
}

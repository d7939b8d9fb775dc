package models

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/mlx"
)

// Model is a loaded decoder language model.
type Model interface {
	// Forward runs token ids [B, L] (int32) with one cache per layer (or
	// nil caches) and returns logits [B, L, vocab] exactly as mlx-lm's
	// Model.__call__ does (same op graph, same dtypes).
	Forward(tokens *mlx.Array, caches []kv.Cache) *mlx.Array
	// NewCaches is mlx-lm's make_prompt_cache for this model.
	NewCaches(opts kv.Options) []kv.Cache
	// Info describes the model and its artifact.
	Info() Info
	// Close frees the weights (call inside mlx.Do).
	Close() error
}

// Info is what a model is: its architecture, sizes, numeric scheme and the
// artifact it was loaded from.
type Info struct {
	ModelType     string
	VocabSize     int
	ContextLength int // max_position_embeddings, or GGUF context_length; 0 if unknown
	NumLayers     int
	EOS           []int  // eos_token_id from the config (generation_config.json wins)
	Dtype         string // activation dtype: that of the embedding (scales when quantized)
	CastTo        string // LoadOptions.Dtype when set: the weights were cast to it at load
	Quantization  string // "none", or the default scheme and override count
	Format        string // "safetensors" or "gguf"
	Path          string
	// Artifact identifies the exact files; hashing is deferred until asked.
	Artifact *Artifact
	// Adapters are the LoRA adapters loaded with the model, in
	// LoadOptions' order.
	Adapters []AdapterInfo
}

// LoadOptions tunes Load. The zero value is mlx-lm's behaviour.
type LoadOptions struct {
	// Adapters are LoRA adapters to load with the model, as mlx_lm.generate
	// --adapter-path applies one: unfused, Load returns an Adapted model.
	Adapters []Adapter
	// FuseAdapter folds the one adapter into the weights as mlx_lm.fuse
	// does (quantized weights are quantized again); Load returns a plain
	// model.
	FuseAdapter bool
	// Dtype, when set ("float32", "float16", "bfloat16"), is the dtype every
	// floating-point weight is loaded as, so activations run in it:
	// mlx-lm's model.set_dtype after load (Weights.CastTo). Empty: the
	// checkpoint's own.
	Dtype string
}

// Artifact is the set of files a model was loaded from; its fingerprint
// (DESIGN.md §9) is computed on first use and cached, since hashing
// gigabytes of weights would delay the first token.
type Artifact struct {
	Files []string // absolute paths: config.json and weight files

	once    sync.Once
	digests map[string]string
	sum     string
	err     error
}

func newArtifact(files []string) *Artifact {
	files = append([]string(nil), files...)
	sort.Strings(files)
	return &Artifact{Files: files}
}

// FileDigests is the sha256 of each file, by base name (the form the
// oracle's fingerprint_dir records).
func (a *Artifact) FileDigests() (map[string]string, error) {
	a.compute()
	return a.digests, a.err
}

// Fingerprint is sha256 over "name sha256\n" lines of every file, sorted
// by name: it changes when any byte of any file does.
func (a *Artifact) Fingerprint() (string, error) {
	a.compute()
	return a.sum, a.err
}

func (a *Artifact) compute() {
	a.once.Do(func() {
		a.digests = map[string]string{}
		h := sha256.New()
		for _, f := range a.Files {
			d, err := sha256File(f)
			if err != nil {
				a.err = fmt.Errorf("cannot fingerprint the model: %w", err)
				return
			}
			a.digests[filepath.Base(f)] = d
			fmt.Fprintf(h, "%s %s\n", filepath.Base(f), d)
		}
		a.sum = hex.EncodeToString(h.Sum(nil))
	})
}

func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("cannot read %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// EOSIDs are the ids that end generation: the config's eos_token_id plus
// extra (the tokenizer's EOS), each once, as mlx-lm's TokenizerWrapper
// collects them.
func (i Info) EOSIDs(extra ...int32) []int32 {
	var ids []int32
	seen := map[int32]bool{}
	for _, id := range append(toInt32s(i.EOS), extra...) {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids
}

func toInt32s(v []int) []int32 {
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out
}

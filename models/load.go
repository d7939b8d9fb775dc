package models

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mlxgo/mlxgo/models/nn"
	"github.com/mlxgo/mlxgo/models/safetensors"
)

// Load reads a model: a directory holding config.json and safetensors
// weights (single file or sharded, MLX-quantized or not), or a .gguf file.
// Call it inside mlx.Do; the weights belong to the model until Close.
func Load(path string, opts LoadOptions) (Model, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open model: %w", err)
	}
	if !st.IsDir() {
		if strings.EqualFold(filepath.Ext(path), ".gguf") {
			return loadGGUF(path, opts)
		}
		return nil, fmt.Errorf("cannot open model %s: want a model directory (config.json + safetensors) or a .gguf file", path)
	}
	return loadDir(path, opts)
}

func loadDir(dir string, opts LoadOptions) (Model, error) {
	cfgPath := filepath.Join(dir, "config.json")
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("cannot read model config: %w", err)
	}
	// The architecture first: a model we cannot run is told so plainly,
	// not through whatever else its config lacks.
	var head struct {
		ModelType string `json:"model_type"`
	}
	if json.Unmarshal(data, &head) == nil && head.ModelType != "" {
		if _, ok := architectures[head.ModelType]; !ok {
			return nil, unsupported(head.ModelType)
		}
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfgPath, err)
	}
	// mlx-lm's load_config: generation_config.json's eos_token_id wins.
	if g, err := os.ReadFile(filepath.Join(dir, "generation_config.json")); err == nil {
		var gc struct {
			EOS TokenIDs `json:"eos_token_id"`
		}
		if json.Unmarshal(g, &gc) == nil && len(gc.EOS) > 0 {
			cfg.EOSTokenID = gc.EOS
		}
	}
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot open model weights: %w", err)
	}
	var bytes int64
	for _, name := range set.Names() {
		t, _ := set.Tensor(name)
		bytes += int64(len(t.Data))
	}
	if err := fitsDevice(bytes); err != nil {
		set.Close()
		return nil, fmt.Errorf("cannot load model %s: %w", dir, err)
	}
	// MLX copies the bytes into its own memory, so the mapping can go once
	// the model is built.
	defer set.Close()
	files := []string{cfgPath}
	for _, f := range set.Files {
		files = append(files, f.Path)
	}
	w := nn.NewWeights(nn.Safetensors(set), cfg.Quantization)
	if err := castWeights(w, opts); err != nil {
		return nil, err
	}
	adapters, infos, closeAdapters, err := openAdapters(w, opts, cfg.NumHiddenLayers)
	if err != nil {
		return nil, err
	}
	defer closeAdapters()
	m, err := build(cfg, data, w)
	if err != nil {
		return nil, fmt.Errorf("cannot load %s model from %s: %w", cfg.ModelType, dir, err)
	}
	m.info.Format = "safetensors"
	m.info.CastTo = opts.Dtype
	m.info.Path = dir
	m.info.Artifact = newArtifact(files)
	return adapt(m, adapters, infos), nil
}

package models

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models/nn"
	"github.com/mlxgo/mlxgo/models/safetensors"
)

// ErrUnsupportedModel is wrapped by Load's error for an unknown model_type.
var ErrUnsupportedModel = errors.New("unsupported model type")

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
			return loadGGUF(path)
		}
		return nil, fmt.Errorf("cannot open model %s: want a model directory (config.json + safetensors) or a .gguf file", path)
	}
	return loadDir(path)
}

func loadDir(dir string) (Model, error) {
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
	m, err := build(cfg, data, nn.NewWeights(nn.Safetensors(set), cfg.Quantization))
	if err != nil {
		return nil, fmt.Errorf("cannot load %s model from %s: %w", cfg.ModelType, dir, err)
	}
	m.info.Format = "safetensors"
	m.info.Path = dir
	m.info.Artifact = newArtifact(files)
	return m, nil
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
	return &lm{arch: arch, w: w, layers: f.Layers, info: Info{
		ModelType:     cfg.ModelType,
		VocabSize:     cfg.VocabSize,
		ContextLength: f.ContextLength,
		NumLayers:     f.Layers,
		EOS:           append([]int(nil), cfg.EOSTokenID...),
		Dtype:         f.Dtype,
		Quantization:  cfg.Quantization.String(),
	}}, nil
}

func unsupported(modelType string) error {
	return fmt.Errorf("%w %q: supported model types are %s", ErrUnsupportedModel, modelType, strings.Join(Supported(), ", "))
}

// ErrTooLarge is a model whose weights do not fit the device's free memory.
var ErrTooLarge = errors.New("the model does not fit the GPU")

// fitsDevice refuses, before a byte is copied, weights larger than the GPU's
// free memory (the size on disk; quantized GGUF blocks convert to about as
// many bytes). MLX's CUDA arrays live in managed memory, which a card
// oversubscribes silently, paging over the bus, rather than failing. On the
// CPU, and where the GPU reports no free memory (Metal), nothing is checked.
func fitsDevice(weightBytes int64) error {
	d, err := mlx.DefaultDevice()
	if err != nil || d.Type != mlx.GPU {
		return nil
	}
	info, err := mlx.DeviceInfo(d)
	if err != nil {
		return nil
	}
	free, err := strconv.ParseInt(info["free_memory"], 10, 64)
	if err != nil || free <= 0 {
		return nil
	}
	return checkFits(weightBytes, free, info["device_name"])
}

func checkFits(weightBytes, free int64, device string) error {
	if weightBytes <= free {
		return nil
	}
	gib := func(n int64) string { return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30)) }
	return fmt.Errorf("%w: its weights take %s and the GPU (%s) has %s free; use a smaller or more quantized model, or MLXGO_DEVICE=cpu",
		ErrTooLarge, gib(weightBytes), device, gib(free))
}

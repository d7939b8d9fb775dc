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
		if _, ok := builders[head.ModelType]; !ok {
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
	build := builders[cfg.ModelType]
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
	src := map[string]tensorSource{}
	files := []string{cfgPath}
	for _, f := range set.Files {
		files = append(files, f.Path)
	}
	for _, name := range set.Names() {
		t, _ := set.Tensor(name)
		dt := t.DType.MLX()
		src[name] = tensorSource{shape: t.Shape, dtype: dt, load: func() (*mlx.Array, error) {
			if dt == "" {
				return nil, fmt.Errorf("tensor dtype %s is not supported", t.DType)
			}
			d, err := mlx.ParseDtype(dt)
			if err != nil {
				return nil, err
			}
			a := mlx.FromBytes(t.Data, d, t.Shape...)
			// MLX has copied the bytes: the mapped pages can leave memory now
			// rather than when the whole model is built.
			set.Release(name)
			return a, nil
		}}
	}
	d, err := build(cfg, newWeightSet(src, cfg.Quantization))
	if err != nil {
		return nil, fmt.Errorf("cannot load %s model from %s: %w", cfg.ModelType, dir, err)
	}
	d.info.Format = "safetensors"
	d.info.Path = dir
	d.info.Artifact = newArtifact(files)
	return d, nil
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

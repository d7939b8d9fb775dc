package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mlxgo/mlxgo/kv"
)

// KVConfigFile is the per-layer KV quantization a model may ship beside its
// weights, in the format of optiq (mlx-optiq's `optiq kv-cache` writes it,
// `optiq serve --kv-config` reads it): a JSON array of
// {"layer_idx": i, "bits": b, "group_size": g} (group_size defaults to 64).
// Listed layers are quantized to their bits from --quantized-kv-start on;
// layers not listed keep the activation dtype.
const KVConfigFile = "kv_config.json"

// ReadKVConfig reads KVConfigFile in the model directory (beside the file
// for a .gguf path); nil, nil when there is none.
func ReadKVConfig(modelPath string) (map[int]kv.LayerQuant, error) {
	dir := modelPath
	if st, err := os.Stat(modelPath); err == nil && !st.IsDir() {
		dir = filepath.Dir(modelPath)
	}
	path := filepath.Join(dir, KVConfigFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", path, err)
	}
	layers, err := ParseKVConfig(b)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", path, err)
	}
	return layers, nil
}

// ParseKVConfig parses the contents of a KVConfigFile.
func ParseKVConfig(b []byte) (map[int]kv.LayerQuant, error) {
	var entries []struct {
		LayerIdx  *int `json:"layer_idx"`
		Bits      *int `json:"bits"`
		GroupSize *int `json:"group_size"`
	}
	if err := json.Unmarshal(b, &entries); err != nil {
		return nil, fmt.Errorf("it must be a JSON array of {\"layer_idx\", \"bits\", \"group_size\"} objects: %w", err)
	}
	out := map[int]kv.LayerQuant{}
	for i, e := range entries {
		switch {
		case e.LayerIdx == nil || e.Bits == nil:
			return nil, fmt.Errorf("entry %d needs layer_idx and bits", i)
		case *e.LayerIdx < 0:
			return nil, fmt.Errorf("entry %d: layer_idx %d is negative", i, *e.LayerIdx)
		case !slices.Contains([]int{2, 3, 4, 5, 6, 8}, *e.Bits):
			return nil, fmt.Errorf("entry %d: bits %d is not one of MLX's affine widths 2, 3, 4, 5, 6, 8", i, *e.Bits)
		}
		lq := kv.LayerQuant{Bits: *e.Bits, GroupSize: kv.DefaultKVGroupSize}
		if e.GroupSize != nil {
			lq.GroupSize = *e.GroupSize
		}
		if !slices.Contains([]int{32, 64, 128}, lq.GroupSize) {
			return nil, fmt.Errorf("entry %d: group_size %d is not one of MLX's 32, 64, 128", i, lq.GroupSize)
		}
		if _, dup := out[*e.LayerIdx]; dup {
			return nil, fmt.Errorf("layer %d is listed twice", *e.LayerIdx)
		}
		out[*e.LayerIdx] = lq
	}
	if len(out) == 0 {
		return nil, errors.New("it lists no layers")
	}
	return out, nil
}

// WithKV returns m with every execution's KV caches made as o asks
// (--max-kv-size, --kv-bits and --kv-group-size, or kv_config.json's
// layers) and quantized from start cached tokens (--quantized-kv-start),
// the composition's kv_scheme saying so. Set it before WithBatch, which
// refuses quantized KV. A layer asked to quantize that keeps a rotating
// cache is an error now, not in the middle of a request.
func WithKV(m Model, o kv.Options, start int) (Model, error) {
	r, ok := m.Runner.(*MLXRunner)
	if !ok {
		return m, fmt.Errorf("cannot set the kv cache of %s: its runner (%T) is not an MLX runner", m.ID, m.Runner)
	}
	caches := layerCaches(r.Model, o)
	quantized := func(i int) bool { return o.KVBits > 0 }
	if len(o.Layers) > 0 {
		quantized = func(i int) bool { _, ok := o.Layers[i]; return ok }
		for i := range o.Layers {
			if i >= len(caches) {
				return m, fmt.Errorf("cannot use %s: it names layer %d, and %s has %d layers", KVConfigFile, i, m.ID, len(caches))
			}
		}
	}
	for i, c := range caches {
		if _, rot := c.(*kv.Rotating); rot && quantized(i) {
			return m, fmt.Errorf("cannot quantize the kv cache of layer %d of %s: it is a rotating cache (a sliding window, or --max-kv-size), which mlx-lm cannot quantize either", i, m.ID)
		}
	}
	if r.BatchRows > 1 && (o.KVBits > 0 || len(o.Layers) > 0) {
		return m, errBatchQuantizedKV(m.ID, r.BatchRows)
	}
	m.Runner = &MLXRunner{Model: r.Model, Cache: r.Cache, BatchRows: r.BatchRows, KV: o, QuantizedKVStart: start}
	scheme := kvScheme(r.Model.Info(), caches)
	if q := kvQuantization(len(caches), o, start); q != "" {
		scheme = strings.Replace(scheme, ", not quantized", ", "+q, 1)
	}
	m.Composition.KVScheme = scheme
	return m, nil
}

// kvQuantization describes the KV quantization of o ("" for none).
func kvQuantization(layers int, o kv.Options, start int) string {
	switch {
	case len(o.Layers) > 0:
		count := map[kv.LayerQuant]int{}
		var kinds []kv.LayerQuant
		for _, lq := range o.Layers {
			if count[lq] == 0 {
				kinds = append(kinds, lq)
			}
			count[lq]++
		}
		slices.SortFunc(kinds, func(a, b kv.LayerQuant) int { return b.Bits*1000 + b.GroupSize - a.Bits*1000 - a.GroupSize })
		var parts []string
		for _, k := range kinds {
			parts = append(parts, fmt.Sprintf("%d at %d-bit affine g%d", count[k], k.Bits, k.GroupSize))
		}
		if rest := layers - len(o.Layers); rest > 0 {
			parts = append(parts, fmt.Sprintf("%d not quantized", rest))
		}
		return fmt.Sprintf("quantized per layer by %s (of %d layers: %s) from %d cached tokens", KVConfigFile, layers, strings.Join(parts, ", "), start)
	case o.KVBits > 0:
		return fmt.Sprintf("quantized %d-bit affine g%d (mlx-lm's QuantizedKVCache) from %d cached tokens", o.KVBits, o.GroupSize(), start)
	}
	return ""
}

// errBatchQuantizedKV is the startup error for --batch with quantized KV:
// gen.Batch refuses quantized rows, and serve says so before any request.
func errBatchQuantizedKV(id string, rows int) error {
	return fmt.Errorf("cannot batch %s with a quantized kv cache: --batch %d cannot be combined with --kv-bits or %s (gen.Batch does not quantize rows); use --batch 1, or --kv-bits 0 to leave the cache unquantized", id, rows, KVConfigFile)
}

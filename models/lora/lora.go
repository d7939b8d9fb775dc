// Package lora reads LoRA adapters in mlx-lm's format: a directory holding
// adapter_config.json (what mlx_lm.lora trained: fine_tune_type, num_layers,
// lora_parameters) and adapters.safetensors (each adapted module's lora_a,
// lora_b and, for DoRA, m). It decides which modules an adapter adapts as
// mlx_lm.tuner.utils.linear_to_lora_layers does (mlx-lm 0.32.2) and hands
// nn the adapter (nn.AdapterSource), which applies it; it never runs MLX
// itself.
package lora

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models/nn"
	"github.com/mlxgo/mlxgo/models/safetensors"
)

// The files of an adapter directory, as mlx_lm.lora writes them.
const (
	ConfigFile  = "adapter_config.json"
	WeightsFile = "adapters.safetensors"
)

// Config is what adapter_config.json says of the adapter (mlx_lm.lora
// writes every training argument there; the rest is not read).
type Config struct {
	// FineTuneType is "lora" (the default) or "dora"; "full" is a
	// fine-tuned model, not an adapter, and is refused.
	FineTuneType string
	// NumLayers is how many of the last layers are adapted; 0, a negative
	// number or more than the model has: all of them (mlx-lm's
	// model.layers[-max(num_layers, 0):]).
	NumLayers int
	// Rank, Scale and Dropout are lora_parameters'; dropout is off at
	// inference (model.eval()).
	Rank    int
	Scale   float64
	Dropout float64
	// Keys are the modules adapted, relative to a layer ("self_attn.q_proj")
	// or from the model's top ("lm_head"); nil: every linear layer of an
	// adapted layer.
	Keys []string
}

// ParseConfig reads adapter_config.json, with mlx-lm's checks and the same
// required fields (num_layers, lora_parameters.rank and .scale).
func ParseConfig(data []byte) (Config, error) {
	var raw struct {
		FineTuneType *string         `json:"fine_tune_type"`
		NumLayers    *int            `json:"num_layers"`
		Params       json.RawMessage `json:"lora_parameters"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return Config{}, fmt.Errorf("cannot parse %s: %w", ConfigFile, err)
	}
	c := Config{FineTuneType: "lora"}
	if raw.FineTuneType != nil {
		c.FineTuneType = *raw.FineTuneType
	}
	switch c.FineTuneType {
	case "lora", "dora":
	case "full":
		return Config{}, fmt.Errorf("%s says fine_tune_type full: that is a fine-tuned model, not an adapter; load its weights as a model", ConfigFile)
	default:
		return Config{}, fmt.Errorf("%s: fine_tune_type %q, want lora or dora", ConfigFile, c.FineTuneType)
	}
	if raw.NumLayers == nil {
		return Config{}, fmt.Errorf("%s has no num_layers", ConfigFile)
	}
	c.NumLayers = *raw.NumLayers
	if len(raw.Params) == 0 || string(raw.Params) == "null" {
		return Config{}, fmt.Errorf("%s has no lora_parameters", ConfigFile)
	}
	var p map[string]json.RawMessage
	if err := json.Unmarshal(raw.Params, &p); err != nil {
		return Config{}, fmt.Errorf("%s: lora_parameters: %w", ConfigFile, err)
	}
	if _, ok := p["scale"]; !ok {
		hint := ""
		if _, ok := p["alpha"]; ok {
			hint = " (it has alpha: mlx-lm's LoRA config uses scale, not alpha)"
		}
		return Config{}, fmt.Errorf("%s: lora_parameters has no scale%s", ConfigFile, hint)
	}
	if _, ok := p["rank"]; !ok {
		return Config{}, fmt.Errorf("%s: lora_parameters has no rank", ConfigFile)
	}
	num := func(k string, v *float64) error {
		raw, ok := p[k]
		if !ok {
			return nil
		}
		if err := json.Unmarshal(raw, v); err != nil || math.IsNaN(*v) || math.IsInf(*v, 0) {
			return fmt.Errorf("%s: lora_parameters.%s is not a number", ConfigFile, k)
		}
		return nil
	}
	var rank float64
	for k, v := range map[string]*float64{"rank": &rank, "scale": &c.Scale, "dropout": &c.Dropout} {
		if err := num(k, v); err != nil {
			return Config{}, err
		}
	}
	if rank != math.Trunc(rank) || rank < 1 || rank > 1<<16 {
		return Config{}, fmt.Errorf("%s: lora_parameters.rank %v, want a whole number from 1", ConfigFile, rank)
	}
	c.Rank = int(rank)
	if c.Dropout < 0 || c.Dropout >= 1 {
		return Config{}, fmt.Errorf("%s: lora_parameters.dropout %v, want 0 <= dropout < 1", ConfigFile, c.Dropout)
	}
	if k, ok := p["keys"]; ok && string(k) != "null" {
		if err := json.Unmarshal(k, &c.Keys); err != nil {
			return Config{}, fmt.Errorf("%s: lora_parameters.keys is not a list of module names", ConfigFile)
		}
		if c.Keys == nil {
			c.Keys = []string{} // [] adapts nothing, unlike no keys
		}
	}
	return c, nil
}

// layerPath splits a module path inside a layer of the model's layer list
// ("model.layers.3.self_attn.q_proj") into the layer and the path in it.
var layerPath = regexp.MustCompile(`^(?:.*\.)?layers\.(\d+)\.(.+)$`)

// Adapts is linear_to_lora_layers's choice for a model of layers layers:
// a module inside one of the last NumLayers layers whose path in the layer
// is a key (any, without keys), or a module whose whole path is a key.
func (c Config) Adapts(path string, layers int) bool {
	if c.Keys != nil && slices.Contains(c.Keys, path) {
		return true
	}
	m := layerPath.FindStringSubmatch(path)
	if m == nil {
		return false
	}
	i, err := strconv.Atoi(m[1])
	if err != nil {
		return false
	}
	first := 0
	if c.NumLayers > 0 && c.NumLayers < layers {
		first = layers - c.NumLayers
	}
	return i >= first && (c.Keys == nil || slices.Contains(c.Keys, m[2]))
}

// Adapter is an adapter directory opened for loading: its config and its
// weights file, mapped until Close.
type Adapter struct {
	Name   string // what requests call it
	Dir    string
	Config Config
	file   *safetensors.File
}

// Open reads the adapter in dir: the config, and the weights file's header,
// whose every tensor must be a lora_a, lora_b (or, for DoRA, m) of the
// config's rank.
func Open(name, dir string) (*Adapter, error) {
	data, err := os.ReadFile(filepath.Join(dir, ConfigFile))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if _, serr := os.Stat(dir); serr != nil {
				return nil, fmt.Errorf("cannot open adapter %s: %w", name, serr)
			}
			return nil, fmt.Errorf("cannot open adapter %s: %s has no %s (want mlx-lm's adapter directory: %s + %s)", name, dir, ConfigFile, ConfigFile, WeightsFile)
		}
		return nil, fmt.Errorf("cannot open adapter %s: %w", name, err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("cannot open adapter %s: %w", name, err)
	}
	f, err := safetensors.Open(filepath.Join(dir, WeightsFile))
	if err != nil {
		return nil, fmt.Errorf("cannot open adapter %s: %w", name, err)
	}
	a := &Adapter{Name: name, Dir: dir, Config: cfg, file: f}
	if err := a.check(); err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot open adapter %s: %w", name, err)
	}
	return a, nil
}

// check is load_adapters' check of the file: only adapter parameters, of
// the config's rank.
func (a *Adapter) check() error {
	if len(a.file.Tensors) == 0 {
		return fmt.Errorf("%s holds no tensors", WeightsFile)
	}
	for _, t := range a.file.Tensors {
		dot := strings.LastIndexByte(t.Name, '.')
		leaf := t.Name[dot+1:]
		if dot <= 0 {
			leaf = ""
		}
		r := a.Config.Rank
		if (leaf == "lora_a" || leaf == "lora_b") && len(t.Shape) == 3 {
			return fmt.Errorf("%s: %s is a mixture-of-experts layer's update (mlx-lm's LoRASwitchLinear), which mlxgo does not apply", WeightsFile, t.Name)
		}
		var ok bool
		switch leaf {
		case "lora_a":
			ok = len(t.Shape) == 2 && t.Shape[1] == r
		case "lora_b":
			ok = len(t.Shape) == 2 && t.Shape[0] == r
		case "m":
			if a.Config.FineTuneType != "dora" {
				return fmt.Errorf("%s: %s is a DoRA magnitude, and %s says fine_tune_type %s", WeightsFile, t.Name, ConfigFile, a.Config.FineTuneType)
			}
			ok = len(t.Shape) == 1
		default:
			return fmt.Errorf("%s: %s is not an adapter parameter (lora_a, lora_b or m)", WeightsFile, t.Name)
		}
		if !ok {
			return fmt.Errorf("%s: %s has shape %v, which does not fit rank %d", WeightsFile, t.Name, t.Shape, r)
		}
		if t.DType.MLX() == "" {
			return fmt.Errorf("%s: %s has dtype %s, which MLX cannot load", WeightsFile, t.Name, t.DType)
		}
	}
	return nil
}

// Source is the adapter as nn applies it to a model of layers layers.
func (a *Adapter) Source(layers int) nn.AdapterSource {
	ts := map[string]nn.Tensor{}
	for _, t := range a.file.Tensors {
		ti := t
		ts[t.Name] = nn.Tensor{Shape: t.Shape, Dtype: t.DType.MLX(), Load: func() (*mlx.Array, error) {
			d, err := mlx.ParseDtype(ti.DType.MLX())
			if err != nil {
				return nil, err
			}
			return mlx.FromBytes(a.file.Data(ti), d, ti.Shape...), nil
		}}
	}
	cfg := a.Config
	return nn.AdapterSource{
		Name: a.Name, Scale: cfg.Scale, DoRA: cfg.FineTuneType == "dora", Tensors: ts,
		Adapts: func(path string) bool { return cfg.Adapts(path, layers) },
	}
}

// Close unmaps the weights file; call it once the model is built.
func (a *Adapter) Close() error { return a.file.Close() }

// Fingerprint is the artifact fingerprint of the adapter: sha256 over
// "name sha256\n" of its two files, as models.Artifact computes a model's.
func (a *Adapter) Fingerprint() (string, error) {
	h := sha256.New()
	for _, name := range []string{ConfigFile, WeightsFile} {
		f, err := os.Open(filepath.Join(a.Dir, name))
		if err != nil {
			return "", fmt.Errorf("cannot fingerprint adapter %s: %w", a.Name, err)
		}
		fh := sha256.New()
		_, err = io.Copy(fh, f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("cannot fingerprint adapter %s: %w", a.Name, err)
		}
		fmt.Fprintf(h, "%s %s\n", name, hex.EncodeToString(fh.Sum(nil)))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

package nn

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/mlxgo/mlxgo/mlx"
)

// Quantization is config.json's "quantization" as mlx-lm writes it: the
// default group size, bits and mode, and per-module entries keyed by module
// path that override it (an object) or keep the module unquantized (false).
type Quantization struct {
	GroupSize int
	Bits      int
	Mode      string
	// Modules maps a module path to its own scheme; nil means "not quantized".
	Modules map[string]*mlx.Quant
}

func (q *Quantization) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("quantization: %w", err)
	}
	*q = Quantization{Mode: "affine", Modules: map[string]*mlx.Quant{}}
	for k, v := range raw {
		var err error
		switch k {
		case "group_size":
			err = json.Unmarshal(v, &q.GroupSize)
		case "bits":
			err = json.Unmarshal(v, &q.Bits)
		case "mode":
			err = json.Unmarshal(v, &q.Mode)
		case "quant_method", "linear_class", "quantize_input":
			// written by other converters; the scheme is in the fields above
		default:
			if string(v) == "false" {
				q.Modules[k] = nil
				continue
			}
			var m struct {
				GroupSize int    `json:"group_size"`
				Bits      int    `json:"bits"`
				Mode      string `json:"mode"`
			}
			if err = json.Unmarshal(v, &m); err == nil {
				if m.Mode == "" {
					m.Mode = "affine"
				}
				q.Modules[k] = &mlx.Quant{GroupSize: m.GroupSize, Bits: m.Bits, Mode: m.Mode}
			}
		}
		if err != nil {
			return fmt.Errorf("quantization.%s: %w", k, err)
		}
	}
	return nil
}

func validQuant(gs, bits int, mode string) error {
	switch mode {
	case "affine":
	case "mxfp4":
		// MX FP4: 4-bit floats in groups of 32 sharing a power-of-two
		// (uint8) scale, no biases; MLX allows only this pair.
		if gs != 32 || bits != 4 {
			return fmt.Errorf("quantization mode mxfp4 needs bits 4 and group size 32, got %d and %d", bits, gs)
		}
		return nil
	default:
		return fmt.Errorf("quantization mode %q is not supported (affine, mxfp4)", mode)
	}
	switch bits {
	case 2, 3, 4, 5, 6, 8:
	default:
		return fmt.Errorf("quantization bits %d, want 2, 3, 4, 5, 6 or 8", bits)
	}
	switch gs {
	case 32, 64, 128:
	default:
		return fmt.Errorf("quantization group size %d, want 32, 64 or 128", gs)
	}
	return nil
}

// Validate checks the default scheme and every override.
func (q *Quantization) Validate() error {
	if err := validQuant(q.GroupSize, q.Bits, q.Mode); err != nil {
		return err
	}
	keys := make([]string, 0, len(q.Modules))
	for k := range q.Modules {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if m := q.Modules[k]; m != nil {
			if err := validQuant(m.GroupSize, m.Bits, m.Mode); err != nil {
				return fmt.Errorf("quantization of %s: %w", k, err)
			}
		}
	}
	return nil
}

// String describes the default scheme and the number of overrides.
func (q *Quantization) String() string {
	if q == nil {
		return "none"
	}
	s := fmt.Sprintf("%s %d-bit g%d", q.Mode, q.Bits, q.GroupSize)
	if n := len(q.Modules); n > 0 {
		s += fmt.Sprintf(" (+%d module overrides)", n)
	}
	return s
}

// moduleQuant decides how the module at path is stored, the way mlx-lm's
// load_model class_predicate does: an explicit entry wins; otherwise the
// module is quantized exactly when its .scales tensor exists, with group
// size and bits recovered from the shapes (infer_quant_config).
func moduleQuant(q *Quantization, path string, inDims int, ws *Weights) (*mlx.Quant, error) {
	hasScales := ws.Has(path + ".scales")
	if q == nil {
		if hasScales {
			return nil, fmt.Errorf("%s is quantized but config.json has no quantization", path)
		}
		return nil, nil
	}
	if m, ok := q.Modules[path]; ok {
		if m == nil && hasScales {
			return nil, fmt.Errorf("%s is quantized but config.json says it is not", path)
		}
		if m != nil && !hasScales {
			return nil, fmt.Errorf("cannot find %s.scales for quantized module %s", path, path)
		}
		return m, nil
	}
	if !hasScales {
		return nil, nil
	}
	sc, _ := ws.Shape(path + ".scales")
	w, ok := ws.Shape(path + ".weight")
	if !ok {
		return nil, fmt.Errorf("cannot find %s.weight", path)
	}
	if len(sc) == 0 || sc[len(sc)-1] == 0 || len(w) == 0 || inDims == 0 {
		return nil, fmt.Errorf("cannot infer the quantization of %s from shapes %v and %v", path, w, sc)
	}
	gs := inDims / sc[len(sc)-1]
	bits := w[len(w)-1] * 32 / inDims
	// infer_quant_config: only affine keeps its scales in the weight dtype;
	// uint8 scales are one of the float modes, told apart by bits and group.
	mode := "affine"
	if ws.src[path+".scales"].Dtype == "uint8" {
		if bits != 4 || gs != 32 {
			return nil, fmt.Errorf("cannot infer the quantization mode of %s: %d bits with group size %d and uint8 scales (only mxfp4 is supported)", path, bits, gs)
		}
		mode = "mxfp4"
	}
	if err := validQuant(gs, bits, mode); err != nil {
		return nil, fmt.Errorf("cannot infer the quantization of %s: %w", path, err)
	}
	return &mlx.Quant{GroupSize: gs, Bits: bits, Mode: mode}, nil
}

package models

import (
	"fmt"

	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models/nn"
)

// ComputeDtypes are the values LoadOptions.Dtype takes.
var ComputeDtypes = []string{"float32", "float16", "bfloat16"}

// castWeights applies opts.Dtype to w.
func castWeights(w *nn.Weights, opts LoadOptions) error {
	switch opts.Dtype {
	case "":
		return nil
	case "float32":
		w.CastTo(mlx.Float32)
	case "float16":
		w.CastTo(mlx.Float16)
	case "bfloat16":
		w.CastTo(mlx.BFloat16)
	default:
		return fmt.Errorf("cannot load the model as %q: the dtype is one of float32, float16, bfloat16", opts.Dtype)
	}
	return nil
}

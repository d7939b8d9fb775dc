package models

import (
	"fmt"

	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models/nn"
)

// Parallelism is how a model is split over processes: the composition
// records it. The zero value is a whole model in one process.
type Parallelism struct {
	Kind    string `json:"kind"`    // "tensor" (mlx-lm's model.shard), "pipeline" (its PipelineMixin); "" whole
	Size    int    `json:"size"`    // ranks in the group
	Rank    int    `json:"rank"`    // this process's rank
	Backend string `json:"backend"` // MLX's distributed backend ("ring", "nccl", ...)
}

// String is "tensor x2 over ring" or "none".
func (p Parallelism) String() string {
	if p.Kind == "" {
		return "none"
	}
	return fmt.Sprintf("%s x%d over %s", p.Kind, p.Size, p.Backend)
}

// LoadSharded is Load for one rank of a tensor-parallel group: every rank
// of g loads the same model and keeps its shard of the attention and MLP
// weights (nn/shard.go), as mlx-lm's sharded_load and model.shard(group)
// do. Architectures without a shard() in mlx-lm (all but llama, qwen2 and
// qwen3) are refused rather than loaded whole on every rank.
func LoadSharded(path string, opts LoadOptions, g *mlx.Group) (Model, error) {
	s := &nn.Shard{Group: g, Rank: g.Rank(), Size: g.Size()}
	var m Model
	err := nn.WithShard(s, func() (err error) {
		m, err = Load(path, opts)
		return err
	})
	if err != nil {
		return nil, err
	}
	if s.Size > 1 && !s.Taken() {
		t := m.Info().ModelType
		m.Close()
		return nil, fmt.Errorf("cannot shard a %s model: tensor parallelism covers llama, qwen2 and qwen3 (mlx-lm's model.shard)", t)
	}
	return m, nil
}

// LoadPipelined is Load for one rank of a pipeline-parallel group: every
// rank of g loads the same model but builds and reads only its own run of
// layers (nn/pipeline.go), as mlx-lm's sharded_load with a pipeline group
// and model.model.pipeline(group) do. Architectures without mlx-lm's
// PipelineMixin are refused rather than loaded whole on every rank.
func LoadPipelined(path string, opts LoadOptions, g *mlx.Group) (Model, error) {
	s := &nn.Stage{Group: g, Rank: g.Rank(), Size: g.Size()}
	var m Model
	err := nn.WithStage(s, func() (err error) {
		m, err = Load(path, opts)
		return err
	})
	if err != nil {
		return nil, err
	}
	if s.Size > 1 && !s.Taken() {
		t := m.Info().ModelType
		m.Close()
		return nil, fmt.Errorf("cannot pipeline a %s model: pipeline parallelism covers qwen2 and qwen3_moe (mlx-lm's PipelineMixin)", t)
	}
	return m, nil
}

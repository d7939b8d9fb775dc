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
	return loadRank(path, opts, s.Size, func(load func() error) error { return nn.WithShard(s, load) }, s.Taken,
		"cannot shard a %s model: tensor parallelism covers llama, qwen2 and qwen3 (mlx-lm's model.shard)")
}

// LoadPipelined is Load for one rank of a pipeline-parallel group: every
// rank of g loads the same model but builds and reads only its own run of
// layers (nn/pipeline.go), as mlx-lm's sharded_load with a pipeline group
// and model.model.pipeline(group) do. Architectures without mlx-lm's
// PipelineMixin are refused rather than loaded whole on every rank.
func LoadPipelined(path string, opts LoadOptions, g *mlx.Group) (Model, error) {
	s := &nn.Stage{Group: g, Rank: g.Rank(), Size: g.Size()}
	return loadRank(path, opts, s.Size, func(load func() error) error { return nn.WithStage(s, load) }, s.Taken,
		"cannot pipeline a %s model: pipeline parallelism covers qwen2, qwen3_moe, qwen3_next and qwen3_5 (mlx-lm's PipelineMixin)")
}

// loadRank loads the model inside with (which installs the rank's shard or
// stage for the architecture to take) and refuses, naming the architecture
// in refusal, a model whose architecture did not take it: a group of more
// than one rank must never run a model loaded whole on every rank.
func loadRank(path string, opts LoadOptions, size int, with func(func() error) error, taken func() bool, refusal string) (Model, error) {
	var m Model
	err := with(func() (err error) {
		m, err = Load(path, opts)
		return err
	})
	if err != nil {
		return nil, err
	}
	if size > 1 && !taken() {
		t := m.Info().ModelType
		m.Close()
		return nil, fmt.Errorf(refusal, t)
	}
	return m, nil
}

package nn

import (
	"fmt"
	"slices"

	"github.com/mlxgo/mlxgo/mlx"
)

// Tensor parallelism as mlx-lm's model.shard(group) does it (mlx.nn's
// shard_linear): each attention's q/k/v and each MLP's gate/up are
// all-to-sharded (rank r keeps its slice of the output rows: its heads, its
// part of the hidden width), o_proj and down_proj sharded-to-all (rank r
// keeps its slice of the input columns and the partial products are summed
// over the group by all_sum, before the bias). Embeddings, norms and the
// head stay whole on every rank.
//
// Each rank holds only its slice: a sharded tensor is loaded, cut and copied
// into an array of its own one tensor at a time (mlx-lm's _shard makes the
// same cut), so the full tensor lives only while its slice is copied out.

// Shard is this process's place in a tensor-parallel group.
type Shard struct {
	Group *mlx.Group
	Rank  int
	Size  int

	taken bool // an architecture sharded its layers (ShardAttention)
}

// Taken reports whether the architecture loaded under WithShard sharded its
// layers: one without a shard() in mlx-lm ignores the shard and loads whole.
func (s *Shard) Taken() bool { return s != nil && s.taken }

// loading is the shard of the load under way (LoadSharded), nil otherwise.
// A load is one call on the one MLX executor, so the shard belongs to that
// call; keeping it here leaves Load's signature and the one weights loader
// those of every other load.
var loading *Shard

// WithShard runs load with s as the shard every architecture sees through
// Weights.Shard; s nil or of size 1 is no sharding.
func WithShard(s *Shard, load func() error) error {
	if s != nil && s.Size <= 1 {
		s = nil
	}
	loading = s
	defer func() { loading = nil }()
	return load()
}

// Shard is the shard this load is for, nil when the model is whole. An
// architecture with a shard() in mlx-lm divides its heads and widths by
// Size and takes its layers through ShardAttention and ShardMLP.
func (ws *Weights) Shard() *Shard { return loading }

// ShardSize is the group's size, 1 when the model is whole.
func (ws *Weights) ShardSize() int {
	if loading == nil {
		return 1
	}
	return loading.Size
}

// shardTensor replaces tensor name by this rank's slice along axis (negative
// counts from the end), as mlx.nn's _shard splits it into Size equal parts.
func (ws *Weights) shardTensor(name string, axis int) {
	s := loading
	t, ok := ws.src[name]
	if ws.err != nil || s == nil || !ok || ws.dropped[name] {
		return
	}
	if axis < 0 {
		axis += len(t.Shape)
	}
	if axis < 0 || axis >= len(t.Shape) || t.Shape[axis]%s.Size != 0 {
		ws.Fail(fmt.Errorf("cannot shard weight %s of shape %v over %d ranks (axis %d does not divide)", name, t.Shape, s.Size, axis))
		return
	}
	shape := slices.Clone(t.Shape)
	part := shape[axis] / s.Size
	shape[axis] = part
	load := t.Load
	ws.src[name] = Tensor{Shape: shape, Dtype: t.Dtype, Load: func() (*mlx.Array, error) {
		a, err := load()
		if err != nil {
			return nil, err
		}
		defer a.Free()
		start, stop := make([]int, len(shape)), slices.Clone(t.Shape)
		start[axis], stop[axis] = s.Rank*part, (s.Rank+1)*part
		// A slice of rows is already contiguous, and MLX would keep it as a
		// view of the whole tensor: copy the slice's bytes out into an
		// array of its own, so the whole one is freed (the bits are the
		// same as mx.contiguous's).
		sl := mlx.Slice(a, start, stop)
		defer sl.Free()
		view := mlx.Contiguous(sl)
		defer view.Free()
		b, err := view.Bytes()
		if err != nil {
			return nil, err
		}
		out := mlx.FromBytes(b, a.Dtype(), shape...)
		return out, mlx.Eval(out)
	}}
}

// allToSharded marks module path's weights for AllToShardedLinear (and its
// quantized form): weight, scales and biases by rows, the bias with them.
func (ws *Weights) allToSharded(path string) {
	for _, n := range []string{".weight", ".scales", ".biases", ".bias"} {
		ws.shardTensor(path+n, 0)
	}
}

// shardedToAll marks module path's weights for ShardedToAllLinear: weight,
// scales and biases by columns; the bias is added whole after the sum.
func (ws *Weights) shardedToAll(path string) {
	for _, n := range []string{".weight", ".scales", ".biases"} {
		ws.shardTensor(path+n, -1)
	}
}

// ShardAttention shards the q_proj, k_proj, v_proj (all-to-sharded) and
// o_proj (sharded-to-all) under path, before they are taken; heads and
// kvHeads must divide by the group's size (mlx-lm's n_heads //= N).
func (ws *Weights) ShardAttention(path string, heads, kvHeads int) {
	s := loading
	if s == nil || ws.err != nil {
		return
	}
	if heads%s.Size != 0 || kvHeads%s.Size != 0 {
		ws.Fail(fmt.Errorf("cannot shard attention over %d ranks: %d query and %d key/value heads do not divide", s.Size, heads, kvHeads))
		return
	}
	s.taken = true
	for _, p := range []string{"q_proj", "k_proj", "v_proj"} {
		ws.allToSharded(path + p)
	}
	ws.shardedToAll(path + "o_proj")
}

// ShardMLP shards gate_proj and up_proj (all-to-sharded) and down_proj
// (sharded-to-all) under path.
func (ws *Weights) ShardMLP(path string, width int) {
	s := loading
	if s == nil || ws.err != nil {
		return
	}
	if width%s.Size != 0 {
		ws.Fail(fmt.Errorf("cannot shard the MLP over %d ranks: intermediate size %d does not divide", s.Size, width))
		return
	}
	ws.allToSharded(path + "gate_proj")
	ws.allToSharded(path + "up_proj")
	ws.shardedToAll(path + "down_proj")
}

// Layer is a module's forward pass.
type Layer interface {
	Apply(x *mlx.Array) *mlx.Array
}

// Reduced is ShardedToAllLinear (and QuantizedShardedToAllLinear): this
// rank's partial product, summed over the group, then the whole bias.
type Reduced struct {
	l *Linear
	g *mlx.Group
}

// Reduce makes l a sharded-to-all layer when the load is sharded; l as it is
// otherwise.
func (ws *Weights) Reduce(l *Linear) Layer {
	if loading == nil || l == nil {
		return l
	}
	return &Reduced{l: l, g: loading.Group}
}

// Apply is ShardedToAllLinear.__call__: x @ W.T, all_sum, + bias.
func (r *Reduced) Apply(x *mlx.Array) *mlx.Array {
	nb := *r.l
	nb.bias = nil
	y := mlx.AllSum(nb.Apply(x), r.g)
	if r.l.bias != nil {
		y = mlx.Add(y, r.l.bias)
	}
	return y
}

// ReduceMLP makes m's down projection sharded-to-all when the load is
// sharded; m as it is otherwise.
func (ws *Weights) ReduceMLP(m *MLP) Layer {
	if loading == nil || m == nil {
		return m
	}
	return &reducedMLP{m: m, down: &Reduced{l: m.down, g: loading.Group}}
}

type reducedMLP struct {
	m    *MLP
	down *Reduced
}

func (r *reducedMLP) Apply(x *mlx.Array) *mlx.Array {
	p := r.m.gateUp.Apply(x)
	return r.down.Apply(mlx.SwiGLU(p[0], p[1]))
}

package gen

import (
	"fmt"

	"github.com/mlxgo/mlxgo/mlx"
)

// keyed is the sampler chain drawing from a row's own random key rather
// than MLX's global sequence. It emulates MLX's KeySequence: seeding sets
// key = random.key(seed), and each draw splits key into (k0, k1), keeps k0
// and draws with k1. So a row seeded s makes the draws that mlx.Seed(s)
// followed by Generate makes, whatever other rows draw meanwhile.
type keyed struct {
	c   *chain
	key *mlx.Array // detached: it lives as long as the row
}

func newKeyed(c *chain, seed uint64) (*keyed, error) {
	k := mlx.Key(seed)
	if err := mlx.Eval(k); err != nil {
		return nil, fmt.Errorf("cannot make the row's random key: %w", err)
	}
	mlx.Detach(k)
	return &keyed{c: c, key: k}, nil
}

// Sample is chain.Sample with the row's next key.
func (k *keyed) Sample(logprobs *mlx.Array) *mlx.Array {
	for _, f := range k.c.filters {
		logprobs = f(logprobs, k.next)
	}
	scaled := mlx.Multiply(logprobs, mlx.ScalarLike(float32(1.0/k.c.temp), logprobs))
	return mlx.Categorical(scaled, -1, k.next())
}

// next is KeySequence::next: split, keep the first half, use the second.
func (k *keyed) next() *mlx.Array {
	pair := mlx.SplitKey(k.key, 2) // [2, 2]
	k0 := mlx.Reshape(mlx.Slice(pair, []int{0, 0}, []int{1, 2}), 2)
	k1 := mlx.Reshape(mlx.Slice(pair, []int{1, 0}, []int{2, 2}), 2)
	mlx.Detach(k0)
	k.key.Free()
	k.key = k0
	return k1
}

func (k *keyed) free() {
	k.key.Free()
	k.key = nil
}

package kv_test

import (
	"github.com/mlxgo/mlxgo/mlx"
)

// positions makes keys [1, 1, n, d] whose every element is its position
// (start, start+1, ...), so a fetched cache shows which tokens it holds.
func positions(start, n, d int) *mlx.Array {
	v := make([]float32, n*d)
	for i := range v {
		v[i] = float32(start + i/d)
	}
	return mlx.FromSlice(v, 1, 1, n, d)
}

// heldPositions reads back the position held in each slot of [1,1,L,d].
func heldPositions(a *mlx.Array) ([]int, error) {
	v, err := a.Float32s()
	if err != nil {
		return nil, err
	}
	d := a.Dim(3)
	out := make([]int, a.Dim(2))
	for i := range out {
		out[i] = int(v[i*d])
	}
	return out, nil
}

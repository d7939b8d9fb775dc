package kv

import "github.com/mlxgo/mlxgo/mlx"

// own takes a out of whatever scope made it: a cache's buffers outlive the
// step that wrote them and are freed by the cache itself.
func own(a *mlx.Array) { mlx.Detach(a) }

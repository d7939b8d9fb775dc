package main

import (
	"context"
	"fmt"

	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/native"
)

// loadMLX finds the native pack the one way DESIGN.md §2 defines (downloading
// and verifying it if needed), loads MLX from it and applies the runtime
// flags, for every command that runs a model. verify-native does the same
// steps itself, reporting each.
func loadMLX(ctx context.Context, rt *runtimeFlags) error {
	p, err := native.Resolve(ctx, native.Options{})
	if err != nil {
		return fmt.Errorf("cannot find the native pack: %w", err)
	}
	if _, err := mlx.LoadPack(p); err != nil {
		return err
	}
	return rt.apply()
}

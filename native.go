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
	if _, err := loadPack(p); err != nil {
		return err
	}
	return rt.apply()
}

// cudaReport is what loadPack loaded for a CUDA pack (verify-native prints it).
type cudaReport struct {
	Home      string              `json:"cuda_home,omitempty"`
	Libraries []mlx.LoadedLibrary `json:"libraries"`
}

// loadPack loads MLX from p. For the CUDA pack it first finds NVIDIA's
// libraries (native.FindCUDA, one search order) and loads each by absolute
// path, so that a missing one is an error naming it rather than a failed
// dlopen of libmlx.so, points MLX's kernel JIT at the CUDA headers when the
// user has not (CUDA_HOME), and makes the GPU the default device.
func loadPack(p *native.Pack) (*cudaReport, error) {
	var rep *cudaReport
	if p.NeedsCUDA() {
		cu, err := native.FindCUDA(native.CUDASearch{GPU: native.DetectGPU()})
		if err != nil {
			return nil, fmt.Errorf("cannot load the native pack %s: %w", p.Dir, err)
		}
		libs := []mlx.Library{{Soname: "libcuda.so.1", Path: cu.LibCUDA, Hint: "the NVIDIA driver's library"}}
		for _, l := range cu.Libs {
			if l.Path == "" && !l.Needed {
				continue // a dependency found nowhere: its dependant's own search may still find it
			}
			libs = append(libs, mlx.Library{Soname: l.Soname, Path: l.Path, Hint: l.MissingHint()})
		}
		loaded, err := mlx.Preload(libs)
		if err != nil {
			return nil, fmt.Errorf("cannot load the native pack %s: %w", p.Dir, err)
		}
		rep = &cudaReport{Home: cu.Home, Libraries: loaded}
		if cu.Home != "" {
			if err := mlx.SetCEnv("CUDA_HOME", cu.Home); err != nil {
				return nil, err
			}
		}
	}
	if err := mlx.Load(p.ShimPath()); err != nil {
		return nil, fmt.Errorf("cannot load the native pack %s: %w", p.Dir, err)
	}
	if rep != nil {
		if err := mlx.Do(func() error { return mlx.SetDefaultDevice(mlx.Device{Type: mlx.GPU}) }); err != nil {
			return nil, fmt.Errorf("cannot make the GPU the default device: %w", err)
		}
	}
	return rep, nil
}

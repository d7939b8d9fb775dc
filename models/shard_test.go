package models_test

import (
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
	"github.com/mlxgo/mlxgo/models/nn"
	"github.com/mlxgo/mlxgo/models/safetensors"
)

// A tensor-parallel load keeps only its slice of each sharded weight: the
// active memory of a rank's model is the whole model's less (1 - 1/N) of
// the attention and MLP projections, to the byte, with no array left over.
// (No forward pass runs, so the shard needs no group.) MLX's own kernels:
// mlxgo's repack quantized weights into a layout whose size is not the
// checkpoint's.
func TestShardedLoadMemory(t *testing.T) {
	mlxtest.Need(t)
	oracleCases(t) // the tiny models exist
	mlxtest.Do(t, func() error { return mlx.SetCPUKernels(mlx.KernelsMLX, 1, "") })
	defer mlxtest.Do(t, func() error { return mlx.SetCPUKernels(mlxtest.Kernels(), mlxtest.Threads(), "") })
	proj := regexp.MustCompile(`\.(q|k|v|o|gate|up|down)_proj\.`)
	for _, tc := range []struct {
		model string
		n     int
	}{{"llama-f32", 2}, {"qwen3-q4g64", 2}, {"qwen2-q4g32", 2}, {"qwen3-bf16", 2}} {
		t.Run(tc.model, func(t *testing.T) {
			dir := filepath.Join(oracleDir(), "models", tc.model)
			set, err := safetensors.OpenDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var sharded int64
			for _, name := range set.Names() {
				if ti, _ := set.Tensor(name); proj.MatchString(name) {
					sharded += int64(len(ti.Data))
				}
			}
			set.Close()
			mlxtest.Do(t, func() error {
				active := func(n int) (uint64, int64) {
					// MLX's allocator hands out cached buffers that may be
					// larger than asked: measure from an empty cache.
					if err := mlx.ClearCache(); err != nil {
						t.Fatal(err)
					}
					before, err := mlx.Memory()
					if err != nil {
						t.Fatal(err)
					}
					var m models.Model
					if err := nn.WithShard(&nn.Shard{Size: n}, func() (err error) {
						m, err = models.Load(dir, models.LoadOptions{})
						return err
					}); err != nil {
						t.Fatal(err)
					}
					defer m.Close()
					mem, err := mlx.Memory()
					if err != nil {
						t.Fatal(err)
					}
					return mem.Active - before.Active, mlx.LiveArrays()
				}
				whole, wholeLive := active(1)
				part, partLive := active(tc.n)
				want := whole - uint64(sharded-sharded/int64(tc.n))
				if part != want || partLive != wholeLive {
					t.Errorf("rank of %d: %d bytes in %d arrays, want %d (whole %d in %d, projections %d)", tc.n, part, partLive, want, whole, wholeLive, sharded)
				}
				return nil
			})
		})
	}
}

// TestPipelinedLoadMemory: a pipeline stage holds the whole model less the
// other ranks' layers, to the byte: rank r of 2 builds only its layers
// (nn.Stage) and never reads the others' tensors. Float32 models, whose
// arrays are the checkpoint's bytes; qwen3_moe's 3 layers split 2 + 1.
func TestPipelinedLoadMemory(t *testing.T) {
	mlxtest.Need(t)
	oracleCases(t) // the tiny models exist
	mlxtest.Do(t, func() error { return mlx.SetCPUKernels(mlx.KernelsMLX, 1, "") })
	defer mlxtest.Do(t, func() error { return mlx.SetCPUKernels(mlxtest.Kernels(), mlxtest.Threads(), "") })
	layer := regexp.MustCompile(`(?:^|\.)layers\.(\d+)\.`)
	for _, model := range []string{"qwen2-f32", "qwen3_moe-f32"} {
		t.Run(model, func(t *testing.T) {
			dir := filepath.Join(oracleDir(), "models", model)
			set, err := safetensors.OpenDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			perLayer := map[int]int64{}
			for _, name := range set.Names() {
				if m := layer.FindStringSubmatch(name); m != nil {
					ti, _ := set.Tensor(name)
					i, _ := strconv.Atoi(m[1])
					perLayer[i] += int64(len(ti.Data))
				}
			}
			set.Close()
			mlxtest.Do(t, func() error {
				active := func(s *nn.Stage) uint64 {
					if err := mlx.ClearCache(); err != nil {
						t.Fatal(err)
					}
					before, err := mlx.Memory()
					if err != nil {
						t.Fatal(err)
					}
					var m models.Model
					if err := nn.WithStage(s, func() (err error) {
						m, err = models.Load(dir, models.LoadOptions{})
						return err
					}); err != nil {
						t.Fatal(err)
					}
					defer m.Close()
					if s != nil && m.Info().NumLayers != s.End-s.Start {
						t.Errorf("rank %d: %d layers, want %d", s.Rank, m.Info().NumLayers, s.End-s.Start)
					}
					mem, err := mlx.Memory()
					if err != nil {
						t.Fatal(err)
					}
					return mem.Active - before.Active
				}
				whole := active(nil)
				for r := range 2 {
					s := &nn.Stage{Rank: r, Size: 2}
					got := active(s)
					want := whole
					for i, b := range perLayer {
						if !s.Has(i) {
							want -= uint64(b)
						}
					}
					t.Logf("rank %d of 2 (layers %d-%d): %d of %d bytes", r, s.Start, s.End-1, got, whole)
					if got != want || s.End-s.Start == len(perLayer) {
						t.Errorf("rank %d of 2 (layers %d-%d): %d bytes, want %d (whole %d)", r, s.Start, s.End-1, got, want, whole)
					}
				}
				return nil
			})
		})
	}
}

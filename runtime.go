package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
	"github.com/mlxgo/mlxgo/native"
)

// runtimeUsage is the flags text every model-running command shares.
const runtimeUsage = `	--kernels mlxgo|mlx|fast  CPU kernels: mlxgo's (vectorized, multi-threaded,
	                          bit-identical to MLX's), MLX's own, or fast:
	                          mlxgo's with int8 activations in 4- and 8-bit
	                          matmuls, as llama.cpp (not bit-identical: L3)
	                          (default mlxgo; $MLXGO_KERNELS)
	--threads N               threads for the CPU kernels (default: physical
	                          cores; $MLXGO_THREADS)
	--dtype float32|float16|bfloat16
	                          load every floating-point weight as this dtype,
	                          so activations run in it (mlx-lm's
	                          model.set_dtype); default: the checkpoint's
	--pull                    pull -m ORG/NAME[@REV] from the hub first when it
	                          is not in the cache (see mlxgo pull -h)
`

// runtimeFlags are the settings of the runtime itself rather than of one
// request: which CPU kernels run and on how many threads.
type runtimeFlags struct {
	kernels string
	threads int
	dtype   string
}

func (r *runtimeFlags) register(fs *cmdFlags) {
	fs.StringVar(&r.kernels, "kernels", "", "")
	fs.IntVar(&r.threads, "threads", 0, "")
	fs.StringVar(&r.dtype, "dtype", "", "")
	fs.BoolVar(&modelFetch.pull, "pull", false, "") // read by resolveModel
}

// resolve fills what the flags left unset from the environment and the
// machine, and checks the result.
func (r *runtimeFlags) resolve(getenv func(string) string) error {
	if r.kernels == "" {
		r.kernels = getenv("MLXGO_KERNELS")
	}
	if r.kernels == "" {
		r.kernels = mlx.KernelsMLXGO
	}
	if r.kernels != mlx.KernelsMLXGO && r.kernels != mlx.KernelsMLX && r.kernels != mlx.KernelsFast {
		return usagef("--kernels must be %s, %s or %s, not %q", mlx.KernelsMLXGO, mlx.KernelsMLX, mlx.KernelsFast, r.kernels)
	}
	if r.threads < 0 {
		return usagef("--threads must be positive")
	}
	if r.dtype != "" && !slices.Contains(models.ComputeDtypes, r.dtype) {
		return usagef("--dtype must be one of %s, not %q", strings.Join(models.ComputeDtypes, ", "), r.dtype)
	}
	if r.threads == 0 {
		if s := getenv("MLXGO_THREADS"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n <= 0 {
				return usagef("MLXGO_THREADS=%q is not a positive number", s)
			}
			r.threads = n
		}
	}
	if r.threads == 0 {
		r.threads = max(1, native.CPUFeatures().PhysicalCores)
	}
	return nil
}

// load is o with the runtime's dtype: the options a model is loaded with.
func (r *runtimeFlags) load(o models.LoadOptions) models.LoadOptions {
	o.Dtype = r.dtype
	return o
}

// apply selects the kernels; it runs once MLX is loaded, before any graph.
func (r *runtimeFlags) apply() error {
	if err := mlx.Do(func() error { return mlx.SetCPUKernels(r.kernels, r.threads, "") }); err != nil {
		return fmt.Errorf("cannot select the CPU kernels: %w", err)
	}
	return nil
}

package models

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/mlxgo/mlxgo/mlx"
)

// ErrTooLarge is a model whose weights do not fit the device's free memory.
var ErrTooLarge = errors.New("the model does not fit the GPU")

// fitsDevice refuses, before a byte is copied, weights larger than the GPU's
// free memory (the size on disk; quantized GGUF blocks convert to about as
// many bytes). MLX's CUDA arrays live in managed memory, which a card
// oversubscribes silently, paging over the bus, rather than failing. On the
// CPU, and where the GPU reports no free memory (Metal), nothing is checked.
func fitsDevice(weightBytes int64) error {
	d, err := mlx.DefaultDevice()
	if err != nil || d.Type != mlx.GPU {
		return nil
	}
	info, err := mlx.DeviceInfo(d)
	if err != nil {
		return nil
	}
	free, err := strconv.ParseInt(info["free_memory"], 10, 64)
	if err != nil || free <= 0 {
		return nil
	}
	return checkFits(weightBytes, free, info["device_name"])
}

func checkFits(weightBytes, free int64, device string) error {
	if weightBytes <= free {
		return nil
	}
	gib := func(n int64) string { return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30)) }
	return fmt.Errorf("%w: its weights take %s and the GPU (%s) has %s free; use a smaller or more quantized model, or MLXGO_DEVICE=cpu",
		ErrTooLarge, gib(weightBytes), device, gib(free))
}

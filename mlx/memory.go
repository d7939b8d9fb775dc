package mlx

// MemoryStats are MLX's allocator figures in bytes.
type MemoryStats struct {
	Active uint64 // in use by arrays
	Peak   uint64 // most Active since start or ResetPeakMemory
	Cache  uint64 // freed but kept for reuse
	Limit  uint64 // the memory limit that evaluation tries to stay under
}

// Memory reads the allocator figures.
func Memory() (MemoryStats, error) {
	if err := ready(); err != nil {
		return MemoryStats{}, err
	}
	var a, p, c, l uintptr
	for _, q := range []struct {
		name string
		f    func(*uintptr) int32
		v    *uintptr
	}{
		{"get_active_memory", fn.memoryActive, &a},
		{"get_peak_memory", fn.memoryPeak, &p},
		{"get_cache_memory", fn.memoryCache, &c},
		{"get_memory_limit", fn.memoryLimit, &l},
	} {
		if err := check(q.name, q.f(q.v)); err != nil {
			return MemoryStats{}, err
		}
	}
	return MemoryStats{Active: uint64(a), Peak: uint64(p), Cache: uint64(c), Limit: uint64(l)}, nil
}

// ResetPeakMemory sets the peak figure back to zero.
func ResetPeakMemory() error {
	if err := ready(); err != nil {
		return err
	}
	return check("reset_peak_memory", fn.memoryResetPeak())
}

func setLimit(name string, f func(uintptr, *uintptr) int32, limit uint64) (uint64, error) {
	if err := ready(); err != nil {
		return 0, err
	}
	var prev uintptr
	err := check(name, f(uintptr(limit), &prev))
	return uint64(prev), err
}

// SetMemoryLimit sets the memory limit and returns the previous one.
func SetMemoryLimit(limit uint64) (uint64, error) {
	return setLimit("set_memory_limit", fn.setMemoryLimit, limit)
}

// SetCacheLimit sets how much freed memory MLX keeps for reuse (0: none) and
// returns the previous limit.
func SetCacheLimit(limit uint64) (uint64, error) {
	return setLimit("set_cache_limit", fn.setCacheLimit, limit)
}

// SetWiredLimit sets the wired (resident) memory limit, which only Metal on
// macOS 15+ uses, and returns the previous one.
func SetWiredLimit(limit uint64) (uint64, error) {
	return setLimit("set_wired_limit", fn.setWiredLimit, limit)
}

// ClearCache returns MLX's cached buffers to the system.
func ClearCache() error {
	if err := ready(); err != nil {
		return err
	}
	return check("clear_cache", fn.clearCache())
}

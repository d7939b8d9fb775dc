package mlx

import (
	"fmt"
	"strings"
	"unsafe"
)

// DeviceType is CPU or GPU (Metal on macOS, CUDA on Linux).
type DeviceType int32

const (
	CPU DeviceType = 0
	GPU DeviceType = 1
)

func (t DeviceType) String() string {
	switch t {
	case CPU:
		return "cpu"
	case GPU:
		return "gpu"
	}
	return fmt.Sprintf("device(%d)", int32(t))
}

// Device is one MLX device.
type Device struct {
	Type  DeviceType
	Index int
}

func (d Device) String() string { return fmt.Sprintf("%s:%d", d.Type, d.Index) }

// Stream is an MLX stream: a queue of work on one device. MLX's Stream is
// exactly (index, device), so it needs no handle or release.
type Stream struct {
	Index  int
	Device Device
}

func ready() error {
	if !loaded.Load() {
		return ErrNotLoaded
	}
	return nil
}

// DefaultDevice is the device ops run on.
func DefaultDevice() (Device, error) {
	if err := ready(); err != nil {
		return Device{}, err
	}
	var t, i int32
	if err := check("default_device", fn.defaultDevice(&t, &i)); err != nil {
		return Device{}, err
	}
	return Device{DeviceType(t), int(i)}, nil
}

// SetDefaultDevice makes d the device ops run on.
func SetDefaultDevice(d Device) error {
	if err := ready(); err != nil {
		return err
	}
	return check("set_default_device", fn.setDefaultDevice(int32(d.Type), int32(d.Index)))
}

// DeviceAvailable reports whether this MLX build can run on devices of type t.
func DeviceAvailable(t DeviceType) (bool, error) {
	if err := ready(); err != nil {
		return false, err
	}
	var v int32
	err := check("is_available", fn.deviceAvailable(int32(t), &v))
	return v == 1, err
}

// DeviceCount is the number of devices of type t.
func DeviceCount(t DeviceType) (int, error) {
	if err := ready(); err != nil {
		return 0, err
	}
	var v int32
	err := check("device_count", fn.deviceCount(int32(t), &v))
	return int(v), err
}

// DeviceInfo is MLX's description of d (device_name, architecture,
// total memory, ...; keys vary by backend), with values as text.
func DeviceInfo(d Device) (map[string]string, error) {
	if err := ready(); err != nil {
		return nil, err
	}
	var p *byte
	if err := check("device_info", fn.deviceInfo(int32(d.Type), int32(d.Index), &p)); err != nil {
		return nil, err
	}
	info := map[string]string{}
	for _, line := range strings.Split(cString(p), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			info[k] = v
		}
	}
	return info, nil
}

// cString copies a NUL-terminated C string that the shim keeps alive until
// the next call on this thread.
func cString(p *byte) string {
	if p == nil {
		return ""
	}
	var n int
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// Backends reports which GPU backends this libmlx was built with and finds
// usable: Metal (macOS) and CUDA (Linux).
func Backends() (metal, cuda bool, err error) {
	if err := ready(); err != nil {
		return false, false, err
	}
	var m, c int32
	err = check("backends", fn.backends(&m, &c))
	return m == 1, c == 1, err
}

// DefaultStream is the executor thread's default stream on d.
func DefaultStream(d Device) (Stream, error) {
	if err := ready(); err != nil {
		return Stream{}, err
	}
	var s int32
	err := check("default_stream", fn.defaultStream(int32(d.Type), int32(d.Index), &s))
	return Stream{int(s), d}, err
}

// NewStream makes a new stream on d.
func NewStream(d Device) (Stream, error) {
	if err := ready(); err != nil {
		return Stream{}, err
	}
	var s int32
	err := check("new_stream", fn.newStream(int32(d.Type), int32(d.Index), &s))
	return Stream{int(s), d}, err
}

// SetDefaultStream makes s the stream that ops on its device are queued on
// (mlx-lm's `with mx.stream(generation_stream)`).
func SetDefaultStream(s Stream) error {
	if err := ready(); err != nil {
		return err
	}
	return check("set_default_stream", fn.setDefaultStream(int32(s.Index), int32(s.Device.Type), int32(s.Device.Index)))
}

// Synchronize waits for everything queued on s.
func (s Stream) Synchronize() error {
	if err := ready(); err != nil {
		return err
	}
	return check("synchronize", fn.synchronize(1, int32(s.Index), int32(s.Device.Type), int32(s.Device.Index)))
}

// Synchronize waits for everything queued on the default stream.
func Synchronize() error {
	if err := ready(); err != nil {
		return err
	}
	return check("synchronize", fn.synchronize(0, 0, 0, 0))
}

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

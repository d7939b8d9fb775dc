package native

import (
	"fmt"
	"runtime"
	"strings"
)

// MLXVersion is the MLX release every pack of this mlxgo is built from; the
// Python oracle venv pins the same version so that L1 comparisons run on the
// same libmlx.so.
const MLXVersion = "0.32.4"

// PackVersion names the pack this binary expects: the MLX version plus a pack
// revision. Bump the revision whenever the shim's C ABI or the pack layout
// changes, so that a cached pack from an older build is never mistaken for
// this one (the cache directory and release URL both carry it).
const PackVersion = MLXVersion + "-26"

// Device values for MLXGO_DEVICE.
const (
	DeviceCPU = "cpu"
	DeviceGPU = "gpu"
)

// Variant is one kind of native pack. The table below is data: adding a
// platform is a new row (plus its release digest in release_digests.go),
// not new code.
type Variant struct {
	Name    string   // "linux-amd64-cpu"; also the suffix of the cache directory and the tarball
	OS      string   // runtime.GOOS it runs on
	Arch    string   // runtime.GOARCH it runs on
	Devices []string // MLXGO_DEVICE values it serves; the first is the device it is chosen for
	Wheel   string   // PyPI wheel libmlx.so comes from, pinned to MLXVersion
	// WheelPaths are the wheel-relative files and directories copied into the
	// pack, keeping the wheel's layout because libmlx.so's RPATH (and the
	// CUDA build's JIT include paths) are relative to it.
	WheelPaths []string
	// MinNVIDIADriver is the lowest NVIDIA kernel driver major version the
	// pack's CUDA runtime accepts; 0 when the pack needs no NVIDIA driver.
	MinNVIDIADriver int
	// Built is false for variants that are documented but not produced by this
	// repository's build yet; they are never chosen, and forcing one is an error.
	Built bool
	// ReleaseURL is where the release tarball is downloaded from when
	// MLXGO_NATIVE_URL is unset; {version} and {variant} are filled in.
	ReleaseURL string
}

// releaseURL is the GitHub release layout: one tag per pack version.
const releaseURL = "https://github.com/mlxgo/mlxgo/releases/download/native-v{version}/mlxgo-native-{version}-{variant}.tar.gz"

// Variants is every pack mlxgo knows of, in order of preference when more
// than one could run (accelerated first).
var Variants = []Variant{
	{
		Name: "linux-amd64-cuda13", OS: "linux", Arch: "amd64", Devices: []string{DeviceGPU},
		Wheel: "mlx-cuda-13",
		// mlx/include holds MLX's, CCCL's, CUTLASS's and CuTe's headers, which
		// libmlx.so hands NVRTC when it JIT-compiles kernels; the NVIDIA
		// libraries are not bundled (native/cuda.go finds them).
		WheelPaths: []string{"mlx/lib/libmlx.so", "mlx/include", "mlx_cuda_13.libs"},
		// CUDA 13 user-space libraries need the R580 kernel driver or newer.
		MinNVIDIADriver: 580,
		Built:           true,
		ReleaseURL:      releaseURL,
	},
	{
		Name: "linux-amd64-cpu", OS: "linux", Arch: "amd64", Devices: []string{DeviceCPU},
		Wheel:      "mlx-cpu",
		WheelPaths: []string{"mlx/lib/libmlx.so", "mlx_cpu.libs"},
		Built:      true,
		ReleaseURL: releaseURL,
	},
	{
		// Metal packs serve both devices: MLX on Apple Silicon always has a CPU
		// stream beside the GPU one. Built on a Mac, not here.
		Name: "darwin-arm64-metal", OS: "darwin", Arch: "arm64", Devices: []string{DeviceGPU, DeviceCPU},
		Wheel:      "mlx-metal",
		WheelPaths: []string{"mlx/lib"},
		Built:      false,
		ReleaseURL: releaseURL,
	},
}

// LookupVariant returns the table row with the given name.
func LookupVariant(name string) (Variant, bool) {
	for _, v := range Variants {
		if v.Name == name {
			return v, true
		}
	}
	return Variant{}, false
}

// Serves reports whether the variant can run on the given device.
func (v Variant) Serves(device string) bool {
	for _, d := range v.Devices {
		if d == device {
			return true
		}
	}
	return false
}

// URL is the variant's release URL for a pack version.
func (v Variant) URL(packVersion string) string {
	return strings.NewReplacer("{version}", packVersion, "{variant}", v.Name).Replace(v.ReleaseURL)
}

// TarballName is the file name of the variant's pack tarball.
func (v Variant) TarballName(packVersion string) string {
	return "mlxgo-native-" + packVersion + "-" + v.Name + ".tar.gz"
}

// Host describes what variant choice depends on; tests build their own.
type Host struct {
	OS, Arch string
	GPU      GPUInfo
}

// CurrentHost inspects the machine this process runs on.
func CurrentHost() Host {
	return Host{OS: runtime.GOOS, Arch: runtime.GOARCH, GPU: DetectGPU()}
}

// ChooseVariant picks the pack for host. device is MLXGO_DEVICE: "" chooses
// automatically (an accelerated pack when the host can run it and it is
// built, else CPU), "cpu" or "gpu" force it and fail clearly when impossible.
func ChooseVariant(host Host, device string) (Variant, error) {
	switch device {
	case "", DeviceCPU, DeviceGPU:
	default:
		return Variant{}, fmt.Errorf("cannot choose a native pack: MLXGO_DEVICE=%q, want cpu or gpu", device)
	}
	var reasons []string
	for _, v := range Variants {
		if v.OS != host.OS || v.Arch != host.Arch {
			continue
		}
		if device != "" && !v.Serves(device) {
			continue
		}
		if why := v.unusable(host); why != "" {
			reasons = append(reasons, v.Name+": "+why)
			continue
		}
		return v, nil
	}
	what := "any device"
	if device != "" {
		what = "MLXGO_DEVICE=" + device
	}
	if len(reasons) == 0 {
		return Variant{}, fmt.Errorf("cannot choose a native pack: none exists for %s/%s with %s", host.OS, host.Arch, what)
	}
	return Variant{}, fmt.Errorf("cannot choose a native pack for %s/%s with %s: %s",
		host.OS, host.Arch, what, strings.Join(reasons, "; "))
}

// unusable says why v cannot run on host, or "" when it can.
func (v Variant) unusable(host Host) string {
	if !v.Built {
		return "not built yet"
	}
	if v.MinNVIDIADriver > 0 {
		switch {
		case host.GPU.DriverMajor == 0 && host.GPU.LibCUDA == "":
			return "no NVIDIA driver found (no " + nvidiaVersionFile + ", no libcuda.so.1)"
		case host.GPU.DriverMajor == 0:
			return "no NVIDIA driver found (no " + nvidiaVersionFile + ")"
		case host.GPU.DriverMajor < v.MinNVIDIADriver:
			return fmt.Sprintf("needs NVIDIA driver >= %d, found %s", v.MinNVIDIADriver, host.GPU.DriverVersion)
		case host.GPU.LibCUDA == "":
			return "libcuda.so.1 not found"
		}
	}
	return ""
}

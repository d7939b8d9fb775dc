package native

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"

	"github.com/klauspost/cpuid/v2"
)

// CPUInfo summarises the host CPU for verify-native and for bug reports.
// MLX's Linux CPU backend is largely scalar, so these features explain
// performance rather than pick a pack; they are reported, not required.
type CPUInfo struct {
	Vendor         string   `json:"vendor"`
	Brand          string   `json:"brand"`
	Family         int      `json:"family"`
	Model          int      `json:"model"`
	PhysicalCores  int      `json:"physical_cores"`
	LogicalCores   int      `json:"logical_cores"`
	ThreadsPerCore int      `json:"threads_per_core"`
	X64Level       int      `json:"x64_level,omitempty"` // 1–4 on amd64, 0 elsewhere
	Key            []string `json:"key_features"`        // the features that matter for inference, in a fixed order
	All            []string `json:"all_features"`        // every feature cpuid knows of, sorted
}

// keyFeatures are the SIMD/matrix extensions worth showing on one line, in
// the order a reader expects them (oldest first).
var keyFeatures = []cpuid.FeatureID{
	cpuid.SSE4, cpuid.SSE42, cpuid.AVX, cpuid.F16C, cpuid.FMA3, cpuid.AVX2,
	cpuid.AVX512F, cpuid.AVX512BW, cpuid.AVX512VL, cpuid.AVX512VNNI,
	cpuid.AVX512BF16, cpuid.AVX512FP16, cpuid.AVXVNNI, cpuid.AMXBF16, cpuid.AMXINT8,
	cpuid.ASIMD, cpuid.ASIMDHP, cpuid.ASIMDDP, cpuid.SVE, cpuid.SVE2,
}

// CPUFeatures reports the host CPU as cpuid sees it.
func CPUFeatures() CPUInfo {
	c := cpuid.CPU
	info := CPUInfo{
		Vendor:         c.VendorString,
		Brand:          strings.TrimSpace(c.BrandName),
		Family:         c.Family,
		Model:          c.Model,
		PhysicalCores:  c.PhysicalCores,
		LogicalCores:   c.LogicalCores,
		ThreadsPerCore: c.ThreadsPerCore,
		All:            c.FeatureSet(),
		Key:            []string{},
	}
	if runtime.GOARCH == "amd64" {
		info.X64Level = c.X64Level()
	}
	for _, f := range keyFeatures {
		if c.Supports(f) {
			info.Key = append(info.Key, f.String())
		}
	}
	return info
}

// String is the one-line summary verify-native prints.
func (c CPUInfo) String() string {
	level := ""
	if c.X64Level > 0 {
		level = fmt.Sprintf(", x86-64-v%d", c.X64Level)
	}
	return fmt.Sprintf("%s (%s), %d cores / %d threads%s: %s",
		c.Brand, c.Vendor, c.PhysicalCores, c.LogicalCores, level, strings.Join(c.Key, " "))
}

// GPUInfo is what the host offers a CUDA pack: the kernel driver's version and
// whether the user-space driver library can be found. MLX's CUDA build cannot
// even be loaded without libcuda.so.1, so both are needed.
type GPUInfo struct {
	DriverVersion string `json:"driver_version,omitempty"` // e.g. "580.65.06"; empty when no NVIDIA driver is loaded
	DriverMajor   int    `json:"driver_major,omitempty"`
	LibCUDA       string `json:"libcuda,omitempty"` // path of libcuda.so.1 if found
}

// HasNVIDIA reports whether an NVIDIA kernel driver and libcuda.so.1 are both present.
func (g GPUInfo) HasNVIDIA() bool { return g.DriverMajor > 0 && g.LibCUDA != "" }

// nvidiaVersionFile is where the NVIDIA kernel module reports its version.
const nvidiaVersionFile = "/proc/driver/nvidia/version"

// DetectGPU looks for an NVIDIA driver without loading anything: reading
// /proc and stat-ing library paths cannot crash the process, dlopen could.
func DetectGPU() GPUInfo {
	var g GPUInfo
	if b, err := os.ReadFile(nvidiaVersionFile); err == nil {
		if v, major, ok := parseNVIDIAVersion(b); ok {
			g.DriverVersion, g.DriverMajor = v, major
		}
	}
	g.LibCUDA = findLibCUDA(os.Getenv("LD_LIBRARY_PATH"))
	return g
}

// driverVersionRe matches the driver version in the kernel module's banner,
// e.g. "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul 27 ..."
// or "... Open Kernel Module for x86_64  580.82.07  Release Build ...".
var driverVersionRe = regexp.MustCompile(`Kernel Module(?: for [A-Za-z0-9_]+)?\s+(\d{2,4})\.(\d+)(?:\.(\d+))?\b`)

// parseNVIDIAVersion reads the driver version from /proc/driver/nvidia/version.
func parseNVIDIAVersion(b []byte) (version string, major int, ok bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "NVRM version:") {
			continue
		}
		m := driverVersionRe.FindStringSubmatch(line)
		if m == nil {
			return "", 0, false
		}
		major, err := strconv.Atoi(m[1])
		if err != nil || major == 0 {
			return "", 0, false
		}
		v := m[1] + "." + m[2]
		if m[3] != "" {
			v += "." + m[3]
		}
		return v, major, true
	}
	return "", 0, false
}

// libcudaDirs are where distributions and container runtimes put the
// user-space driver. Without cgo we cannot ask the dynamic loader, so we look
// where it would look; LD_LIBRARY_PATH comes first, as it does for ld.so.
var libcudaDirs = []string{
	"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
	"/usr/local/nvidia/lib64", "/usr/local/cuda/compat", "/run/opengl-driver/lib", "/usr/lib/wsl/lib",
}

func findLibCUDA(ldLibraryPath string) string {
	dirs := append(filepath.SplitList(ldLibraryPath), libcudaDirs...)
	for _, d := range dirs {
		if d == "" {
			continue
		}
		p := filepath.Join(d, "libcuda.so.1")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	return ""
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/native"
)

const verifyNativeUsage = `Usage: mlxgo verify-native [--json]

Finds the native pack the way every command does (MLXGO_NATIVE_DIR, a pack
beside the executable, the user cache, else a verified download), then:
  - prints where it was found, its version, variant and MLX version;
  - checks every file's size and sha256 against the pack's manifest;
  - prints the CPU features and the MLX devices; on the CUDA pack also the
    GPU (name, memory, compute capability, driver) and every NVIDIA library
    it loaded, with its path;
  - runs a numeric smoke test (matmul, softmax, rms_norm, rope, scaled dot
    product attention, quantize + quantized_matmul, argmax), each op against
    a Go reference computation.
Exits 0 when everything passes, 1 with one line per failure otherwise. MLX is
not loaded from a pack whose files fail their check.

Flags:
  --json   print the report as one JSON object on stdout

Environment:
  MLXGO_NATIVE_DIR   use this pack directory (an unusable one is an error)
  MLXGO_NATIVE_URL   download the pack from here instead of the release URL
  MLXGO_DEVICE       cpu or gpu: force the variant's device (gpu: the CUDA pack,
                     which needs an NVIDIA driver >= 580)
  MLXGO_CUDA_LIBS    directories holding NVIDIA's libraries (cuBLAS, cuDNN,
                     NVRTC, cuFFT, cuSOLVER, NCCL) for the CUDA pack; unset:
                     Python environments' nvidia/ pip trees, the CUDA
                     toolkit, then the loader's path (README: The CUDA pack)

Example:
  $ mlxgo verify-native --json | jq .ok
`

type verifyNativeCommand struct{ m *Main }

// verifyReport is everything verify-native found; --json prints it as is.
type verifyReport struct {
	OK       bool             `json:"ok"`
	Failures []string         `json:"failures"`
	Pack     *packReport      `json:"pack,omitempty"`
	CPU      native.CPUInfo   `json:"cpu"`
	GPU      native.GPUInfo   `json:"nvidia"`
	CUDA     *mlx.CUDAReport  `json:"cuda,omitempty"`
	MLX      *mlx.RuntimeInfo `json:"mlx,omitempty"`
	Checks   []mlx.Check      `json:"smoke_test,omitempty"`
}

type packReport struct {
	Dir           string `json:"dir"`
	Source        string `json:"source"`
	PackVersion   string `json:"pack_version"`
	Variant       string `json:"variant"`
	MLXVersion    string `json:"mlx_version"`
	FilesVerified int    `json:"files_verified"`
	FilesFailed   int    `json:"files_failed"`
}

func (c *verifyNativeCommand) Run(ctx context.Context, args []string) error {
	fs := c.m.newFlagSet("verify-native", verifyNativeUsage)
	asJSON := fs.Bool("json", false, "")
	if err := c.m.parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}

	r := c.verify(ctx)
	if *asJSON {
		enc := json.NewEncoder(c.m.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
	} else {
		printVerifyReport(c.m.Stdout, r)
	}
	if r.OK {
		return nil
	}
	// One line per failure on stderr, then main's summary line.
	for _, f := range r.Failures {
		fmt.Fprintf(c.m.Stderr, "mlxgo: error: %s\n", oneLine(f))
	}
	return fmt.Errorf("native pack verification failed (%d problem%s)", len(r.Failures), plural(len(r.Failures)))
}

// verify runs every check it can; a failure stops only what depends on it.
func (c *verifyNativeCommand) verify(ctx context.Context) *verifyReport {
	r := &verifyReport{Failures: []string{}, CPU: native.CPUFeatures(), GPU: native.DetectGPU()}
	fail := func(format string, a ...any) { r.Failures = append(r.Failures, fmt.Sprintf(format, a...)) }
	defer func() { r.OK = len(r.Failures) == 0 }()

	p, err := native.Resolve(ctx, native.Options{})
	if err != nil {
		fail("cannot find the native pack: %v", err)
		return r
	}
	m := p.Manifest
	r.Pack = &packReport{Dir: p.Dir, Source: p.Source, PackVersion: m.PackVersion, Variant: m.Variant, MLXVersion: m.MLXVersion}

	fileErrs := p.Verify()
	r.Pack.FilesFailed = len(fileErrs)
	r.Pack.FilesVerified = len(m.Files) - countInManifest(fileErrs)
	for _, e := range fileErrs {
		fail("%v", e)
	}
	if len(fileErrs) > 0 {
		fail("MLX not loaded: the pack's files failed verification (reinstall it: remove %s)", p.Dir)
		return r
	}

	cu, err := mlx.LoadPack(p)
	if err != nil {
		fail("%v", err)
		return r
	}
	r.CUDA = cu
	info, err := mlx.Info()
	if err != nil {
		fail("cannot query MLX: %v", err)
	} else {
		r.MLX = &info
		if info.Version != m.MLXVersion {
			fail("MLX reports version %s, the manifest says %s", info.Version, m.MLXVersion)
		}
	}
	r.Checks = mlx.SelfTest()
	for _, ch := range r.Checks {
		if !ch.OK {
			fail("smoke test %s failed: %s", ch.Name, ch.Detail)
		}
	}
	return r
}

// countInManifest counts the per-file errors about files the manifest lists,
// so that an extra file does not make the verified count wrong.
func countInManifest(errs []error) int {
	n := 0
	for _, e := range errs {
		if fe, ok := e.(*native.FileError); !ok || fe.Problem != "not in the manifest" {
			n++
		}
	}
	return n
}

func printVerifyReport(w io.Writer, r *verifyReport) {
	if p := r.Pack; p != nil {
		fmt.Fprintf(w, "native pack   %s (%s)\n", p.Dir, p.Source)
		fmt.Fprintf(w, "pack          version %s, variant %s, MLX %s\n", p.PackVersion, p.Variant, p.MLXVersion)
		fmt.Fprintf(w, "files         %d verified against the manifest (size and sha256), %d failed\n", p.FilesVerified, p.FilesFailed)
	}
	fmt.Fprintf(w, "cpu           %s\n", r.CPU)
	if r.GPU.HasNVIDIA() {
		fmt.Fprintf(w, "nvidia        driver %s, %s\n", r.GPU.DriverVersion, r.GPU.LibCUDA)
	} else {
		fmt.Fprintf(w, "nvidia        none\n")
	}
	if i := r.MLX; i != nil {
		var devs []string
		for _, d := range i.Devices {
			if d.Available {
				devs = append(devs, fmt.Sprintf("%s ×%d", d.Type, d.Count))
			} else {
				devs = append(devs, d.Type+" unavailable")
			}
		}
		fmt.Fprintf(w, "mlx           %s, default device %s; %s\n", i.Version, i.DefaultDevice, strings.Join(devs, ", "))
		for _, d := range i.Devices {
			if d.Type == "gpu" && d.Available {
				fmt.Fprintf(w, "gpu           %s\n", gpuLine(d.Info, r.GPU))
			}
		}
		fmt.Fprintf(w, "memory        active %d B, peak %d B, cache %d B, limit %d B\n", i.Memory.Active, i.Memory.Peak, i.Memory.Cache, i.Memory.Limit)
		var missing []string
		for _, b := range mlx.DistributedBackends {
			if !slices.Contains(i.Distributed, b) {
				missing = append(missing, b)
			}
		}
		fmt.Fprintf(w, "distributed   %s (not in this build: %s)\n", strings.Join(i.Distributed, ", "), strings.Join(missing, ", "))
	}
	if c := r.CUDA; c != nil {
		for _, l := range c.Libraries {
			file := ""
			if l.File != "" && l.File != l.Soname {
				file = " (" + l.File + ")"
			}
			path := l.Path
			if path == "" {
				path = "by soname, from the loader's path"
			}
			fmt.Fprintf(w, "cuda library  %s %s%s\n", l.Soname, path, file)
		}
		home := c.Home
		if home == "" {
			home = "none found (MLX falls back to /usr/local/cuda; kernels fail to compile without cuda_runtime.h)"
		}
		fmt.Fprintf(w, "cuda headers  %s\n", home)
	}
	for _, ch := range r.Checks {
		status := "ok  "
		if !ch.OK {
			status = "FAIL"
		}
		fmt.Fprintf(w, "smoke test    %s %-26s max abs err %.3g (tolerance %.3g)\n", status, ch.Name, ch.MaxAbsErr, ch.Tolerance)
	}
	if r.OK {
		fmt.Fprintln(w, "result        ok")
	} else {
		fmt.Fprintf(w, "result        %d problem%s (listed on stderr)\n", len(r.Failures), plural(len(r.Failures)))
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// gpuLine summarises MLX's device_info for a CUDA GPU: name, memory, compute
// capability, driver. Keys MLX does not report are left out.
func gpuLine(info map[string]string, g native.GPUInfo) string {
	var parts []string
	if n := info["device_name"]; n != "" {
		parts = append(parts, n)
	}
	for _, k := range []string{"total_memory", "memory_size"} {
		if v, err := strconv.ParseUint(info[k], 10, 64); err == nil && v > 0 {
			parts = append(parts, fmt.Sprintf("%.1f GiB", float64(v)/(1<<30)))
			break
		}
	}
	if a := info["architecture"]; a != "" {
		parts = append(parts, "compute capability "+a)
	}
	if g.DriverVersion != "" {
		parts = append(parts, "driver "+g.DriverVersion)
	}
	keys := make([]string, 0, len(info))
	for k := range info {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var all []string
	for _, k := range keys {
		all = append(all, k+"="+info[k])
	}
	return strings.Join(parts, ", ") + " [" + strings.Join(all, " ") + "]"
}

package native

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestChooseVariant(t *testing.T) {
	driver := func(v string, major int) GPUInfo {
		return GPUInfo{DriverVersion: v, DriverMajor: major, LibCUDA: "/usr/lib/x86_64-linux-gnu/libcuda.so.1"}
	}
	cases := []struct {
		name    string
		host    Host
		device  string
		want    string
		wantErr string
	}{
		{"linux cpu-only host", Host{OS: "linux", Arch: "amd64"}, "", "linux-amd64-cpu", ""},
		// A capable GPU host gets the CUDA pack in auto mode (Resolve falls back
		// to CPU when that pack can be neither found nor downloaded).
		{"linux with H200 driver, auto", Host{OS: "linux", Arch: "amd64", GPU: driver("580.65.06", 580)}, "", "linux-amd64-cuda13", ""},
		{"forced cpu", Host{OS: "linux", Arch: "amd64", GPU: driver("580.65.06", 580)}, "cpu", "linux-amd64-cpu", ""},
		{"forced gpu", Host{OS: "linux", Arch: "amd64", GPU: driver("580.65.06", 580)}, "gpu", "linux-amd64-cuda13", ""},
		{"forced gpu, no driver", Host{OS: "linux", Arch: "amd64"}, "gpu", "",
			"MLXGO_DEVICE=gpu: linux-amd64-cuda13: no NVIDIA driver found"},
		{"old driver, auto: CPU", Host{OS: "linux", Arch: "amd64", GPU: driver("550.54.15", 550)}, "", "linux-amd64-cpu", ""},
		{"bad device value", Host{OS: "linux", Arch: "amd64"}, "tpu", "", `MLXGO_DEVICE="tpu", want cpu or gpu`},
		{"unsupported platform", Host{OS: "windows", Arch: "amd64"}, "", "", "none exists for windows/amd64"},
		{"macOS metal not built here", Host{OS: "darwin", Arch: "arm64"}, "", "", "darwin-arm64-metal: not built yet"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := ChooseVariant(tc.host, tc.device)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %s, %v; want an error containing %q", v.Name, err, tc.wantErr)
				}
				return
			}
			if err != nil || v.Name != tc.want {
				t.Fatalf("got %s, %v; want %s", v.Name, err, tc.want)
			}
		})
	}
}

// TestCUDAVariantRules exercises the driver rules of the CUDA row.
func TestCUDAVariantRules(t *testing.T) {
	cuda, ok := LookupVariant("linux-amd64-cuda13")
	if !ok {
		t.Fatal("no linux-amd64-cuda13 row")
	}
	cases := []struct {
		name string
		gpu  GPUInfo
		want string // "" = usable
	}{
		{"new driver with libcuda", GPUInfo{DriverVersion: "580.82.07", DriverMajor: 580, LibCUDA: "/x/libcuda.so.1"}, ""},
		{"old driver", GPUInfo{DriverVersion: "550.54.15", DriverMajor: 550, LibCUDA: "/x/libcuda.so.1"}, "needs NVIDIA driver >= 580, found 550.54.15"},
		{"driver without libcuda", GPUInfo{DriverVersion: "580.82.07", DriverMajor: 580}, "libcuda.so.1 not found"},
		{"no driver", GPUInfo{}, "no NVIDIA driver found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := cuda.unusable(Host{OS: "linux", Arch: "amd64", GPU: tc.gpu})
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("unusable = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestVariantTable(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range Variants {
		if seen[v.Name] {
			t.Errorf("variant %s listed twice", v.Name)
		}
		seen[v.Name] = true
		if want := v.OS + "-" + v.Arch + "-"; !strings.HasPrefix(v.Name, want) {
			t.Errorf("variant %s does not start with %s", v.Name, want)
		}
		if len(v.Devices) == 0 || v.Wheel == "" || len(v.WheelPaths) == 0 {
			t.Errorf("variant %s is incomplete: %+v", v.Name, v)
		}
		u := v.URL(PackVersion)
		if !strings.HasPrefix(u, "https://") || !strings.HasSuffix(u, "/"+v.TarballName(PackVersion)) || strings.Contains(u, "{") {
			t.Errorf("variant %s release URL %s", v.Name, u)
		}
	}
	if !seen["linux-amd64-cpu"] || !seen["linux-amd64-cuda13"] || !seen["darwin-arm64-metal"] {
		t.Errorf("variants %v lack one of DESIGN.md's three", seen)
	}
}

func TestParseNVIDIAVersion(t *testing.T) {
	cases := []struct {
		name, in, want string
		major          int
	}{
		{"proprietary", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul 27 07:09:52 UTC 2025\nGCC version:  gcc version 13.3.0\n", "580.65.06", 580},
		{"open module", "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.82.07  Release Build  (dvs-builder@U16-I3-B03-4-3)  Wed Aug 27 19:56:34 UTC 2025\n", "580.82.07", 580},
		// Read on the H200 machine (2026-11-30): open module, Nix-built.
		{"H200 host", "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  \nGCC version:  gcc version 15.3.0 (GCC) \n", "580.159.04", 580},
		{"two-part version", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  470.42  Tue Jun 15 2021\n", "470.42", 470},
		{"aarch64 open module", "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  575.51.03  Release Build\n", "575.51.03", 575},
		{"no NVRM line", "GCC version: 13\n", "", 0},
		{"garbage", "NVRM version: who knows\n", "", 0},
		{"empty", "", "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, major, ok := parseNVIDIAVersion([]byte(tc.in))
			if v != tc.want || major != tc.major || ok != (tc.want != "") {
				t.Fatalf("got %q %d %v, want %q %d", v, major, ok, tc.want, tc.major)
			}
		})
	}
}

func FuzzParseNVIDIAVersion(f *testing.F) {
	f.Add([]byte("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul 27\n"))
	f.Add([]byte("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  99999999999999999999.1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, major, ok := parseNVIDIAVersion(data)
		if ok && (major <= 0 || !strings.Contains(string(data), v) || !strings.Contains(v, ".")) {
			t.Fatalf("accepted %q major %d", v, major)
		}
	})
}

func TestFindLibCUDA(t *testing.T) {
	dir := t.TempDir()
	if got := findLibCUDA(dir); got != "" && strings.HasPrefix(got, dir) {
		t.Fatalf("found %s in an empty dir", got)
	}
	lib := filepath.Join(dir, "libcuda.so.1")
	os.WriteFile(lib, nil, 0o644)
	// LD_LIBRARY_PATH comes before the system directories, as for ld.so.
	if got := findLibCUDA("/nonexistent:" + dir); got != lib {
		t.Fatalf("findLibCUDA = %q, want %q", got, lib)
	}
}

func TestCPUFeatures(t *testing.T) {
	c := CPUFeatures()
	if c.LogicalCores < 1 && runtime.GOARCH == "amd64" {
		t.Errorf("logical cores %d", c.LogicalCores)
	}
	if len(c.All) == 0 && (runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64") {
		t.Error("cpuid reported no features at all")
	}
	if runtime.GOARCH == "amd64" {
		if c.X64Level < 1 || c.Vendor == "" {
			t.Errorf("amd64 CPU without level or vendor: %+v", c)
		}
		// Every x86-64 CPU Go 1.26 runs on has SSE2; the key list starts at SSE4
		// but any CPU at level >= 2 has it.
		if c.X64Level >= 2 && !contains(c.Key, "SSE42") {
			t.Errorf("x86-64-v%d CPU without SSE4.2 in %v", c.X64Level, c.Key)
		}
	}
	if s := c.String(); !strings.Contains(s, c.Brand) || !strings.Contains(s, strings.Join(c.Key, " ")) {
		t.Errorf("String() = %q", s)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

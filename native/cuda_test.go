package native

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTree makes empty files (and directories) under root.
func fakeTree(t *testing.T, root string, files ...string) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(root, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// allLibs are the files of a complete CUDA 13 pip tree's cu13/lib.
func allLibs(dir string) []string {
	var out []string
	for _, l := range cudaLibs {
		out = append(out, dir+"/"+l.Soname)
	}
	return out
}

func TestFindCUDASearchOrder(t *testing.T) {
	gpu := GPUInfo{DriverVersion: "580.95.05", DriverMajor: 580, LibCUDA: "/usr/lib/x86_64-linux-gnu/libcuda.so.1"}
	torch := "opt/torch/.venv/lib/python3.12/site-packages/nvidia"
	venv := "home/u/proj/venv/lib/python3.11/site-packages/nvidia"
	cases := []struct {
		name  string
		files []string
		env   map[string]string
		want  map[string]string // soname -> path relative to root ("" = left to the loader)
		home  string            // CUDA_HOME relative to root
		err   string
	}{
		{
			name:  "torch venv under /opt, CUDA 13 cu13/lib layout",
			files: append(allLibs(torch+"/cu13/lib"), torch+"/cu13/include/cuda_runtime.h"),
			want:  map[string]string{"libcublasLt.so.13": torch + "/cu13/lib/libcublasLt.so.13", "libnccl.so.2": torch + "/cu13/lib/libnccl.so.2"},
			home:  torch + "/cu13",
		},
		{
			name: "per-package layout nvidia/*/lib",
			files: []string{torch + "/cublas/lib/libcublasLt.so.13", torch + "/cublas/lib/libcublas.so.13",
				torch + "/nccl/lib/libnccl.so.2", torch + "/cuda_runtime/include/cuda_runtime.h"},
			want: map[string]string{"libcublasLt.so.13": torch + "/cublas/lib/libcublasLt.so.13", "libnccl.so.2": torch + "/nccl/lib/libnccl.so.2", "libcudnn.so.9": ""},
			home: torch + "/cuda_runtime",
		},
		{
			name:  "VIRTUAL_ENV comes before /opt/*/.venv",
			files: append(allLibs(torch+"/cu13/lib"), venv+"/cu13/lib/libcudnn.so.9"),
			env:   map[string]string{"VIRTUAL_ENV": "home/u/proj/venv"},
			want:  map[string]string{"libcudnn.so.9": venv + "/cu13/lib/libcudnn.so.9", "libcublasLt.so.13": torch + "/cu13/lib/libcublasLt.so.13"},
		},
		{
			name:  "pip tree comes before the toolkit",
			files: append(allLibs("usr/local/cuda-13.0/lib64"), torch+"/cu13/lib/libnvrtc.so.13", "usr/local/cuda-13.0/include/cuda_runtime.h"),
			want:  map[string]string{"libnvrtc.so.13": torch + "/cu13/lib/libnvrtc.so.13", "libcufft.so.12": "usr/local/cuda-13.0/lib64/libcufft.so.12"},
			home:  "usr/local/cuda-13.0",
		},
		{
			name:  "toolkit comes before LD_LIBRARY_PATH and the system dirs",
			files: append(append(allLibs("ld/path"), "usr/local/cuda/lib64/libcufft.so.12"), allLibs("usr/lib/x86_64-linux-gnu")...),
			env:   map[string]string{"LD_LIBRARY_PATH": "ld/path"},
			want:  map[string]string{"libcufft.so.12": "usr/local/cuda/lib64/libcufft.so.12", "libnccl.so.2": "ld/path/libnccl.so.2"},
		},
		{
			name:  "system dirs last",
			files: allLibs("usr/lib/x86_64-linux-gnu"),
			want:  map[string]string{"libcudnn.so.9": "usr/lib/x86_64-linux-gnu/libcudnn.so.9"},
		},
		{
			name:  "nothing found: left to the loader by soname",
			files: []string{"empty/x"},
			want:  map[string]string{"libcudnn.so.9": "", "libcublasLt.so.13": ""},
		},
		{
			name:  "MLXGO_CUDA_LIBS is explicit: nothing else is searched",
			files: append(allLibs(torch+"/cu13/lib"), "mine/libcublasLt.so.13"),
			env:   map[string]string{"MLXGO_CUDA_LIBS": "mine"},
			err:   "NVIDIA libraries missing from MLXGO_CUDA_LIBS=",
		},
		{
			name:  "MLXGO_CUDA_LIBS names the missing library and its package",
			files: []string{"mine/libcublasLt.so.13"},
			env:   map[string]string{"MLXGO_CUDA_LIBS": "mine"},
			err:   "libcudnn.so.9 (pip install nvidia-cudnn-cu13)",
		},
		{
			name:  "MLXGO_CUDA_LIBS complete",
			files: allLibs("mine"),
			env:   map[string]string{"MLXGO_CUDA_LIBS": "mine"},
			want:  map[string]string{"libcusolver.so.12": "mine/libcusolver.so.12"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			fakeTree(t, root, tc.files...)
			env := map[string]string{"HOME": filepath.Join(root, "home/nobody")}
			for k, v := range tc.env {
				env[k] = filepath.Join(root, v)
			}
			cu, err := FindCUDA(CUDASearch{Getenv: func(k string) string { return env[k] }, GPU: gpu, Root: root, Cwd: filepath.Join(root, "cwd")})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, l := range cu.Libs {
				got[l.Soname] = l.Path
			}
			for so, rel := range tc.want {
				want := ""
				if rel != "" {
					want = filepath.Join(root, rel)
				}
				if got[so] != want {
					t.Errorf("%s: got %q, want %q", so, got[so], want)
				}
			}
			if tc.home != "" && cu.Home != filepath.Join(root, tc.home) {
				t.Errorf("CUDA home %q, want %q", cu.Home, filepath.Join(root, tc.home))
			}
			if cu.LibCUDA != gpu.LibCUDA {
				t.Errorf("libcuda %q", cu.LibCUDA)
			}
		})
	}
}

func TestFindCUDANoDriver(t *testing.T) {
	cases := []struct {
		name string
		gpu  GPUInfo
		want string
	}{
		{"no kernel module, no libcuda", GPUInfo{}, "no NVIDIA driver: /proc/driver/nvidia/version absent and libcuda.so.1 not found in "},
		{"kernel module but no libcuda (container without the driver mounted)", GPUInfo{DriverVersion: "580.1", DriverMajor: 580}, "no NVIDIA driver: libcuda.so.1 not found in "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FindCUDA(CUDASearch{Getenv: func(string) string { return "" }, GPU: tc.gpu, Root: t.TempDir()})
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line starting %q", err, tc.want)
			}
		})
	}
}

func TestCUDALibsCoverLibmlxNeeded(t *testing.T) {
	// readelf -d of the 0.32.4 mlx-cuda-13 wheel's libmlx.so, NVIDIA entries.
	needed := []string{"libnccl.so.2", "libcublasLt.so.13", "libcufft.so.12", "libcusolver.so.12", "libnvrtc.so.13", "libcudnn.so.9"}
	have := map[string]bool{}
	for _, l := range cudaLibs {
		if l.Needed {
			have[l.Soname] = true
		}
	}
	for _, n := range needed {
		if !have[n] {
			t.Errorf("%s is NEEDED by libmlx.so but not in cudaLibs as Needed", n)
		}
	}
}

// On a host with an NVIDIA driver, auto mode takes the CUDA pack when it is
// in the cache and falls back to the CPU pack when it can be neither found
// nor downloaded; MLXGO_DEVICE=cpu always takes the CPU pack.
func TestResolveGPUHostAuto(t *testing.T) {
	gpuHost := Host{OS: "linux", Arch: "amd64", GPU: GPUInfo{DriverVersion: "580.159.04", DriverMajor: 580, LibCUDA: "/x/libcuda.so.1"}}
	cuda, _ := LookupVariant("linux-amd64-cuda13")
	cpu, _ := LookupVariant("linux-amd64-cpu")
	cases := []struct {
		name        string
		cudaCached  bool
		device      string
		wantVariant string
	}{
		{"cuda pack cached", true, "", cuda.Name},
		{"no cuda pack, no digest: cpu", false, "", cpu.Name},
		{"forced cpu", true, "cpu", cpu.Name},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cache := t.TempDir()
			writeSyntheticPack(t, filepath.Join(cache, cacheDirName(cpu)), nil)
			if tc.cudaCached {
				writeSyntheticPack(t, filepath.Join(cache, cacheDirName(cuda)), func(m *Manifest) { m.Variant = cuda.Name })
			}
			p, err := Resolve(context.Background(), Options{
				Getenv: envMap(map[string]string{EnvDevice: tc.device}), Executable: filepath.Join(cache, "mlxgo"),
				CacheDir: cache, Host: &gpuHost, NoDownload: true, Progress: io.Discard,
			})
			if err != nil {
				t.Fatal(err)
			}
			if p.Manifest.Variant != tc.wantVariant {
				t.Fatalf("variant %s, want %s", p.Manifest.Variant, tc.wantVariant)
			}
			if p.NeedsCUDA() != (tc.wantVariant == cuda.Name) {
				t.Fatalf("NeedsCUDA = %v for %s", p.NeedsCUDA(), p.Manifest.Variant)
			}
		})
	}
}

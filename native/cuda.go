package native

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// The CUDA pack does not bundle NVIDIA's libraries (their licences and their
// 2 GB forbid it); this file finds them. libmlx.so's RPATH
// ($ORIGIN/../../nvidia/*/lib) only works when libmlx.so sits in a Python
// site-packages beside nvidia/, which a pack never does, so mlxgo loads each
// library by absolute path, RTLD_GLOBAL, before libmlx.so (package mlx,
// Preload): the dynamic loader then finds every one of libmlx.so's NEEDED
// sonames already loaded and never searches for it.
//
// The search order, one place (FindCUDA), first match per library:
//
//  1. MLXGO_CUDA_LIBS: a list of directories (':'-separated). Explicit: when it
//     is set, only those directories are searched, and a library missing
//     there is an error.
//  2. Python environments' pip trees, site-packages/nvidia/cu13/lib and
//     site-packages/nvidia/*/lib (what `pip install mlx-cuda-13` or a CUDA 13
//     PyTorch leaves): $VIRTUAL_ENV, $CONDA_PREFIX, ./.venv, ~/.venv,
//     /opt/*/.venv, /opt/conda, ~/.local, /usr/local, /usr.
//  3. The CUDA toolkit: $CUDA_HOME/lib64, $CUDA_PATH/lib64, /usr/local/cuda/lib64,
//     then /usr/local/cuda-*/lib64, newest first.
//  4. The loader's path: LD_LIBRARY_PATH, then the system library
//     directories; what is in none of them is left to dlopen by soname
//     (ld.so.cache).
//
// libcuda.so.1 is the driver, not a toolkit library: it comes from the
// driver's own directories (findLibCUDA), and without it there is no GPU.

// EnvCUDALibs lists the directories to take NVIDIA's libraries from.
const EnvCUDALibs = "MLXGO_CUDA_LIBS"

// CUDALib is one NVIDIA library the CUDA pack loads before libmlx.so.
type CUDALib struct {
	Soname string `json:"soname"`
	// Package is the pip package that provides it, for the error message.
	Package string `json:"package"`
	// Needed is true for libmlx.so's own NEEDED entries (readelf -d of the
	// 0.32.4 mlx-cuda-13 wheel); the others are their dependencies, loaded
	// first when found so that nothing is left to a search.
	Needed bool   `json:"needed"`
	Path   string `json:"path,omitempty"` // absolute path; "" when left to the loader
}

// cudaLibs is libmlx.so's NVIDIA closure in load order: dependencies first.
var cudaLibs = []CUDALib{
	{Soname: "libnvJitLink.so.13", Package: "nvidia-nvjitlink"},
	{Soname: "libcublasLt.so.13", Package: "nvidia-cublas", Needed: true},
	{Soname: "libcublas.so.13", Package: "nvidia-cublas"},
	{Soname: "libcusparse.so.12", Package: "nvidia-cusparse"},
	{Soname: "libcusolver.so.12", Package: "nvidia-cusolver", Needed: true},
	{Soname: "libcufft.so.12", Package: "nvidia-cufft", Needed: true},
	{Soname: "libnvrtc.so.13", Package: "nvidia-cuda-nvrtc", Needed: true},
	{Soname: "libcudnn.so.9", Package: "nvidia-cudnn-cu13", Needed: true},
	{Soname: "libnccl.so.2", Package: "nvidia-nccl-cu13", Needed: true},
}

// CUDA is what FindCUDA found: the driver, the libraries in load order, and
// the directory whose include/ holds the CUDA runtime headers NVRTC needs.
type CUDA struct {
	LibCUDA string    `json:"libcuda"`
	Libs    []CUDALib `json:"libraries"`
	// Home is a CUDA_HOME for MLX's JIT (it passes $CUDA_HOME/include to
	// NVRTC); "" when no headers were found, which fails at the first kernel.
	Home     string   `json:"cuda_home,omitempty"`
	Searched []string `json:"searched"` // the directories looked in, in order
}

// CUDASearch is what FindCUDA looks at; tests fill it with fake trees.
type CUDASearch struct {
	Getenv func(string) string // nil: os.Getenv
	GPU    GPUInfo             // DetectGPU()
	Root   string              // prefix for the fixed system paths ("/" or ""; a temp dir in tests)
	Cwd    string              // for ./.venv; "": os.Getwd
}

// FindCUDA finds every NVIDIA library the CUDA pack needs, or says which one
// is missing and how to install it. It stats files only; it loads nothing.
func FindCUDA(s CUDASearch) (*CUDA, error) {
	getenv := s.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if s.GPU.LibCUDA == "" {
		what := "libcuda.so.1 not found in " + strings.Join(libcudaSearchDirs(getenv("LD_LIBRARY_PATH")), ", ")
		if s.GPU.DriverMajor == 0 {
			what = nvidiaVersionFile + " absent and " + what
		}
		return nil, fmt.Errorf("no NVIDIA driver: %s (install the NVIDIA driver >= 580, or in a container run it with the GPU exposed, e.g. docker --gpus all)", what)
	}
	cu := &CUDA{LibCUDA: s.GPU.LibCUDA}
	explicit := getenv(EnvCUDALibs)
	var dirs []string
	if explicit != "" {
		dirs = filepath.SplitList(explicit)
	} else {
		dirs = cudaSearchDirs(s, getenv)
	}
	cu.Searched = dirs
	var missing []string
	for _, lib := range cudaLibs {
		for _, d := range dirs {
			p := filepath.Join(d, lib.Soname)
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
				lib.Path = p
				break
			}
		}
		if lib.Path == "" && explicit != "" && lib.Needed {
			missing = append(missing, lib.Soname+" (pip install "+lib.Package+")")
		}
		cu.Libs = append(cu.Libs, lib)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("NVIDIA libraries missing from %s=%s: %s", EnvCUDALibs, explicit, strings.Join(missing, ", "))
	}
	cu.Home = findCUDAHome(dirs, s, getenv)
	return cu, nil
}

// MissingHint is the advice for a library the loader could not load either.
func (l CUDALib) MissingHint() string {
	return fmt.Sprintf("%s not found: install it with `pip install %s` (or `pip install mlx-cuda-13`, which brings all of them), or point %s at the directory holding it",
		l.Soname, l.Package, EnvCUDALibs)
}

// cudaSearchDirs is steps 2–4 of the order above, deduplicated.
func cudaSearchDirs(s CUDASearch, getenv func(string) string) []string {
	var dirs []string
	seen := map[string]bool{}
	add := func(d string) {
		if d == "" || seen[d] {
			return
		}
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	for _, nv := range nvidiaTrees(s, getenv) {
		add(filepath.Join(nv, "cu13", "lib"))
		subs, _ := filepath.Glob(filepath.Join(nv, "*", "lib"))
		sort.Strings(subs)
		for _, d := range subs {
			add(d)
		}
	}
	for _, h := range cudaToolkits(s, getenv) {
		add(filepath.Join(h, "lib64"))
		add(filepath.Join(h, "targets", "x86_64-linux", "lib"))
	}
	for _, d := range filepath.SplitList(getenv("LD_LIBRARY_PATH")) {
		add(d)
	}
	for _, d := range libcudaDirs {
		add(filepath.Join(s.Root, d))
	}
	return dirs
}

// nvidiaTrees are the site-packages/nvidia directories of the Python
// environments step 2 looks at, in order.
func nvidiaTrees(s CUDASearch, getenv func(string) string) []string {
	home := getenv("HOME")
	cwd := s.Cwd
	if cwd == "" {
		cwd, _ = os.Getwd()
	}
	var prefixes []string
	for _, p := range []string{getenv("VIRTUAL_ENV"), getenv("CONDA_PREFIX")} {
		if p != "" {
			prefixes = append(prefixes, p)
		}
	}
	if cwd != "" {
		prefixes = append(prefixes, filepath.Join(cwd, ".venv"))
	}
	if home != "" {
		prefixes = append(prefixes, filepath.Join(home, ".venv"))
	}
	opt, _ := filepath.Glob(filepath.Join(s.Root, "/opt/*/.venv"))
	sort.Strings(opt)
	prefixes = append(prefixes, opt...)
	prefixes = append(prefixes, filepath.Join(s.Root, "/opt/conda"))
	if home != "" {
		prefixes = append(prefixes, filepath.Join(home, ".local"))
	}
	prefixes = append(prefixes, filepath.Join(s.Root, "/usr/local"), filepath.Join(s.Root, "/usr"))
	var trees []string
	for _, p := range prefixes {
		for _, pat := range []string{"lib/python3*/site-packages/nvidia", "lib/python3*/dist-packages/nvidia"} {
			m, _ := filepath.Glob(filepath.Join(p, pat))
			sort.Sort(sort.Reverse(sort.StringSlice(m))) // the newest Python first
			trees = append(trees, m...)
		}
	}
	return trees
}

// cudaToolkits are step 3's toolkit roots, in order.
func cudaToolkits(s CUDASearch, getenv func(string) string) []string {
	roots := []string{getenv("CUDA_HOME"), getenv("CUDA_PATH"), filepath.Join(s.Root, "/usr/local/cuda")}
	versioned, _ := filepath.Glob(filepath.Join(s.Root, "/usr/local/cuda-*"))
	sort.Sort(sort.Reverse(sort.StringSlice(versioned)))
	var out []string
	for _, r := range append(roots, versioned...) {
		if r != "" {
			out = append(out, r)
		}
	}
	return out
}

// findCUDAHome picks a CUDA_HOME whose include/ has the CUDA runtime headers:
// the user's own CUDA_HOME/CUDA_PATH (MLX reads those itself), else the pip
// tree or toolkit beside the first library directory that has them.
func findCUDAHome(libDirs []string, s CUDASearch, getenv func(string) string) string {
	has := func(h string) bool {
		_, err := os.Stat(filepath.Join(h, "include", "cuda_runtime.h"))
		return err == nil
	}
	var cands []string
	for _, k := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if v := getenv(k); v != "" {
			return v
		}
	}
	for _, d := range libDirs {
		parent := filepath.Dir(d) // nvidia/cu13 for nvidia/cu13/lib, the toolkit for lib64
		cands = append(cands, parent, filepath.Join(filepath.Dir(parent), "cu13"), filepath.Join(filepath.Dir(parent), "cuda_runtime"))
	}
	cands = append(cands, cudaToolkits(s, getenv)...)
	for _, c := range cands {
		if has(c) {
			return c
		}
	}
	return ""
}

// libcudaSearchDirs is where the driver library is looked for, in the
// loader's order: LD_LIBRARY_PATH, then the system directories.
func libcudaSearchDirs(ldLibraryPath string) []string {
	var out []string
	for _, d := range append(filepath.SplitList(ldLibraryPath), libcudaDirs...) {
		if d != "" {
			out = append(out, d)
		}
	}
	return out
}

// NeedsCUDA reports whether the pack's libmlx.so needs NVIDIA's libraries
// loaded first (FindCUDA, then mlx.Preload).
func (p *Pack) NeedsCUDA() bool {
	v, ok := LookupVariant(p.Manifest.Variant)
	return ok && v.MinNVIDIADriver > 0
}

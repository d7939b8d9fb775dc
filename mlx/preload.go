package mlx

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/ebitengine/purego"
	"github.com/mlxgo/mlxgo/native"
)

// Library is one shared library to load before the shim: the CUDA pack's
// NVIDIA dependencies, which libmlx.so names by soname only.
type Library struct {
	Soname string
	Path   string // absolute path; "" leaves the search to the dynamic loader
	Hint   string // what to tell the user when it cannot be loaded
}

// Loaded is a preloaded library and the file it really is (symlinks
// resolved, so libcublasLt.so.13 shows as libcublasLt.so.13.1.0.3).
type LoadedLibrary struct {
	Soname string `json:"soname"`
	Path   string `json:"path"`
	File   string `json:"file,omitempty"`
}

// Preload dlopens each library in order, RTLD_NOW|RTLD_GLOBAL, and keeps it
// loaded for the life of the process. When Load then dlopens the shim, the
// loader finds every soname libmlx.so needs already loaded and searches for
// none of them, so a missing library is this error, naming it, and never a
// failed dlopen of libmlx.so. Call it before Load.
func Preload(libs []Library) ([]LoadedLibrary, error) {
	var out []LoadedLibrary
	for _, l := range libs {
		target := l.Path
		if target == "" {
			target = l.Soname
		}
		if _, err := purego.Dlopen(target, purego.RTLD_NOW|purego.RTLD_GLOBAL); err != nil {
			if l.Path == "" {
				return out, fmt.Errorf("cannot load %s: %s", l.Soname, l.Hint)
			}
			return out, fmt.Errorf("cannot load %s from %s: %v (%s)", l.Soname, l.Path, err, l.Hint)
		}
		ll := LoadedLibrary{Soname: l.Soname, Path: l.Path}
		if l.Path != "" {
			if r, err := filepath.EvalSymlinks(l.Path); err == nil {
				ll.File = filepath.Base(r)
			}
		}
		out = append(out, ll)
	}
	return out, nil
}

// SetCEnv sets an environment variable that the C side (libmlx.so's getenv)
// sees, before it first looks. Under purego's fakecgo runtime os.Setenv
// updates the C environment too; this says so in one place.
func SetCEnv(key, value string) error { return os.Setenv(key, value) }

// CUDAReport is what LoadPack loaded for a CUDA pack (verify-native prints it).
type CUDAReport struct {
	Home      string          `json:"cuda_home,omitempty"`
	Libraries []LoadedLibrary `json:"libraries"`
}

// LoadPack loads MLX from p, the one way every command and test does. For the
// CUDA pack it first finds NVIDIA's libraries (native.FindCUDA, one search
// order) and loads each by absolute path, so that a missing one is an error
// naming it rather than a failed dlopen of libmlx.so; points MLX's kernel JIT
// at the CUDA headers when the user has not (CUDA_HOME); and makes the GPU
// the default device. The report is nil for other packs.
func LoadPack(p *native.Pack) (*CUDAReport, error) {
	var rep *CUDAReport
	if p.NeedsCUDA() {
		cu, err := native.FindCUDA(native.CUDASearch{GPU: native.DetectGPU()})
		if err != nil {
			return nil, fmt.Errorf("cannot load the native pack %s: %w", p.Dir, err)
		}
		libs := []Library{{Soname: "libcuda.so.1", Path: cu.LibCUDA, Hint: "the NVIDIA driver's library"}}
		for _, l := range cu.Libs {
			if l.Path == "" && !l.Needed {
				continue // a dependency found nowhere: its dependant's own search may still find it
			}
			libs = append(libs, Library{Soname: l.Soname, Path: l.Path, Hint: l.MissingHint()})
		}
		loaded, err := Preload(libs)
		if err != nil {
			return nil, fmt.Errorf("cannot load the native pack %s: %w", p.Dir, err)
		}
		rep = &CUDAReport{Home: cu.Home, Libraries: loaded}
		if cu.Home != "" {
			if err := SetCEnv("CUDA_HOME", cu.Home); err != nil {
				return nil, err
			}
		}
	}
	if err := Load(p.ShimPath()); err != nil {
		return nil, fmt.Errorf("cannot load the native pack %s: %w", p.Dir, err)
	}
	if rep != nil {
		if err := Do(func() error { return SetDefaultDevice(Device{Type: GPU}) }); err != nil {
			return nil, fmt.Errorf("cannot make the GPU the default device: %w", err)
		}
	}
	return rep, nil
}

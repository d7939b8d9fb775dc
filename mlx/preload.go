package mlx

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/ebitengine/purego"
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

package mlx

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ebitengine/purego"
)

var (
	loadMu     sync.Mutex
	loaded     atomic.Bool
	loadedPath string
)

// Load dlopens the shim at shimPath (it finds libmlx.so beside itself through
// its RUNPATH), checks that every symbol in the binding table resolves, binds
// them, and starts the executor. Calling it again with the same path is a
// no-op; with another path it is an error, since one process can hold only
// one MLX.
func Load(shimPath string) error {
	loadMu.Lock()
	defer loadMu.Unlock()
	if loaded.Load() {
		if shimPath == loadedPath {
			return nil
		}
		return fmt.Errorf("cannot load mlx shim %s: already loaded from %s", shimPath, loadedPath)
	}
	// RTLD_NOW: a missing dependency fails here, not at the first op.
	// RTLD_GLOBAL: MLX's symbols are visible to anything MLX itself dlopens.
	lib, err := purego.Dlopen(shimPath, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return fmt.Errorf("cannot load mlx shim %s: %w", shimPath, err)
	}
	table := symbols()
	addrs, missing := lookup(lib, table)
	if len(missing) > 0 {
		purego.Dlclose(lib)
		return fmt.Errorf("cannot load mlx shim %s: missing symbols (shim older than this binary?): %s",
			shimPath, strings.Join(missing, ", "))
	}
	if err := register(table, addrs); err != nil {
		return fmt.Errorf("cannot load mlx shim %s: %w", shimPath, err)
	}
	if err := startExecutor(); err != nil {
		return fmt.Errorf("cannot start mlx executor: %w", err)
	}
	loadedPath = shimPath
	loaded.Store(true)
	return nil
}

// lookup finds every symbol of table in lib, and names those it cannot.
func lookup(lib uintptr, table []symbol) (addrs []uintptr, missing []string) {
	addrs = make([]uintptr, len(table))
	for i, s := range table {
		p, err := purego.Dlsym(lib, s.name)
		if err != nil || p == 0 {
			missing = append(missing, s.name)
			continue
		}
		addrs[i] = p
	}
	return addrs, missing
}

// register binds every symbol, directly where bindDirect can; purego panics on a Go signature it cannot
// map, which is a bug in the table, reported as an error naming the symbol.
func register(table []symbol, addrs []uintptr) (err error) {
	var current string
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("cannot bind %s: %v", current, r)
		}
	}()
	for i, s := range table {
		current = s.name
		if !bindDirect(s.ptr, addrs[i]) {
			purego.RegisterFunc(s.ptr, addrs[i])
		}
	}
	return nil
}

// Loaded reports whether Load has succeeded.
func Loaded() bool { return loaded.Load() }

// Version is MLX's version string ("0.32.4"), or "" before Load.
func Version() string {
	if !loaded.Load() {
		return ""
	}
	return fn.version()
}

// LiveArrays is the number of array handles the shim holds: made and not yet
// freed. Tests use it to prove that scopes release everything.
func LiveArrays() int64 {
	if !loaded.Load() {
		return 0
	}
	return fn.liveArrays()
}

// toC is s as a NUL-terminated copy for a C call (as purego passes strings).
func toC(s string) *byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return &b[0]
}

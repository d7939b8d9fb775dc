package mlx

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"testing"

	"github.com/ebitengine/purego"
)

// TestSymbolTableMatchesHeader keeps the one binding table and the shim's
// header in step: every function the header declares is bound, and nothing
// is bound that the header does not declare.
func TestSymbolTableMatchesHeader(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "native", "shim", "mlxgo.h"))
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	for _, m := range regexp.MustCompile(`MLXGO_API [^;(]*?\b(mlxgo_\w+)\(`).FindAllSubmatch(src, -1) {
		declared = append(declared, string(m[1]))
	}
	for _, m := range regexp.MustCompile(`MLXGO_(?:UNARY|BINARY|REDUCE)\((\w+)\)`).FindAllSubmatch(src, -1) {
		if string(m[1]) != "name" { // the macro definitions themselves
			declared = append(declared, "mlxgo_"+string(m[1]))
		}
	}
	var bound []string
	for _, s := range symbols() {
		bound = append(bound, s.name)
	}
	slices.Sort(declared)
	slices.Sort(bound)
	if len(declared) < 100 {
		t.Fatalf("found only %d declarations in mlxgo.h; the pattern is out of date", len(declared))
	}
	if c := slices.Compact(slices.Clone(bound)); len(c) != len(bound) {
		t.Errorf("the table binds a name twice")
	}
	for _, n := range declared {
		if _, ok := slices.BinarySearch(bound, n); !ok {
			t.Errorf("%s is declared in mlxgo.h but not bound", n)
		}
	}
	for _, n := range bound {
		if _, ok := slices.BinarySearch(declared, n); !ok {
			t.Errorf("%s is bound but not declared in mlxgo.h", n)
		}
	}
}

// TestLookupNamesEveryMissingSymbol checks the load-time check against a
// library that has none of the shim's symbols.
func TestLookupNamesEveryMissingSymbol(t *testing.T) {
	libc := "libc.so.6"
	if runtime.GOOS == "darwin" {
		libc = "/usr/lib/libSystem.B.dylib"
	}
	lib, err := purego.Dlopen(libc, purego.RTLD_NOW)
	if err != nil {
		t.Fatalf("cannot open the C library to look in: %v", err)
	}
	defer purego.Dlclose(lib)
	table := symbols()
	// One real libc name: found, so it must not be reported.
	table = append(table, symbol{"malloc", new(func(uintptr) uintptr)})
	_, missing := lookup(lib, table)
	if len(missing) != len(table)-1 {
		t.Errorf("%d missing reported, want %d", len(missing), len(table)-1)
	}
	if slices.Contains(missing, "malloc") || !slices.Contains(missing, "mlxgo_fast_sdpa") {
		t.Errorf("missing list is wrong: %v", missing)
	}
}

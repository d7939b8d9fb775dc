// Package testenv finds what tests need outside the Go tree (the native pack,
// the oracle venv, registry data) and decides what happens when it is missing:
// a visible skip on a developer's machine, a failure in CI. CI sets
// MLXGO_REQUIRE_NATIVE=1 (and CI=true), so a needed prerequisite never skips
// there.
package testenv

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Strict reports whether missing prerequisites must fail tests rather than skip.
func Strict() bool {
	return os.Getenv("MLXGO_REQUIRE_NATIVE") == "1" || os.Getenv("CI") == "true"
}

// Missing skips or fails t, naming what is missing and how to get it.
func Missing(t testing.TB, what, howToGet string) {
	t.Helper()
	if Strict() {
		t.Fatalf("missing %s (required in CI): run %s", what, howToGet)
	}
	t.Skipf("missing %s: run %s", what, howToGet)
}

// RepoRoot is the module root, found from this file's location.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// DataDir is where `make data` puts registry data (git-ignored).
func DataDir() string {
	if d := os.Getenv("MLXGO_DATA_DIR"); d != "" {
		return d
	}
	return filepath.Join(RepoRoot(), ".cache", "data")
}

// DataFile returns a path under DataDir, or skips/fails if it does not exist.
func DataFile(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join(DataDir(), rel)
	if _, err := os.Stat(p); err != nil {
		Missing(t, "registry data "+rel, "make data")
	}
	return p
}

// Python returns the oracle venv's interpreter, or skips/fails if absent.
func Python(t testing.TB) string {
	t.Helper()
	p := filepath.Join(RepoRoot(), ".venv", "bin", "python")
	if _, err := os.Stat(p); err != nil {
		Missing(t, "oracle venv .venv", "make venv")
	}
	return p
}

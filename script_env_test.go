package main

import (
	"os"
	"testing"

	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/rogpeppe/go-internal/testscript"
)

func scriptParams(t *testing.T) testscript.Params {
	return testscript.Params{
		Dir: "testdata/script",
		Setup: func(e *testscript.Env) error {
			// Pass through what locates the native pack and registry data; the
			// script's own HOME is a fresh temp dir.
			for _, k := range []string{"XDG_CACHE_HOME", "MLXGO_NATIVE_DIR", "MLXGO_DEVICE", "MLXGO_REQUIRE_NATIVE", "CI"} {
				if v, ok := os.LookupEnv(k); ok {
					e.Setenv(k, v)
				}
			}
			if os.Getenv("XDG_CACHE_HOME") == "" {
				if h, err := os.UserCacheDir(); err == nil {
					e.Setenv("XDG_CACHE_HOME", h)
				}
			}
			e.Setenv("DATA", testenv.DataDir())
			return nil
		},
		RequireExplicitExec: true,
	}
}

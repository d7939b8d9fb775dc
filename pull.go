package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/mlxgo/mlxgo/hub"
)

const pullUsage = `Usage: mlxgo pull [flags] ORG/NAME[@REVISION]

Downloads a model from the Hugging Face hub into the hub cache, where
huggingface_hub and "mlxgo generate -m ORG/NAME" find it, and prints its
path on stdout. REVISION is a branch, tag or commit (default main).

Only the files a model needs come: config, tokenizer, chat templates,
generation config and the weights (the safetensors shards the index names,
or model.safetensors; or, with --file, one .gguf). Files download in
parallel into blobs/<hash>.incomplete; each is checked against the hub's
sha256 (LFS) or git blob hash before it is linked into the snapshot, and a
ref is written only when the snapshot is complete. An interrupted pull
(Ctrl-C, a lost connection) resumes where it stopped when run again.

Flags:
	--file NAME    the .gguf file to take (for a repo of GGUF files)
	--jobs N       files downloaded at once (default 4)
	--json         print the result as JSON instead of the path
	-q, --quiet    no progress on stderr (default: a bar on a terminal,
	               one line per file otherwise)

Environment (as huggingface_hub reads it):
	HF_ENDPOINT              the hub (default https://huggingface.co)
	HF_TOKEN                 access token (else the file $HF_TOKEN_PATH,
	                         default $HF_HOME/token)
	HF_HUB_CACHE, HF_HOME    the cache ($HF_HOME/hub, ~/.cache/huggingface/hub)
	HF_HUB_ETAG_TIMEOUT      seconds to wait for metadata (default 10)
	HF_HUB_DOWNLOAD_TIMEOUT  seconds a download may stall (default 10)
	HF_HUB_OFFLINE=1         refuse to pull

Examples:
	$ mlxgo pull HuggingFaceTB/SmolLM2-135M-Instruct
	$ mlxgo pull --file model-Q4_K_M.gguf ORG/NAME-GGUF
	$ echo "Hi" | mlxgo generate -m HuggingFaceTB/SmolLM2-135M-Instruct
	$ echo "Hi" | mlxgo generate --pull -m Qwen/Qwen3-0.6B    # pull first if missing
`

type pullCommand struct{ m *Main }

func (c *pullCommand) Run(ctx context.Context, args []string) error {
	fs := c.m.newFlagSet("pull", pullUsage)
	var opts hub.Options
	var asJSON, quiet bool
	fs.StringVar(&opts.GGUF, "file", "", "")
	fs.IntVar(&opts.Jobs, "jobs", 4, "")
	fs.BoolVar(&asJSON, "json", false, "")
	fs.BoolVar(&quiet, "q", false, "")
	fs.BoolVar(&quiet, "quiet", false, "")
	ref, err := c.m.parseWithOneArg(fs, args, "ORG/NAME[@REVISION]")
	if err != nil {
		return err
	}
	if opts.Jobs < 1 {
		return usagef("--jobs must be at least 1")
	}
	if opts.Repo, opts.Revision, err = hub.ParseRef(ref); err != nil {
		return usagef("%v", err)
	}
	var progress io.Writer = c.m.Stderr
	if quiet {
		progress = nil
	}
	res, err := pullModel(ctx, progress, os.Getenv, opts)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(c.m.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	fmt.Fprintln(c.m.Stdout, res.Path)
	return nil
}

// parseWithOneArg parses flags given before or after the one positional
// argument (mlxgo pull ORG/NAME --file F reads as the user means).
func (m *Main) parseWithOneArg(fs *cmdFlags, args []string, what string) (string, error) {
	if err := m.parseFlags(fs, args); err != nil {
		return "", err
	}
	if fs.NArg() == 0 {
		return "", usagef("want %s", what)
	}
	arg := fs.Arg(0)
	if err := m.parseFlags(fs, fs.Args()[1:]); err != nil {
		return "", err
	}
	if fs.NArg() > 0 {
		return "", usagef("unexpected argument %q", fs.Arg(0))
	}
	return arg, nil
}

// pullModel pulls with huggingface_hub's settings from getenv, drawing
// progress on stderr (a bar on a terminal, else one line per file; nil:
// none). It is the one place pull, and --pull of the model-running
// commands, download.
func pullModel(ctx context.Context, stderr io.Writer, getenv func(string) string, opts hub.Options) (*hub.Result, error) {
	if v := getenv("HF_HUB_OFFLINE"); v == "1" || v == "true" || v == "ON" || v == "YES" {
		return nil, fmt.Errorf("cannot pull %s: HF_HUB_OFFLINE=%s forbids network access", opts.Repo, v)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	client, err := hub.NewClient(getenv)
	if err != nil {
		return nil, err
	}
	client.UserAgent = "mlxgo/" + Version
	label := opts.Repo
	if opts.Revision != "" && opts.Revision != hub.DefaultRevision {
		label += "@" + opts.Revision
	}
	var bar *hub.Bar
	switch {
	case stderr == nil:
	case isTerminal(stderr):
		bar = hub.NewBar(stderr, label)
		opts.Progress = bar
	default:
		opts.Progress = hub.NewLines(stderr, label)
	}
	res, err := hub.Pull(ctx, client, hub.Cache{Dir: hub.CacheDir(getenv)}, opts)
	if bar != nil {
		bar.Finish()
	}
	if errors.Is(err, context.Canceled) && stderr != nil {
		fmt.Fprintf(stderr, "mlxgo: the pull of %s stopped; run it again to resume\n", label)
	}
	return res, err
}

// isTerminal: progress bars only for a person watching, never into logs.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

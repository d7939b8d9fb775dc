package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/mlxgo/mlxgo/gen"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/server"
	"github.com/mlxgo/mlxgo/tok"
	"github.com/mlxgo/mlxgo/tok/chat"
)

const generateUsage = `Usage: mlxgo generate [-m PATH] [flags]

Generates text from a prompt and streams it to stdout as it is produced,
ending with a newline. The prompt is -p TEXT or, without -p or with -p -,
all of stdin (one trailing newline dropped). It goes through the model's
chat template as the user message unless --raw is given. Decoding follows mlx-lm: greedy
at --temp 0, else its sampler with the filters below, in its order.

PATH is a model directory (config.json + safetensors), a .gguf file, or a
Hugging Face repo id (ORG/NAME[@REV]) in the local cache ($HF_HUB_CACHE,
$HF_HOME/hub or ~/.cache/huggingface/hub; --pull fetches it first when it is
missing, as mlxgo pull does). Without -m: the default model,
SmolLM2-135M-Instruct Q4_1, in $XDG_CACHE_HOME/mlxgo/models/ (make demo
puts it there).

Flags:
	-m, --model PATH          the model (default: the default model)
` + adapterUsageGenerate + `	-p, --prompt TEXT         the prompt; "-" reads stdin (default: read stdin)
	--system, --system-prompt TEXT
	                          a system message before the prompt
	--raw                     no chat template: encode the prompt as is,
	                          with the tokenizer's special tokens (BOS)
	--no-think                pass enable_thinking=false to the template
	--template-kwargs JSON    extra chat template variables (an object)
	--max-tokens N            generate at most N tokens (default 100;
	                          0: until EOS or the context is full)
	--temp, --temperature T   sampling temperature; 0 is greedy (default 0)
	--top-p P                 nucleus sampling mass, off at 1 (default 1)
	--min-p P                 drop tokens below P x the top probability (default 0)
	--min-tokens-to-keep N    tokens min-p always keeps (default 1)
	--top-k K                 sample from the K most likely, 0 is off (default 0)
	--xtc-probability P       XTC: with probability P drop the likely tokens above the
	                          threshold but the least of them, 0 is off (default 0)
	--xtc-threshold T         XTC's threshold, in [0, 0.5] (default 0.1)
	--repetition-penalty R    divide the logits of recent tokens by R, 0 is off
	--repetition-context N    how many recent tokens R applies to (default 20)
	--seed N                  seed MLX's random keys just before generating
	                          (default: not seeded); the same draws as
	                          mlx-lm's sampler after mx.random.seed(N)
	--stop TEXT               stop before TEXT; repeatable; TEXT is never printed
	--ignore-eos              keep going past end-of-sequence tokens
	--json-schema FILE        constrain the output to JSON valid under the JSON Schema in FILE
	--grammar FILE            constrain the output to the Lark grammar in FILE (llguidance's
	                          dialect; %json{...} embeds a schema)
	--draft-model PATH        speculative decoding: PATH drafts tokens that the model
	                          checks in one pass (mlx-lm's speculative_generate_step);
	                          it must have the model's vocabulary
	--num-draft-tokens N      tokens the draft model proposes per pass (default 3)
` + kvUsage + `	--prefill-step N          prompt tokens per prefill call (default 2048)
	--verbose                 print the model and the figures to stderr:
	                          prompt tokens and prefill tok/s, generated
	                          tokens and decode tok/s, peak memory; with a
	                          draft model its acceptance rate and tokens per pass
	--json-stats              print the figures as one JSON object, the last
	                          line on stderr (for make bench)
` + runtimeUsage + `
A prompt longer than the model's context is an error, never cut. Ctrl-C
stops at the next token; what was printed stays. Exit status: 0 done, 1
failure, 2 usage error, 130 interrupted.

Examples:
	$ echo "Write a haiku about the sea" | mlxgo generate
	$ mlxgo generate -m ./Qwen3-0.6B-4bit -p "Why is the sky blue?" --no-think --verbose
	$ mlxgo generate -m model.gguf --raw --temp 0.7 --seed 1 --stop "\n\n" < notes.txt
`

type generateCommand struct{ m *Main }

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// optionalUint is a flag that may be absent (the seed).
type optionalUint struct {
	set bool
	v   uint64
}

func (o *optionalUint) String() string { return fmt.Sprint(o.v) }
func (o *optionalUint) Set(s string) error {
	_, err := fmt.Sscan(s, &o.v)
	o.set = err == nil
	return err
}

// generateFlags are the parsed flags of one run.
type generateFlags struct {
	model, prompt, system, kwargs string
	promptSet, raw, noThink       bool
	maxTokens                     int
	sampler                       gen.SamplerOptions
	repPenalty                    float64
	repContext                    int
	seed                          optionalUint
	stops                         stringList
	ignoreEOS                     bool
	jsonSchema, grammar           string // files
	draftModel                    string
	numDraft                      int
	kv                            kvFlags
	prefillStep                   int
	verbose, jsonStats            bool
	rt                            runtimeFlags
	shard                         shardFlags
	adapters                      adapterFlags
}

func (c *generateCommand) parse(args []string) (*generateFlags, error) {
	f := &generateFlags{}
	fs := c.m.newFlagSet("generate", generateUsage)
	fs.StringVar(&f.model, "m", "", "")
	fs.StringVar(&f.model, "model", "", "")
	f.adapters.register(fs.FlagSet, false)
	fs.StringVar(&f.prompt, "p", "", "")
	fs.StringVar(&f.prompt, "prompt", "", "")
	fs.StringVar(&f.system, "system", "", "")
	fs.StringVar(&f.system, "system-prompt", "", "") // mlx_lm.generate's spelling
	fs.BoolVar(&f.raw, "raw", false, "")
	fs.BoolVar(&f.noThink, "no-think", false, "")
	fs.StringVar(&f.kwargs, "template-kwargs", "", "")
	fs.IntVar(&f.maxTokens, "max-tokens", 100, "")
	fs.Float64Var(&f.sampler.Temp, "temp", 0, "")
	fs.Float64Var(&f.sampler.Temp, "temperature", 0, "") // the request field's spelling
	fs.Float64Var(&f.sampler.TopP, "top-p", 1, "")
	fs.Float64Var(&f.sampler.MinP, "min-p", 0, "")
	fs.IntVar(&f.sampler.MinTokensToKeep, "min-tokens-to-keep", 1, "")
	fs.IntVar(&f.sampler.TopK, "top-k", 0, "")
	fs.Float64Var(&f.sampler.XTCProbability, "xtc-probability", 0, "")
	fs.Float64Var(&f.sampler.XTCThreshold, "xtc-threshold", gen.DefaultXTCThreshold, "")
	fs.Float64Var(&f.repPenalty, "repetition-penalty", 0, "")
	fs.IntVar(&f.repContext, "repetition-context", gen.DefaultPenaltyContext, "")
	fs.Var(&f.seed, "seed", "")
	fs.Var(&f.stops, "stop", "")
	fs.BoolVar(&f.ignoreEOS, "ignore-eos", false, "")
	fs.StringVar(&f.jsonSchema, "json-schema", "", "")
	fs.StringVar(&f.grammar, "grammar", "", "")
	fs.StringVar(&f.draftModel, "draft-model", "", "")
	fs.IntVar(&f.numDraft, "num-draft-tokens", gen.DefaultNumDraftTokens, "")
	f.kv.register(fs.FlagSet)
	fs.IntVar(&f.prefillStep, "prefill-step", gen.DefaultPrefillStepSize, "")
	fs.BoolVar(&f.verbose, "verbose", false, "")
	fs.BoolVar(&f.jsonStats, "json-stats", false, "")
	f.rt.register(fs)
	f.shard.register(fs.FlagSet)
	if err := c.m.parseFlags(fs, args); err != nil {
		return nil, err
	}
	if err := f.rt.resolve(os.Getenv); err != nil {
		return nil, err
	}
	fs.Visit(func(fl *flag.Flag) { f.promptSet = f.promptSet || fl.Name == "p" || fl.Name == "prompt" })
	if err := f.kv.check(fs.FlagSet); err != nil {
		return nil, err
	}
	if err := f.adapters.check(false); err != nil {
		return nil, err
	}
	switch {
	case fs.NArg() > 0:
		return nil, usagef("unexpected argument %q (the prompt goes in -p or on stdin)", fs.Arg(0))
	case f.maxTokens < 0:
		return nil, usagef("--max-tokens must be 0 or more")
	case f.prefillStep <= 0 || f.repContext <= 0:
		return nil, usagef("--prefill-step and --repetition-context must be positive")
	case f.raw && (f.system != "" || f.noThink || f.kwargs != ""):
		return nil, usagef("--system, --no-think and --template-kwargs need the chat template; drop --raw")
	case f.jsonSchema != "" && f.grammar != "":
		return nil, usagef("--json-schema and --grammar cannot both constrain the output")
	case (f.jsonSchema != "" || f.grammar != "") && f.ignoreEOS:
		return nil, usagef("--ignore-eos cannot be used with --json-schema or --grammar (the grammar ends the output)")
	case f.repPenalty < 0:
		return nil, usagef("--repetition-penalty must not be negative")
	case f.numDraft < 0:
		return nil, usagef("--num-draft-tokens must be 0 or more")
	case f.draftModel != "" && (f.jsonSchema != "" || f.grammar != ""):
		return nil, usagef("--draft-model cannot be used with --json-schema or --grammar (a grammar must see each token before the next is drafted)")
	case f.draftModel != "" && f.kv.maxKV > 0:
		return nil, usagef("--draft-model cannot be used with --max-kv-size (speculative decoding trims its caches, and a rotating cache cannot be trimmed once full)")
	}
	if f.shard.on() && len(f.adapters.specs) > 0 {
		return nil, usagef("--adapter-path cannot be combined with --shard %s yet: the adapter is not split with the weights", f.shard.kind)
	}
	if err := f.sampler.Validate(0); err != nil {
		return nil, usageError{err.Error()}
	}
	return f, nil
}

func (c *generateCommand) Run(ctx context.Context, args []string) error {
	f, err := c.parse(args)
	if err != nil {
		return err
	}
	path, err := resolveModel(f.model, os.Getenv)
	if err != nil {
		return err
	}
	text, err := f.shard.prompt(c, f)
	if err != nil {
		return err
	}
	if err := loadMLX(ctx, &f.rt); err != nil {
		return err
	}

	// The tokenizer loads on this goroutine while the executor loads weights.
	type tokResult struct {
		t   *tok.Tokenizer
		err error
	}
	tokCh := make(chan tokResult, 1)
	go func() {
		t, err := tok.Load(path)
		tokCh <- tokResult{t, err}
	}()

	r := &generateRun{m: c.m, f: f, path: path}
	var draft *loadedDraft
	if f.draftModel != "" {
		if draft, err = startDraft(f.draftModel, os.Getenv); err != nil {
			return err
		}
	}
	return mlx.Do(func() error {
		t0 := time.Now()
		model, err := f.shard.load(path, f.rt.load(f.adapters.options()))
		if err != nil {
			return fmt.Errorf("cannot load model %s: %w", path, err)
		}
		defer model.Close()
		if model, err = f.adapters.view(model); err != nil {
			return err
		}
		if mem, err := mlx.Memory(); err == nil {
			r.weightBytes = mem.Active // nothing but the weights is allocated yet
		}
		tr := <-tokCh
		if tr.err != nil {
			return fmt.Errorf("cannot load the tokenizer of %s: %w", path, tr.err)
		}
		if draft != nil {
			if err := draft.load(tr.t); err != nil {
				return err
			}
			defer draft.model.Close()
			r.draft = draft
		}
		r.loadTime = time.Since(t0)
		return r.run(ctx, model, tr.t, text)
	})
}

// readPrompt is -p, else (without -p, or with -p -) all of stdin with one
// trailing newline dropped.
func (c *generateCommand) readPrompt(f *generateFlags) (string, error) {
	if f.promptSet && f.prompt != "-" {
		if f.prompt == "" {
			return "", usagef("the prompt is empty")
		}
		return f.prompt, nil
	}
	if file, ok := c.m.Stdin.(*os.File); ok {
		if st, err := file.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			fmt.Fprintln(c.m.Stderr, "mlxgo: reading the prompt from the terminal; end it with Ctrl-D")
		}
	}
	b, err := io.ReadAll(c.m.Stdin)
	if err != nil {
		return "", fmt.Errorf("cannot read the prompt from stdin: %w", err)
	}
	text := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if strings.TrimSpace(text) == "" {
		return "", usagef("the prompt is empty: give -p TEXT or pipe text on stdin")
	}
	return text, nil
}

// templateKwargs merges --template-kwargs and --no-think.
func (f *generateFlags) templateKwargs() (map[string]any, error) {
	kw := map[string]any{}
	if f.kwargs != "" {
		if err := json.Unmarshal([]byte(f.kwargs), &kw); err != nil || kw == nil {
			return nil, usagef("--template-kwargs: want a JSON object")
		}
	}
	if f.noThink {
		kw["enable_thinking"] = false
	}
	return kw, nil
}

// encodePrompt is mlx_lm.generate's prompt handling: the chat template
// (system message first when given) rendered to text and encoded without
// special tokens, or with --raw (or no template) the text encoded with them.
func encodePrompt(t *tok.Tokenizer, f *generateFlags, text string, stderr io.Writer) ([]int32, error) {
	// Tokenizer truncation from tokenizer.json would cut the prompt silently;
	// transformers turns it off for encode, and so do we.
	t.Truncation, t.Padding = nil, nil
	cfg := t.Config()
	if f.raw || cfg.ChatTemplate == "" {
		if !f.raw && (f.system != "" || f.noThink || f.kwargs != "") {
			return nil, errors.New("the model has no chat template: --system, --no-think and --template-kwargs cannot apply (use --raw)")
		}
		if !f.raw {
			// mlx-lm falls back silently; say so, since a chat model
			// answers a raw prompt very differently.
			fmt.Fprintln(stderr, "mlxgo: warning: the model has no chat template; the prompt is used as is (as with --raw)")
		}
		return t.Encode(text, true)
	}
	kw, err := f.templateKwargs()
	if err != nil {
		return nil, err
	}
	var msgs []map[string]string
	if f.system != "" {
		msgs = append(msgs, map[string]string{"role": "system", "content": f.system})
	}
	msgs = append(msgs, map[string]string{"role": "user", "content": text})
	js, err := json.Marshal(msgs)
	if err != nil {
		return nil, err
	}
	// serve's chat-encoding path: the template, then the text encoded
	// without special tokens.
	return server.NewChatTemplate(t).Encode(js, chat.Options{AddGenerationPrompt: true, Kwargs: kw})
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mlxgo/mlxgo/gen"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
	"github.com/mlxgo/mlxgo/server"
	"github.com/mlxgo/mlxgo/tok"
)

// generateRun is one `mlxgo generate` after flag parsing and loading; it
// runs on the MLX executor.
type generateRun struct {
	m           *Main
	f           *generateFlags
	path        string
	loadTime    time.Duration
	weightBytes uint64
	draft       *loadedDraft // --draft-model, loaded; nil without
}

// grammar compiles --json-schema or --grammar (nil when neither is given)
// against the model's vocabulary.
func (r *generateRun) grammar(t *tok.Tokenizer, vocab int, eos []int32) (*gen.Grammar, error) {
	file, kind := r.f.jsonSchema, mlx.GrammarJSONSchema
	if r.f.grammar != "" {
		file, kind = r.f.grammar, mlx.GrammarLark
	}
	if file == "" {
		return nil, nil
	}
	src, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("cannot read the grammar: %w", err)
	}
	gr, err := gen.NewGrammars(t, vocab, eos).Compile(kind, string(src))
	if err != nil {
		return nil, fmt.Errorf("cannot use %s: %w", file, err)
	}
	return gr, nil
}

func (r *generateRun) run(ctx context.Context, model models.Model, t *tok.Tokenizer, text string) error {
	info := model.Info()
	ids, err := r.f.shard.share(r.f, r.m.Stderr, func() ([]int32, error) { return encodePrompt(t, r.f, text, r.m.Stderr) })
	if err != nil {
		return err
	}
	if n := info.ContextLength; n > 0 && len(ids) > n {
		return fmt.Errorf("the prompt is %d tokens, longer than the model's context of %d tokens", len(ids), n)
	}
	o := gen.Options{
		MaxTokens: r.f.maxTokens,
		Sampler:   r.f.sampler,
		Processors: gen.ProcessorOptions{
			RepetitionPenalty: r.f.repPenalty, RepetitionContextSize: r.f.repContext,
		},
		PrefillStepSize:  r.f.prefillStep,
		KV:               r.f.kv.options(),
		QuantizedKVStart: r.f.kv.start,
		ContextLength:    info.ContextLength,
		VocabSize:        info.VocabSize,
	}
	if !r.f.ignoreEOS {
		o.EOS = info.EOSIDs(t.EOSIDs()...)
	}
	if o.Sampler.XTCProbability > 0 {
		// mlx_lm.generate: tokenizer.encode("\n") + eos_token_ids are never dropped.
		nl, err := t.Encode("\n", false)
		if err != nil {
			return err
		}
		o.Sampler.XTCSpecialTokens = append(nl, info.EOSIDs(t.EOSIDs()...)...)
	}
	if o.Grammar, err = r.grammar(t, info.VocabSize, o.EOS); err != nil {
		return err
	}
	if r.f.verbose {
		fmt.Fprintf(r.m.Stderr, "model:       %s (%s, %s, %s), loaded in %.2f s\n", r.path, info.ModelType, info.Dtype, info.Quantization, r.loadTime.Seconds())
		describeAdapters(r.m.Stderr, info)
		fmt.Fprintf(r.m.Stderr, "runtime:     %s\n", mlx.RuntimeDescription())
		fmt.Fprintf(r.m.Stderr, "fidelity:    %s\n", server.LogitsFidelity())
		if r.draft != nil {
			di := r.draft.model.Info()
			fmt.Fprintf(r.m.Stderr, "draft:       %s (%s, %s, %s), %d tokens per pass\n", r.draft.path, di.ModelType, di.Dtype, di.Quantization, r.f.numDraft)
		}
	}
	if r.f.seed.set {
		// mx.random.seed(args.seed), before anything draws a key.
		if err := mlx.Seed(r.f.seed.v); err != nil {
			return err
		}
	}

	out := &textOut{w: r.m.Stdout, text: gen.NewTextStream(t.NewDetokenizer(false), gen.NewStopMatcher(unescapeStops(r.f.stops)))}
	if err := mlx.ResetPeakMemory(); err != nil {
		return err
	}
	var st gen.Stats
	if r.draft != nil {
		st, err = gen.Speculate(ctx, model, gen.Draft{Model: r.draft.model, NumDraftTokens: r.f.numDraft}, ids, o, out.token)
	} else {
		st, err = gen.Generate(ctx, model, ids, o, out.token)
	}
	if err == nil {
		err = out.finish()
	} else if errors.Is(err, context.Canceled) {
		// Ctrl-C: end the line that was being printed; main says the rest.
		fmt.Fprintln(r.m.Stdout)
	}
	if err == nil || errors.Is(err, context.Canceled) {
		r.report(st)
	}
	return err
}

// unescapeStops turns the escapes a shell user types (\n, \t, \\) into the
// characters, so that --stop "\n\n" means two newlines.
func unescapeStops(stops []string) []string {
	out := make([]string, 0, len(stops))
	r := strings.NewReplacer(`\\`, `\`, `\n`, "\n", `\t`, "\t", `\r`, "\r")
	for _, s := range stops {
		out = append(out, r.Replace(s))
	}
	return out
}

// textOut writes the generation's text stream (gen.TextStream, the one
// serve's engine uses): detokenized as soon as the text is final, held back
// while it may still become a stop string.
type textOut struct {
	w     io.Writer
	text  *gen.TextStream
	wrote bool
}

func (o *textOut) token(id int32) error {
	s, stop := o.text.Token(id)
	if err := o.write(s); err != nil {
		return err
	}
	return stop
}

func (o *textOut) write(s string) error {
	if s == "" {
		return nil
	}
	o.wrote = true
	if _, err := io.WriteString(o.w, s); err != nil {
		return fmt.Errorf("cannot write the output: %w", err)
	}
	return nil
}

// finish prints what the detokenizer and the stop matcher still hold, then
// the final newline.
func (o *textOut) finish() error {
	if err := o.write(o.text.Finish()); err != nil {
		return err
	}
	_, err := io.WriteString(o.w, "\n")
	return err
}

// benchStats is the --json-stats line: the fields bench_ref.py prints for
// mlx-lm, so models/testdata/oracle/bench.py reads both alike.
type benchStats struct {
	Impl            string  `json:"impl"`
	Model           string  `json:"model"`
	PromptTokens    int     `json:"prompt_tokens"`
	GeneratedTokens int     `json:"generated_tokens"`
	PrefillTPS      float64 `json:"prefill_tps"`
	DecodeTPS       float64 `json:"decode_tps"`
	TTFT            float64 `json:"ttft_s"`
	Load            float64 `json:"load_s"`
	PeakMemory      uint64  `json:"peak_memory_bytes"`
	WeightBytes     uint64  `json:"weight_bytes"`
	KVBytes         int     `json:"kv_bytes"`
	KVBytesPerToken int     `json:"kv_bytes_per_token"`
	FinishReason    string  `json:"finish_reason"`
	MLX             string  `json:"mlx"`
	// With --draft-model: the speculative figures.
	DraftTokens    int     `json:"draft_tokens,omitempty"`
	AcceptedTokens int     `json:"accepted_tokens,omitempty"`
	TargetPasses   int     `json:"target_passes,omitempty"`
	AcceptanceRate float64 `json:"acceptance_rate,omitempty"`
	// With --shard: the parallelism of the composition ("tensor x2 over ring").
	Parallelism string `json:"parallelism,omitempty"`
}

func (r *generateRun) report(st gen.Stats) {
	if r.f.verbose {
		fmt.Fprintf(r.m.Stderr, "prompt:      %d tokens, %.1f tok/s\n", st.PromptTokens, st.PrefillTPS())
		fmt.Fprintf(r.m.Stderr, "generation:  %d tokens, %.1f tok/s (%s)\n", st.GeneratedTokens, st.DecodeTPS(), st.FinishReason)
		if r.draft != nil {
			fmt.Fprintf(r.m.Stderr, "speculative: accepted %d of %d draft tokens (%.1f%%), %.2f tokens per target pass (%d passes)\n",
				st.AcceptedTokens, st.DraftTokens, 100*st.AcceptanceRate(), st.TokensPerPass(), st.TargetPasses)
		}
		fmt.Fprintf(r.m.Stderr, "peak memory: %.3f GB\n", float64(st.PeakMemory)/1e9)
	}
	if r.f.jsonStats {
		b := benchStats{
			Impl: "mlxgo", Model: r.path, PromptTokens: st.PromptTokens, GeneratedTokens: st.GeneratedTokens,
			PrefillTPS: st.PrefillTPS(), DecodeTPS: st.DecodeTPS(), Load: r.loadTime.Seconds(),
			PeakMemory: st.PeakMemory, WeightBytes: r.weightBytes, KVBytes: st.KVBytes, KVBytesPerToken: st.KVBytesPerToken,
			FinishReason: st.FinishReason, MLX: mlx.Version(),
			DraftTokens: st.DraftTokens, AcceptedTokens: st.AcceptedTokens, TargetPasses: st.TargetPasses,
			AcceptanceRate: st.AcceptanceRate(),
		}
		if p := r.f.shard.parallelism(); p.Kind != "" {
			b.Parallelism = p.String()
		}
		if !st.FirstToken.IsZero() {
			b.TTFT = st.FirstToken.Sub(processStart()).Seconds()
		}
		line, _ := json.Marshal(b)
		fmt.Fprintf(r.m.Stderr, "%s\n", line)
	}
}

// processStart is when the kernel started this process, so that time to
// first token includes everything before main. On Linux it is now minus the
// process's age, from /proc/uptime and /proc/self/stat's starttime (both in
// 10 ms units; /proc/stat's btime would add up to a second of error);
// elsewhere, when the program was initialised.
func processStart() time.Time {
	now := time.Now()
	stat, err1 := os.ReadFile("/proc/self/stat")
	up, err2 := os.ReadFile("/proc/uptime")
	if err1 != nil || err2 != nil {
		return initTime
	}
	// starttime is field 22 overall, the 20th after the command name's
	// closing parenthesis, in clock ticks since boot.
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	upFields := strings.Fields(string(up))
	if len(fields) < 20 || len(upFields) < 1 {
		return initTime
	}
	ticks, err1 := strconv.ParseFloat(fields[19], 64)
	uptime, err2 := strconv.ParseFloat(upFields[0], 64)
	if err1 != nil || err2 != nil || uptime < ticks/100 {
		return initTime
	}
	// USER_HZ is 100 on every Linux ABI Go supports.
	age := time.Duration((uptime - ticks/100) * float64(time.Second))
	return now.Add(-age)
}

var initTime = time.Now()

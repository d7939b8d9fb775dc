package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mlxgo/mlxgo/gen"
	"github.com/mlxgo/mlxgo/mlx"
	"github.com/mlxgo/mlxgo/models"
	"github.com/mlxgo/mlxgo/models/embed"
	"github.com/mlxgo/mlxgo/models/silero"
	"github.com/mlxgo/mlxgo/models/whisper"
	"github.com/mlxgo/mlxgo/server"
	"github.com/mlxgo/mlxgo/tok"
)

const serveUsage = `Usage: mlxgo serve [-m PATH] [flags]

Serves an OpenAI-compatible HTTP API over one model until SIGINT or
SIGTERM: POST /v1/chat/completions and /v1/completions (streaming or not;
also without /v1, as mlx_lm.server serves them), POST /v1/embeddings with
--embed-model, POST /v1/audio/transcriptions (and /v1/audio/translations
on multilingual models) with --whisper-model, GET /v1/models and /v1/models/ID, /health and /metrics
(Prometheus); OpenAI's Responses API, POST /v1/responses and GET
/v1/responses/ID; and Anthropic's POST /v1/messages and
/v1/messages/count_tokens. One line with the URL
goes to stderr once the server accepts. On a signal it stops accepting,
lets running requests finish within the grace period, and exits 0.

PATH is as for mlxgo generate (model directory, .gguf file, or a Hugging
Face repo id in the local cache); without -m, the default model. A
sentence-transformers directory (one with modules.json) is an embedding
model: it is served on /v1/embeddings alone, and the completion endpoints
answer 404 naming it. --whisper-model without -m serves the Whisper model
alone (the completion endpoints answer 404 naming it).

Flags:
	-m, --model PATH          the model (default: the default model)
` + adapterUsageServe + `	--embed-model PATH        also serve POST /v1/embeddings with this
	                          embedding model (as for mlxgo embed -m)
	--whisper-model DIR       also serve POST /v1/audio/transcriptions with this
	                          Whisper model (as for mlxgo transcribe -m; its
	                          tokenizer.json beside it); uploads up to 25 MiB,
	                          each transcription a job of the same queue, run
	                          window by window between generation steps
	--vad-model FILE          with --whisper-model: cut each upload to the speech
	                          Silero VAD v5 finds in it (silero_vad_v5.onnx, as
	                          mlxgo transcribe --vad; times stay in its clock)
	--host HOST               address to listen on (default 127.0.0.1)
	--port N                  port (default 8080; 0 picks a free one)
	--batch N                 rows decoded together: the cap of the one
	                          continuously batched decode; 1 runs one request
	                          at a time (the serial mechanism, the same
	                          pipelined loop); the rest wait in the queue
	                          (default 1)
	--max-tokens N            max_tokens of a request that gives none
	--temp, --temperature T   temperature of a request that gives none
	--top-p P, --top-k K, --min-p P
	                          likewise for top_p, top_k and min_p
	                          A request's own field wins, then these flags,
	                          then the model's generation_config.json
	                          (temperature, top_p, top_k, min_p,
	                          repetition_penalty, max_new_tokens; none of
	                          its sampling values when do_sample is false),
	                          then mlx_lm.server's defaults (temperature 0,
	                          top_p 1, top_k 0, min_p 0, max_tokens 512).
	                          x_mlxgo.sampling_from says which applied.
	--prompt-cache-bytes N    KV bytes the prompt cache keeps (default 536870912;
	                          0 turns it off)
	--draft-model PATH        speculative decoding with this draft model (as
	                          mlx_lm.server: one request at a time, so --batch 1;
	                          it must have the model's vocabulary); requests may
	                          set num_draft_tokens, and draft_model only to it
	--num-draft-tokens N      tokens the draft proposes per pass (default 3)
` + kvUsage + `	                          A kv_config.json beside the weights (optiq's
	                          per-layer format) quantizes the layers it lists
	                          unless --kv-bits is given; quantized KV needs
	                          --batch 1
	--response-store N        /v1/responses answers kept for
	                          previous_response_id (default 256; 0: none)
	--api-key KEY             require "Authorization: Bearer KEY" (default: none;
	                          $MLXGO_API_KEY is read when the flag is absent)
	--cors ORIGIN             allow browsers from ORIGIN ("*" for any)
	--max-queue N             requests that may wait beside the --batch rows
	                          running (choices of n count one each, an
	                          embeddings request one); more get 429
	                          (default 64)
	--shard tensor|pipeline   one rank of a model split over processes, started
	                          by mlxgo launch (see mlxgo launch -h): rank 0
	                          serves, the other ranks follow its every step
	--request-timeout D       end a request after D, e.g. 2m (default: none)
	--shutdown-grace D        how long running requests may finish after a
	                          signal (default 10s)
` + runtimeUsage + `
Example:
	$ mlxgo serve -m ./Qwen3-0.6B-4bit --port 8000 &
	$ curl -s localhost:8000/v1/chat/completions -d '{"messages":[{"role":"user","content":"Hi"}]}'
	$ mlxgo serve -m ./Qwen3-0.6B-4bit --embed-model ./all-MiniLM-L6-v2 &
	$ curl -s localhost:8080/v1/embeddings -d '{"input":["A cat sits.","Ein Hund läuft."]}'
`

type serveCommand struct{ m *Main }

type serveFlags struct {
	model, host, apiKey, cors string
	embedModel, whisperModel  string
	vadModel                  string
	draftModel                string
	numDraft                  int
	port, batch, maxTokens    int
	maxQueue, cacheBytes      int
	responseStore             int
	kv                        kvFlags
	timeout, grace            time.Duration
	rt                        runtimeFlags
	adapters                  adapterFlags
	sampling                  server.SamplingDefaults // the sampling flags given
	shard                     shardFlags
	onServer                  func(*server.Server) // called once the server is made (serveRanks)
}

func (c *serveCommand) parse(args []string) (*serveFlags, error) {
	f := &serveFlags{}
	fs := c.m.newFlagSet("serve", serveUsage)
	fs.StringVar(&f.model, "m", "", "")
	fs.StringVar(&f.model, "model", "", "")
	f.adapters.register(fs.FlagSet, true)
	fs.StringVar(&f.embedModel, "embed-model", "", "")
	fs.StringVar(&f.whisperModel, "whisper-model", "", "")
	fs.StringVar(&f.vadModel, "vad-model", "", "")
	fs.StringVar(&f.host, "host", "127.0.0.1", "")
	fs.IntVar(&f.port, "port", 8080, "")
	fs.IntVar(&f.batch, "batch", 1, "")
	fs.IntVar(&f.maxTokens, "max-tokens", 512, "")
	var temp, topP, minP float64
	var topK int
	fs.Float64Var(&temp, "temp", 0, "")
	fs.Float64Var(&temp, "temperature", 0, "")
	fs.Float64Var(&topP, "top-p", 1, "")
	fs.Float64Var(&minP, "min-p", 0, "")
	fs.IntVar(&topK, "top-k", 0, "")
	fs.IntVar(&f.cacheBytes, "prompt-cache-bytes", 512<<20, "")
	fs.StringVar(&f.draftModel, "draft-model", "", "")
	fs.IntVar(&f.numDraft, "num-draft-tokens", gen.DefaultNumDraftTokens, "")
	f.kv.register(fs.FlagSet)
	fs.IntVar(&f.responseStore, "response-store", 256, "")
	fs.StringVar(&f.apiKey, "api-key", os.Getenv("MLXGO_API_KEY"), "")
	fs.StringVar(&f.cors, "cors", "", "")
	fs.IntVar(&f.maxQueue, "max-queue", 64, "")
	fs.DurationVar(&f.timeout, "request-timeout", 0, "")
	fs.DurationVar(&f.grace, "shutdown-grace", 10*time.Second, "")
	f.rt.register(fs)
	f.shard.register(fs.FlagSet)
	if err := c.m.parseFlags(fs, args); err != nil {
		return nil, err
	}
	if err := f.rt.resolve(os.Getenv); err != nil {
		return nil, err
	}
	// Only the flags given are defaults: the others leave the field to
	// generation_config.json and mlx_lm.server's defaults.
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "temp", "temperature":
			f.sampling.Temperature = &temp
		case "top-p":
			f.sampling.TopP = &topP
		case "top-k":
			f.sampling.TopK = &topK
		case "min-p":
			f.sampling.MinP = &minP
		case "max-tokens":
			f.sampling.MaxTokens = &f.maxTokens
		}
	})
	if err := f.sampling.Validate("serve"); err != nil {
		return nil, usageError{err.Error()}
	}
	if err := f.kv.check(fs.FlagSet); err != nil {
		return nil, err
	}
	if err := f.adapters.check(true); err != nil {
		return nil, err
	}
	switch {
	case fs.NArg() > 0:
		return nil, usagef("unexpected argument %q", fs.Arg(0))
	case f.vadModel != "" && f.whisperModel == "":
		return nil, usagef("--vad-model cuts uploads to /v1/audio: it needs --whisper-model DIR")
	case f.port < 0 || f.port > 65535:
		return nil, usagef("--port must be between 0 and 65535")
	case f.batch < 1:
		return nil, usagef("--batch must be at least 1")
	case f.maxTokens < 1 || f.maxQueue < 1:
		return nil, usagef("--max-tokens and --max-queue must be at least 1")
	case f.cacheBytes < 0 || f.timeout < 0 || f.grace <= 0 || f.responseStore < 0:
		return nil, usagef("--prompt-cache-bytes, --request-timeout and --response-store must not be negative; --shutdown-grace must be positive")
	case f.kv.bits > 0 && f.batch > 1:
		return nil, usagef("--kv-bits cannot be combined with --batch %d: continuous batching does not quantize rows; use --batch 1", f.batch)
	case f.draftModel != "" && f.batch > 1:
		return nil, usagef("--draft-model cannot be combined with --batch %d: speculative decoding runs one request at a time, as mlx_lm.server does; use --batch 1", f.batch)
	case f.draftModel != "" && f.kv.maxKV > 0:
		return nil, usagef("--draft-model cannot be used with --max-kv-size (speculative decoding trims its caches, and a rotating cache cannot be trimmed once full)")
	case f.numDraft < 0:
		return nil, usagef("--num-draft-tokens must be 0 or more")
	case f.shard.on() && f.draftModel != "":
		return nil, usagef("--draft-model cannot be combined with --shard %s: speculative decoding is not distributed yet", f.shard.kind)
	case f.shard.on() && len(f.adapters.specs) > 0:
		return nil, usagef("LoRA adapters cannot be combined with --shard %s yet: they are not split with the weights", f.shard.kind)
	case f.shard.on() && f.model == "" && f.whisperModel != "":
		return nil, usagef("--shard %s splits a chat model (-m); the Whisper model runs on rank 0 alone", f.shard.kind)
	}
	return f, nil
}

func (c *serveCommand) Run(ctx context.Context, args []string) error {
	f, err := c.parse(args)
	if err != nil {
		return err
	}
	if f.model == "" && f.whisperModel != "" {
		if f.embedModel != "" {
			return usagef("--embed-model goes beside a chat model (-m); --whisper-model alone serves only /v1/audio")
		}
		return c.serveAudioOnly(ctx, f)
	}
	path, err := resolveModel(f.model, os.Getenv)
	if err != nil {
		return err
	}
	if err := loadMLX(ctx, &f.rt); err != nil {
		return err
	}
	follower := f.shard.follower()
	if follower {
		// A follower serves nothing itself: the side models are rank 0's.
		f.whisperModel, f.embedModel, f.vadModel = "", "", ""
	}
	var tr *server.Transcriber
	if f.whisperModel != "" {
		if tr, err = loadTranscriber(f.whisperModel, f.vadModel); err != nil {
			return err
		}
		defer mlx.Do(func() error { tr.Model.Close(); return nil })
	}
	if isEmbeddingModel(path) {
		if f.shard.on() {
			return usagef("--shard %s splits a chat model; %s is an embedding model", f.shard.kind, path)
		}
		if f.embedModel != "" {
			return usagef("-m %s is an embedding model already; --embed-model goes beside a chat model", f.model)
		}
		return c.serveEmbeddingsOnly(ctx, f, path, tr)
	}
	var emb *server.Embeddings
	if f.embedModel != "" {
		em, err := loadEmbeddings(f.embedModel, f.rt.load(models.LoadOptions{}))
		if err != nil {
			return err
		}
		defer em.Model.Close()
		emb = em
	}
	genCfg, err := server.ReadGenerationConfig(path)
	if err != nil {
		return err
	}
	if d := genCfg.String(); d != "" && !follower {
		fmt.Fprintf(c.m.Stderr, "mlxgo: sampling defaults from generation_config.json: %s\n", d)
	}
	t, err := tok.Load(path)
	if err != nil {
		return fmt.Errorf("cannot load the tokenizer of %s: %w", path, err)
	}
	t.Truncation, t.Padding = nil, nil // never cut a prompt silently
	var model models.Model
	if err := mlx.Do(func() (err error) { model, err = f.shard.load(path, f.rt.load(f.adapters.options())); return err }); err != nil {
		return fmt.Errorf("cannot load model %s: %w", path, err)
	}
	defer mlx.Do(model.Close)
	id := servedModelID(f.model, path)
	if !follower {
		logAdapters(c.m.Stderr, model.Info(), id)
	}
	sm := server.NewMLXModel(model, t, id, "mlxgo "+Version, f.cacheBytes)
	sm.Grammars = gen.NewGrammars(t, sm.VocabSize, sm.EOS)
	if sm, err = c.withKV(f, path, sm); err != nil {
		return err
	}
	if f.batch > 1 {
		if sm, err = server.WithBatch(sm, f.batch); err != nil {
			return err
		}
	}
	if f.draftModel != "" {
		d, err := startDraft(f.draftModel, os.Getenv)
		if err != nil {
			return err
		}
		if err := mlx.Do(func() error { return d.load(t) }); err != nil {
			return err
		}
		defer mlx.Do(d.model.Close)
		if sm, err = server.WithDraft(sm, d.model, servedModelID(f.draftModel, d.path), d.path, f.numDraft); err != nil {
			return err
		}
		fmt.Fprintf(c.m.Stderr, "mlxgo: speculative decoding with draft model %s, %d tokens per pass\n", d.path, f.numDraft)
	}
	if f.shard.on() {
		return c.serveRanks(ctx, f, sm, emb, tr, id, genCfg)
	}
	if emb != nil {
		id += " and " + emb.ID
	}
	if tr != nil {
		id += " and " + tr.ID
	}
	return c.listen(ctx, f, sm, emb, tr, id, genCfg)
}

// serveRanks serves a model split over the ranks of a distributed group
// (--shard): rank 0 serves HTTP and leads, the other ranks follow its
// engine step by step (server/distributed.go) until it dismisses them. A
// rank or a link that fails stops rank 0's serving with an error (exit 1;
// the launcher then stops every rank).
func (c *serveCommand) serveRanks(ctx context.Context, f *serveFlags, sm server.Model, emb *server.Embeddings, tr *server.Transcriber, id string, genCfg server.SamplingDefaults) error {
	// MLX's ring writes to its peers' sockets from its own threads: once a
	// peer is gone, SIGPIPE would kill this process before the failed
	// collective could end the requests with an error.
	signal.Ignore(syscall.SIGPIPE)
	signalled := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var fatal error
	rk := &server.Ranks{Group: f.shard.g, Parallelism: f.shard.parallelism(), Fatal: func(err error) {
		fatal = err
		cancel()
	}}
	sm, err := server.WithRanks(sm, rk)
	if err != nil {
		return err
	}
	r := sm.Runner.(*server.MLXRunner)
	if f.shard.follower() {
		return r.Follow()
	}
	fmt.Fprintf(c.m.Stderr, "mlxgo: parallel: %s (rank 0 serves, the other ranks follow)\n", rk.Parallelism)
	var srv atomic.Pointer[server.Server]
	f.onServer = func(s *server.Server) { srv.Store(s) }
	stop := make(chan struct{})
	defer close(stop)
	go c.watchRanks(rk, &srv, signalled, stop)
	go r.Lead(stop)
	if emb != nil {
		id += " and " + emb.ID
	}
	if tr != nil {
		id += " and " + tr.ID
	}
	err = c.listen(ctx, f, sm, emb, tr, id, genCfg)
	r.Dismiss()
	if fatal != nil {
		return fmt.Errorf("stopped serving: %w", fatal)
	}
	return err
}

// listen serves model (and emb when not nil) with the flags' limits.
func (c *serveCommand) listen(ctx context.Context, f *serveFlags, model server.Model, emb *server.Embeddings, tr *server.Transcriber, id string, genCfg server.SamplingDefaults) error {
	responseStore := f.responseStore
	if responseStore == 0 {
		responseStore = -1 // the flag's 0 keeps none; Config's 0 is the default
	}
	srv, err := server.New(server.Config{
		Model: model, Embeddings: emb, Transcriber: tr,
		MaxTokens: 512, // mlx_lm.server's --max-tokens default, below the flag and generation_config.json
		Flags:     f.sampling, GenerationConfig: genCfg,
		APIKey: f.apiKey, CORSOrigin: f.cors, MaxQueue: f.maxQueue,
		RequestTimeout: f.timeout, ShutdownGrace: f.grace,
		ResponseStore: responseStore,
	})
	if err != nil {
		return err
	}
	if f.onServer != nil {
		f.onServer(srv)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(f.host, strconv.Itoa(f.port)))
	if err != nil {
		return fmt.Errorf("cannot listen on %s:%d: %w", f.host, f.port, err)
	}
	return srv.Serve(ctx, ln, func(url string) {
		fmt.Fprintf(c.m.Stderr, "mlxgo: serving %s on %s\n", id, url)
	})
}

// withKV applies the KV flags, or else the model's kv_config.json.
func (c *serveCommand) withKV(f *serveFlags, path string, sm server.Model) (server.Model, error) {
	o := f.kv.options()
	if !f.kv.bitsSet {
		layers, err := server.ReadKVConfig(path)
		if err != nil {
			return sm, err
		}
		if layers != nil {
			o.Layers = layers
			fmt.Fprintf(c.m.Stderr, "mlxgo: kv cache quantized per layer by %s (%d layers listed; --kv-bits overrides it)\n", server.KVConfigFile, len(layers))
		}
	} else if layers, _ := server.ReadKVConfig(path); layers != nil {
		fmt.Fprintf(c.m.Stderr, "mlxgo: warning: --kv-bits %d replaces the model's %s\n", f.kv.bits, server.KVConfigFile)
	}
	if len(o.Layers) > 0 && f.kv.maxKV > 0 {
		return sm, usagef("--max-kv-size cannot be combined with the model's %s (a rotating cache cannot be quantized); give --kv-bits 0 to ignore the file", server.KVConfigFile)
	}
	return server.WithKV(sm, o, f.kv.start)
}

// isEmbeddingModel: a sentence-transformers directory lists its modules.
func isEmbeddingModel(path string) bool {
	st, err := os.Stat(filepath.Join(path, "modules.json"))
	return err == nil && st.Mode().IsRegular()
}

// loadEmbeddings loads an embedding model for /v1/embeddings.
func loadEmbeddings(arg string, opts models.LoadOptions) (*server.Embeddings, error) {
	path, err := resolveModel(arg, os.Getenv)
	if err != nil {
		return nil, err
	}
	m, err := embed.LoadWith(path, opts)
	if err != nil {
		return nil, fmt.Errorf("cannot load embedding model %s: %w", path, err)
	}
	return server.NewEmbeddings(m, path, servedModelID(arg, path), "mlxgo "+Version), nil
}

// serveEmbeddingsOnly serves an embedding model alone: the completion
// endpoints refuse with 404 naming it (see server.NotChatModel).
func (c *serveCommand) serveEmbeddingsOnly(ctx context.Context, f *serveFlags, path string, tr *server.Transcriber) error {
	emb, err := loadEmbeddings(path, f.rt.load(models.LoadOptions{}))
	if err != nil {
		return err
	}
	defer emb.Model.Close()
	t, err := tok.Load(path)
	if err != nil {
		return fmt.Errorf("cannot load the tokenizer of %s: %w", path, err)
	}
	model := server.Model{ID: emb.ID, Tokenizer: t, ContextLength: emb.Model.MaxLen, Fingerprint: emb.Fingerprint,
		Composition: emb.Composition, Runner: server.EmbeddingOnlyRunner{ID: emb.ID}}
	id := emb.ID
	if tr != nil {
		id += " and " + tr.ID
	}
	return c.listen(ctx, f, model, emb, tr, id, server.SamplingDefaults{})
}

// loadTranscriber loads a Whisper model directory for /v1/audio (on the
// MLX executor; the caller closes tr.Model there).
func loadTranscriber(dir, vadModel string) (*server.Transcriber, error) {
	var vad *silero.Model
	if vadModel != "" {
		var err error
		if vad, err = silero.Load(vadModel); err != nil {
			return nil, err
		}
	}
	if st, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("cannot load whisper model: %w", err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("cannot load whisper model: %s is not a directory", dir)
	}
	var m *whisper.Model
	if err := mlx.Do(func() (err error) { m, err = whisper.Load(dir); return err }); err != nil {
		return nil, fmt.Errorf("cannot load whisper model: %w", err)
	}
	tk, err := whisper.LoadTokenizer(filepath.Join(dir, "tokenizer.json"), m.Dims, "", "transcribe")
	if err != nil {
		mlx.Do(func() error { m.Close(); return nil })
		return nil, err
	}
	tr := server.NewTranscriber(m, tk, dir, servedModelID(dir, dir), "mlxgo "+Version)
	tr.VAD = vad
	return tr, nil
}

// serveAudioOnly serves a Whisper model alone: the completion endpoints
// refuse with 404 naming it (server.NotChatModelAudio).
func (c *serveCommand) serveAudioOnly(ctx context.Context, f *serveFlags) error {
	if err := loadMLX(ctx, &f.rt); err != nil {
		return err
	}
	tr, err := loadTranscriber(f.whisperModel, f.vadModel)
	if err != nil {
		return err
	}
	defer mlx.Do(func() error { tr.Model.Close(); return nil })
	model := server.Model{ID: tr.ID, Tokenizer: tr.Tokenizer.Text(), Fingerprint: tr.Fingerprint,
		Composition: tr.Composition, Runner: server.AudioOnlyRunner{ID: tr.ID}}
	return c.listen(ctx, f, model, nil, tr, tr.ID, server.SamplingDefaults{})
}

// watchRanks ends rank 0 when its step has waited too long for the other
// ranks: MLX's ring can wait forever on a peer killed mid-collective (its
// pending task fails, the next one never runs), and the native call cannot
// be interrupted. After a signal (the launcher's SIGTERM, sent as soon as a
// rank fails) a step still under way 0.5 s later is taken as lost; without one,
// $MLXGO_STEP_TIMEOUT (a Go duration, default 2m). Every request in flight
// then gets an OpenAI error, and the process exits 1.
func (c *serveCommand) watchRanks(rk *server.Ranks, srv *atomic.Pointer[server.Server], signalled context.Context, stop <-chan struct{}) {
	limit := 2 * time.Minute
	if d, err := time.ParseDuration(os.Getenv("MLXGO_STEP_TIMEOUT")); err == nil && d > 0 {
		limit = d
	}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	var since time.Time // when the signal came
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		d := rk.Stalled()
		if since.IsZero() && signalled.Err() != nil {
			since = time.Now()
		}
		lost := d > limit
		if !since.IsZero() && d > 500*time.Millisecond && time.Since(since) > 500*time.Millisecond {
			lost = true
		}
		if !lost {
			continue
		}
		err := fmt.Errorf("%w: rank 0's step has waited %v for the other ranks", server.ErrRankLost, d.Round(time.Millisecond))
		if s := srv.Load(); s != nil {
			s.Abandon(err)
			time.Sleep(300 * time.Millisecond) // the handlers write their errors
		}
		fmt.Fprintf(c.m.Stderr, "mlxgo: error: stopped serving: %v\n", err)
		os.Exit(1)
	}
}

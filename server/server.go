// Package server is mlxgo's OpenAI-compatible HTTP API (`mlxgo serve`):
// request decoding and validation, chat-template rendering and tokenization,
// server-sent event streaming, errors in OpenAI's shape, Prometheus metrics,
// and the engine that runs completion executions.
//
// Handlers never touch MLX. They validate, tokenize and submit jobs
// (completions, embeddings) to one bounded queue of the engine, whose one
// goroutine owns the model. There is one scheduler, gen.Batch behind the
// Runner: --batch N caps its rows, and a cap of one is what the execution
// composition records as the serial mechanism. Every row goes through the
// prompt cache on the MLX executor; embeddings run between the batch's
// steps.
package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mlxgo/mlxgo/gen"
	"github.com/mlxgo/mlxgo/models"
	"github.com/mlxgo/mlxgo/tok"
)

// Model is the served model as the HTTP layer sees it.
type Model struct {
	ID            string // the name /v1/models lists and responses carry
	Tokenizer     *tok.Tokenizer
	ContextLength int // 0: unknown, unchecked
	VocabSize     int
	EOS           []int32
	// Grammars compiles structured-output constraints for this model's
	// vocabulary; nil: response_format and forced tool calls are refused.
	Grammars *gen.Grammars
	// Fingerprint computes the artifact fingerprint; it is called once, in
	// the background from Serve, because hashing the weights takes a while.
	Fingerprint func() (string, error)
	// Composition is the fixed part of every execution composition: model
	// runtime, numeric scheme and fidelity contract.
	Composition Composition
	Runner      Runner
	// Adapters are the LoRA adapters requests may choose (adapters.go).
	Adapters []Adapter
	// Parallelism is the model's split over processes (WithRanks); the
	// zero value is one process.
	Parallelism models.Parallelism
}

// Config is how the server runs.
type Config struct {
	Model          Model
	MaxTokens      int           // max_tokens when neither the request, Flags nor GenerationConfig gives it (mlx_lm.server: 512)
	APIKey         string        // "": no authentication
	CORSOrigin     string        // "": no CORS headers
	MaxQueue       int           // waiting requests beyond which 429 is returned
	RequestTimeout time.Duration // 0: none
	MaxBodyBytes   int64         // 0: 4 MiB
	ShutdownGrace  time.Duration // 0: 10 s
	// Embeddings answers POST /v1/embeddings (nil: 404 naming the model).
	Embeddings *Embeddings
	// Transcriber answers POST /v1/audio/transcriptions and translations
	// (nil: 404 naming the model).
	Transcriber *Transcriber
	// Flags and GenerationConfig are the sampling defaults of serve's flags
	// and of the model's generation_config.json, in that order of
	// precedence below the request's own fields (defaults.go).
	Flags, GenerationConfig SamplingDefaults
	// Now is the clock responses are stamped with (nil: time.Now).
	Now func() time.Time
	// ResponseStore is how many /v1/responses responses are kept for
	// previous_response_id (0: 256; negative: none).
	ResponseStore int
}

// Server is the HTTP API over one model.
type Server struct {
	cfg     Config
	m       *metrics
	eng     *engine
	fpOnce  func() (string, error)
	created int64
	tmpl    templateCache
	// responses are the stored /v1/responses answers (responses_store.go).
	responses *responseStore
	// abandon cancels every request's context with a cause (Abandon);
	// set by Serve.
	abandonMu sync.Mutex
	abandon   context.CancelCauseFunc
}

// Abandon ends every request in flight with err, from outside the engine:
// each handler answers with err as an OpenAI error (an error chunk when
// streaming) without waiting for the engine, which may never step again (a
// distributed model whose rank died mid-collective). It does not stop
// Serve.
func (s *Server) Abandon(err error) {
	s.abandonMu.Lock()
	defer s.abandonMu.Unlock()
	if s.abandon != nil {
		s.abandon(err)
	}
}

// New checks cfg and returns a server; call Serve to run it.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Model.Tokenizer == nil || cfg.Model.Runner == nil:
		return nil, errors.New("cannot start the server: a tokenizer and a runner are required")
	case cfg.MaxTokens < 1:
		return nil, errors.New("cannot start the server: the default max tokens must be at least 1")
	case cfg.MaxQueue < 1:
		return nil, errors.New("cannot start the server: the queue must hold at least 1 request")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 4 << 20
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = 10 * time.Second
	}
	if cfg.Model.ID == "" {
		cfg.Model.ID = "mlxgo"
	}
	if e := cfg.Embeddings; e != nil && e.BatchSize <= 0 {
		e.BatchSize = 32
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ResponseStore == 0 {
		cfg.ResponseStore = 256
	}
	for src, d := range map[string]SamplingDefaults{"the sampling flags": cfg.Flags, "generation_config.json": cfg.GenerationConfig} {
		if err := d.Validate(src); err != nil {
			return nil, fmt.Errorf("cannot start the server: %w", err)
		}
	}
	fp := cfg.Model.Fingerprint
	if fp == nil {
		fp = func() (string, error) { return "", errors.New("no artifact fingerprint") }
	}
	s := &Server{cfg: cfg, m: newMetrics(), fpOnce: sync.OnceValues(fp), created: cfg.Now().Unix(),
		responses: newResponseStore(cfg.ResponseStore)}
	s.m.ranks.set(float64(max(1, cfg.Model.Parallelism.Size)))
	s.eng = newEngine(cfg.Model.Runner, cfg.MaxQueue, s.m)
	return s, nil
}

// Serve answers on ln until ctx is cancelled, then stops accepting, lets
// in-flight requests finish within the shutdown grace, cancels the rest and
// returns nil. ready, if not nil, is called once the server accepts.
func (s *Server) Serve(ctx context.Context, ln net.Listener, ready func(url string)) error {
	go s.fpOnce() // hash the weights while the first requests come in
	if e := s.cfg.Embeddings; e != nil {
		go e.Fingerprint()
	}
	if t := s.cfg.Transcriber; t != nil {
		go t.Fingerprint()
	}
	go s.eng.run()
	base, cancelCause := context.WithCancelCause(context.Background())
	cancelAll := func() { cancelCause(nil) }
	defer cancelAll()
	s.abandonMu.Lock()
	s.abandon = cancelCause
	s.abandonMu.Unlock()
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		// No WriteTimeout: a stream lasts as long as the generation;
		// --request-timeout bounds that instead.
		IdleTimeout:    120 * time.Second,
		MaxHeaderBytes: 64 << 10,
		BaseContext:    func(net.Listener) context.Context { return base },
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	if ready != nil {
		ready("http://" + ln.Addr().String())
	}
	select {
	case err := <-errc:
		s.eng.close()
		return fmt.Errorf("cannot serve: %w", err)
	case <-ctx.Done():
	}
	grace, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownGrace)
	defer cancel()
	err := hs.Shutdown(grace)
	if err != nil {
		// Grace is over: cancel what is still running so that the engine
		// ends it at its next token, and drop the connections.
		cancelAll()
		hs.Close()
	}
	s.eng.close()
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("cannot shut down: %w", err)
	}
	return nil
}

// Handler is the API's routes behind authentication, CORS and panic recovery.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	route := func(method, path string, h http.HandlerFunc) {
		mux.Handle(path, s.counted(path, func(w http.ResponseWriter, r *http.Request) {
			if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
				w.Header().Set("Allow", method)
				errorWriterFor(path)(w, &apiError{status: http.StatusMethodNotAllowed, typ: "invalid_request_error",
					message: fmt.Sprintf("method %s is not allowed on %s; use %s", r.Method, path, method)})
				return
			}
			h(w, r)
		}))
	}
	route(http.MethodPost, "/v1/chat/completions", s.handleChat)
	route(http.MethodPost, "/v1/completions", s.handleCompletion)
	// mlx_lm.server's paths without /v1, for clients configured with a
	// base URL that lacks it.
	route(http.MethodPost, "/chat/completions", s.handleChat)
	route(http.MethodPost, "/completions", s.handleCompletion)
	route(http.MethodPost, "/v1/messages", s.handleMessages)
	route(http.MethodPost, "/v1/messages/count_tokens", s.handleCountTokens)
	route(http.MethodPost, "/v1/responses", s.handleResponses)
	route(http.MethodGet, "/v1/responses/{id}", s.handleResponse)
	route(http.MethodPost, "/v1/embeddings", s.handleEmbeddings)
	route(http.MethodPost, "/v1/audio/transcriptions", s.handleTranscriptions)
	route(http.MethodPost, "/v1/audio/translations", s.handleTranslations)
	route(http.MethodGet, "/v1/models", s.handleModels)
	route(http.MethodGet, "/v1/models/{id...}", s.handleModel)
	route(http.MethodGet, "/health", s.handleHealth)
	route(http.MethodGet, "/metrics", s.handleMetrics)
	mux.Handle("/", s.counted("other", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{status: http.StatusNotFound, typ: "invalid_request_error", code: "not_found",
			message: fmt.Sprintf("there is no route %s %s", r.Method, r.URL.Path)})
	}))
	return mux
}

// errorWriterFor is the error shape of an endpoint: Anthropic's on the
// Messages API, OpenAI's everywhere else.
func errorWriterFor(endpoint string) errorWriter {
	if strings.HasPrefix(endpoint, "/v1/messages") {
		return writeAnthropicError
	}
	return writeOpenAIError
}

// statusWriter remembers the status for the requests counter.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// counted wraps every route: panic recovery into a 500 in OpenAI's shape
// (when nothing was written yet), authentication, CORS, and the requests
// counter by endpoint and status.
func (s *Server) counted(endpoint string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				if sw.status == 0 {
					errorWriterFor(endpoint)(sw, fmt.Errorf("internal error: %v", v))
				}
			}
			if sw.status == 0 {
				sw.status = http.StatusOK
			}
			s.m.request(endpoint, sw.status)
		}()
		if s.cors(sw, r) {
			return
		}
		if endpoint != "/health" && !s.authorized(r) {
			if strings.HasPrefix(endpoint, "/v1/messages") {
				w.Header().Set("WWW-Authenticate", `Bearer realm="mlxgo"`)
			}
			errorWriterFor(endpoint)(sw, &apiError{status: http.StatusUnauthorized, typ: "authentication_error", code: "invalid_api_key",
				message: "the API key is missing or wrong: send it as Authorization: Bearer KEY (or x-api-key: KEY)"})
			return
		}
		h(sw, r)
	})
}

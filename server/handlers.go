package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mlxgo/mlxgo/gen"
	"github.com/mlxgo/mlxgo/tok"
	"github.com/mlxgo/mlxgo/tok/chat"
)

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	s.complete(w, r, decodeChat)
}

func (s *Server) handleCompletion(w http.ResponseWriter, r *http.Request) {
	s.complete(w, r, decodeCompletion)
}

// complete is both completion endpoints: decode, then start the
// executions and answer in one body or as a stream.
func (s *Server) complete(w http.ResponseWriter, r *http.Request, decode func([]byte) (*params, error)) {
	p, ok := s.decodeBody(w, r, decode, writeOpenAIError)
	if !ok {
		return
	}
	rs, jobs, ok := s.start(w, r, p, writeOpenAIError)
	if !ok {
		return
	}
	if p.stream {
		s.stream(w, jobs, rs)
		return
	}
	s.collect(w, jobs, rs)
}

// writeOpenAIError is writeError as an errorWriter.
func writeOpenAIError(w http.ResponseWriter, err error) { writeError(w, err) }

// errorWriter writes an error in one API's shape (OpenAI's or Anthropic's).
type errorWriter func(http.ResponseWriter, error)

// decodeBody reads and decodes a completion request's body; a model that
// only embeds is refused first, since a template or tokenizer complaint
// would hide that it does not generate at all.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, decode func([]byte) (*params, error), fail errorWriter) (*params, bool) {
	if e, ok := s.cfg.Model.Runner.(EmbeddingOnlyRunner); ok {
		fail(w, NotChatModel(e.ID))
		return nil, false
	}
	if a, ok := s.cfg.Model.Runner.(AudioOnlyRunner); ok {
		fail(w, NotChatModelAudio(a.ID))
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		fail(w, err)
		return nil, false
	}
	p, err := decode(body)
	if err == nil {
		p.draft, err = decodeDraftFields(body)
	}
	if err != nil {
		fail(w, err)
		return nil, false
	}
	if p.adapter, err = decodeAdapterField(body); err != nil {
		fail(w, err)
		return nil, false
	}
	return p, true
}

// start tokenizes p, checks the context, resolves the sampling defaults and
// submits one completion execution per choice; on failure it has answered
// with fail.
func (s *Server) start(w http.ResponseWriter, r *http.Request, p *params, fail errorWriter) (*response, []*job, bool) {
	t := s.cfg.Model.Tokenizer
	adapter, err := s.adapterFor(p)
	if err != nil {
		fail(w, err)
		return nil, nil, false
	}
	feat := s.tmpl.features(t)
	if err := feat.check(p); err != nil {
		fail(w, err)
		return nil, nil, false
	}
	ids, err := s.tokenize(p, feat)
	if err != nil {
		fail(w, err)
		return nil, nil, false
	}
	rs := s.newResponse(p)
	rs.promptTokens = len(ids)
	rs.sampledFrom = s.resolveSampling(p)
	o, err := s.options(p, len(ids))
	if err == nil {
		err = s.checkDraft(p, &o)
	}
	if err != nil {
		fail(w, err)
		return nil, nil, false
	}
	if p.n > s.eng.capacity() {
		fail(w, invalidf("n", "n %d is more than this server runs and queues at once (%d: --batch + --max-queue)", p.n, s.eng.capacity()))
		return nil, nil, false
	}
	tools := feat.parsedTools(p)
	if p.chat {
		rs.features = describeFeatures(p, feat.think, tools)
	} else {
		rs.features = describeFeatures(p, nil, nil)
	}
	c, err := s.constrain(p, feat.tools, &o)
	if err != nil {
		fail(w, err)
		return nil, nil, false
	}
	if c != nil {
		rs.features = strings.TrimSpace(rs.features + " grammar=" + c.what)
	}
	s.useAdapter(rs, adapter)
	ctx := withAdapter(r.Context(), adapter)
	if s.cfg.RequestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.RequestTimeout)
		// The executions end with the request: its handler returns once
		// they have sent their final events, or the client is gone.
		context.AfterFunc(r.Context(), cancel)
	}
	// One completion execution per choice: rows of the batch when --batch
	// has room, else one after another; choice i draws from seed+i.
	jobs := make([]*job, p.n)
	for i, c := range rs.choices {
		co := o
		if p.logprobs {
			// Collected on the engine goroutine, formatted here as text is sent.
			c.lps = &logprobLog{}
			co.Logprobs, co.TopLogprobs = c.lps.add, p.topLogprobs
			if !p.chat {
				c.legacy = &legacyLogprobs{t: t, top: p.topLogprobs}
			}
		}
		if p.chat {
			// Chat text is split into content, reasoning and tool calls;
			// completions return the raw text, markers and all, as mlx-lm does.
			c.route = newRouter(feat.think, tools, p.tools.defs, feat.think.initialState(ids))
		}
		var seed *uint64
		if p.seed != nil {
			sd := *p.seed + uint64(i)
			seed = &sd
		}
		jobs[i] = &job{
			ctx: ctx, prompt: ids, opts: co, seed: seed,
			text:   gen.NewTextStream(t.NewDetokenizer(!feat.showSpecial), gen.NewStopMatcher(p.stops)),
			events: make(chan event, 64), queued: time.Now(), m: s.m,
		}
		c.stops = jobs[i].text.Stops()
	}
	if err := s.eng.submit(jobs...); err != nil {
		fail(w, err)
		return nil, nil, false
	}
	return rs, jobs, true
}

// options resolves the request into gen.Options, refusing (never cutting) a
// prompt that leaves no room for max_tokens in the context.
func (s *Server) options(p *params, promptLen int) (gen.Options, error) {
	ctxLen := s.cfg.Model.ContextLength
	maxTokens := p.maxTokens
	if !p.given["max_tokens"] {
		if ctxLen > 0 && promptLen < ctxLen {
			// A default (not asked for) shrinks to what fits.
			maxTokens = min(maxTokens, ctxLen-promptLen)
		}
	}
	if ctxLen > 0 && promptLen+maxTokens > ctxLen {
		return gen.Options{}, fmt.Errorf("%w: %d prompt tokens + %d max_tokens exceed the context length of %d tokens",
			gen.ErrContext, promptLen, maxTokens, ctxLen)
	}
	if p.sampler.XTCProbability > 0 && p.sampler.XTCSpecialTokens == nil {
		// mlx_lm.server: tokenizer.encode("\n") + eos_token_ids are never dropped.
		nl, err := s.cfg.Model.Tokenizer.Encode("\n", false)
		if err != nil {
			return gen.Options{}, err
		}
		p.sampler.XTCSpecialTokens = append(nl, s.cfg.Model.EOS...)
	}
	if err := p.sampler.Validate(s.cfg.Model.VocabSize); err != nil {
		return gen.Options{}, invalidf("top_k", "%v", err)
	}
	for id := range p.procs.LogitBias {
		if v := s.cfg.Model.VocabSize; v > 0 && int(id) >= v {
			return gen.Options{}, invalidf("logit_bias", "logit_bias token id %d is outside the vocabulary of %d", id, v)
		}
	}
	return gen.Options{
		MaxTokens: maxTokens, Sampler: p.sampler, Processors: p.procs,
		EOS: s.cfg.Model.EOS, ContextLength: ctxLen, VocabSize: s.cfg.Model.VocabSize,
	}, nil
}

// tokenize renders chat messages through the model's template (encoded
// without special tokens, as mlx_lm.server does) or encodes a completion
// prompt with them.
func (s *Server) tokenize(p *params, feat *modelFeatures) ([]int32, error) {
	t := s.cfg.Model.Tokenizer
	var ids []int32
	var err error
	switch {
	case p.chat:
		kwargs := p.kwargs
		if _, set := kwargs["enable_thinking"]; feat.think != nil && !set {
			// mlx-lm's apply_chat_template passes enable_thinking =
			// has_thinking unless the request says otherwise.
			kwargs = maps.Clone(kwargs)
			if kwargs == nil {
				kwargs = map[string]any{}
			}
			kwargs["enable_thinking"] = true
		}
		var text string
		if text, err = s.tmpl.render(t, p.messages, chat.Options{AddGenerationPrompt: true, Tools: p.tools.tools, Kwargs: kwargs}); err != nil {
			return nil, err
		}
		ids, err = t.Encode(text, false)
	case p.promptIDs != nil:
		for _, id := range p.promptIDs {
			if v := s.cfg.Model.VocabSize; v > 0 && int(id) >= v {
				return nil, invalidf("prompt", "prompt token id %d is outside the vocabulary of %d", id, v)
			}
		}
		ids = p.promptIDs
	default:
		ids, err = t.Encode(p.prompt, true)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot tokenize the prompt: %w", err)
	}
	if len(ids) == 0 {
		return nil, invalidf("prompt", "the prompt encodes to no tokens")
	}
	return ids, nil
}

// templateCache is the model's ChatTemplate, made at the first render,
// and what the tokenizer and template say about the model's features.
type templateCache struct {
	once     sync.Once
	tmpl     *ChatTemplate
	featOnce sync.Once
	feat     modelFeatures
}

// modelFeatures are the model's thinking markers and tool-call format,
// inferred once from its tokenizer and chat template as mlx-lm infers them.
type modelFeatures struct {
	think *thinkMarkers // nil: no reasoning split
	tools *toolFormat   // nil: the template has no tool calling
	// showSpecial: a marker is a special token, so special tokens must be
	// decoded for the router to see it (mlx-lm's detokenizers always
	// decode them).
	showSpecial bool
}

func (c *templateCache) features(t *tok.Tokenizer) *modelFeatures {
	c.featOnce.Do(func() {
		c.feat.think = inferThinking(t)
		c.feat.tools = inferToolFormat(t.Config().ChatTemplate, t)
		c.feat.showSpecial = c.feat.think != nil && c.feat.think.special
		if f := c.feat.tools; f != nil {
			for _, m := range []string{f.start, f.end} {
				if id, ok := t.TokenToID(m); ok && t.IsSpecial(id) {
					c.feat.showSpecial = true
				}
			}
		}
	})
	return &c.feat
}

// check refuses tools the model cannot be given: a template without a
// tool-call format would drop them without a word, and a format mlxgo
// cannot parse would return calls as text.
func (f *modelFeatures) check(p *params) error {
	if len(p.tools.tools) == 0 {
		return nil
	}
	switch {
	case f.tools == nil:
		return unsupported("tools", "the model's chat template has no tool-call format")
	case f.tools.parse == nil:
		return unsupported("tools", fmt.Sprintf("the model's tool-call format (mlx-lm's %s) is not implemented yet", f.tools.name))
	}
	return nil
}

// parsedTools is the format the router reads tool calls with: none when
// the request declares no tools (or tool_choice is "none", which hides
// them) or the format cannot be parsed. A model that writes a call nobody
// asked for has written text, and it is returned as content (mlx_lm.server
// parses calls even then).
func (f *modelFeatures) parsedTools(p *params) *toolFormat {
	if f.tools == nil || f.tools.parse == nil || len(p.tools.tools) == 0 {
		return nil
	}
	return f.tools
}

func (c *templateCache) render(t *tok.Tokenizer, messages []byte, o chat.Options) (string, error) {
	c.once.Do(func() { c.tmpl = NewChatTemplate(t) })
	out, err := c.tmpl.Render(messages, o)
	switch {
	case errors.Is(err, ErrNoChatTemplate):
		return "", invalidf("messages", "the model has no chat template; use /v1/completions with a prompt")
	case errors.Is(err, ErrChatRender):
		// Templates reject conversations they cannot render (roles that do
		// not alternate, ...): the request's fault.
		return "", invalidf("messages", "%v", err)
	}
	return out, err
}

// models is what /v1/models lists: the served model, then the embedding
// model when it is another one (--embed-model).
func (s *Server) models() []map[string]any {
	fp, _ := s.fpOnce()
	x := map[string]any{"artifact_fingerprint": fp, "context_length": s.cfg.Model.ContextLength}
	if p := s.cfg.Model.Parallelism; p.Kind != "" {
		x["parallelism"] = map[string]any{"kind": p.Kind, "size": p.Size, "backend": p.Backend}
	}
	out := []map[string]any{{
		"id": s.cfg.Model.ID, "object": "model", "created": s.created, "owned_by": "mlxgo",
		"x_mlxgo": x,
	}}
	out = append(out, s.adapterEntries()...)
	if e := s.cfg.Embeddings; e != nil && e.ID != s.cfg.Model.ID {
		efp, _ := e.Fingerprint()
		out = append(out, map[string]any{
			"id": e.ID, "object": "model", "created": s.created, "owned_by": "mlxgo",
			"x_mlxgo": map[string]any{"artifact_fingerprint": efp, "context_length": e.Model.MaxLen,
				"endpoints": []string{"/v1/embeddings"}, "dimensions": e.Model.Dims},
		})
	}
	if t := s.cfg.Transcriber; t != nil && t.ID != s.cfg.Model.ID {
		out = append(out, t.modelEntry(s.created))
	}
	return out
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": s.models()})
}

// handleModel is GET /v1/models/{id}: the model object, or OpenAI's 404.
func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	for _, m := range s.models() {
		if m["id"] == id {
			writeJSON(w, http.StatusOK, m)
			return
		}
	}
	writeError(w, &apiError{status: http.StatusNotFound, typ: "invalid_request_error", param: "model", code: "model_not_found",
		message: fmt.Sprintf("the model %q does not exist: this server serves %s", id, s.modelIDs())})
}

func (s *Server) modelIDs() string {
	var ids []string
	for _, m := range s.models() {
		ids = append(ids, fmt.Sprintf("%q", m["id"]))
	}
	return strings.Join(ids, " and ")
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	s.m.write(w)
}

func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// errClientGone ends a stream whose client stopped reading.
var errClientGone = errors.New("the client closed the connection")

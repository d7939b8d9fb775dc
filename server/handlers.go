package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
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

// complete is both completion endpoints: decode, tokenize, check the
// context, queue, then answer in one body or as a stream.
func (s *Server) complete(w http.ResponseWriter, r *http.Request, decode func([]byte) (*params, error)) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		writeError(w, err)
		return
	}
	p, err := decode(body)
	if err != nil {
		writeError(w, err)
		return
	}
	ids, err := s.tokenize(p)
	if err != nil {
		writeError(w, err)
		return
	}
	o, err := s.options(p, len(ids))
	if err != nil {
		writeError(w, err)
		return
	}
	ctx := r.Context()
	if s.cfg.RequestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.RequestTimeout)
		defer cancel()
	}
	j := &job{
		ctx: ctx, prompt: ids, opts: o, seed: p.seed,
		detok: s.cfg.Model.Tokenizer.NewDetokenizer(true), stops: gen.NewStopMatcher(p.stops),
		events: make(chan event, 64), queued: time.Now(), m: s.m,
	}
	if err := s.eng.submit(j); err != nil {
		writeError(w, err)
		return
	}
	rs := s.newResponse(p)
	if p.stream {
		s.stream(w, j, rs)
		return
	}
	var text []byte
	for {
		ev := j.next()
		if !ev.done {
			text = append(text, ev.text...)
			continue
		}
		if ev.err != nil {
			writeError(w, ev.err)
			return
		}
		writeJSON(w, http.StatusOK, rs.full(string(text), ev.res))
		return
	}
}

// options resolves the request into gen.Options, refusing (never cutting) a
// prompt that leaves no room for max_tokens in the context.
func (s *Server) options(p *params, promptLen int) (gen.Options, error) {
	ctxLen := s.cfg.Model.ContextLength
	maxTokens := p.maxTokens
	if maxTokens == 0 {
		maxTokens = s.cfg.MaxTokens
		if ctxLen > 0 && promptLen < ctxLen {
			// A default (not asked for) shrinks to what fits.
			maxTokens = min(maxTokens, ctxLen-promptLen)
		}
	}
	if ctxLen > 0 && promptLen+maxTokens > ctxLen {
		return gen.Options{}, fmt.Errorf("%w: %d prompt tokens + %d max_tokens exceed the context length of %d tokens",
			gen.ErrContext, promptLen, maxTokens, ctxLen)
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
func (s *Server) tokenize(p *params) ([]int32, error) {
	t := s.cfg.Model.Tokenizer
	var ids []int32
	var err error
	switch {
	case p.chat:
		var text string
		if text, err = s.tmpl.render(t, p.messages, chat.Options{AddGenerationPrompt: true, Kwargs: p.kwargs}); err != nil {
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

// templateCache parses the chat template once; renders are serialised
// because the template engine's thread safety is not promised.
type templateCache struct {
	once sync.Once
	mu   sync.Mutex
	tmpl *chat.Template
	err  error
}

func (c *templateCache) render(t *tok.Tokenizer, messages []byte, o chat.Options) (string, error) {
	c.once.Do(func() {
		cfg := t.Config()
		if cfg.ChatTemplate == "" {
			c.err = invalidf("messages", "the model has no chat template; use /v1/completions with a prompt")
			return
		}
		c.tmpl, c.err = chat.New(cfg.ChatTemplate, chat.SpecialTokens{BOS: cfg.BOS, EOS: cfg.EOS, PAD: cfg.PAD, UNK: cfg.UNK})
	})
	if c.err != nil {
		return "", c.err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out, err := c.tmpl.RenderJSON(messages, o)
	if err != nil {
		// Templates reject conversations they cannot render (roles that do
		// not alternate, ...): the request's fault.
		return "", invalidf("messages", "cannot render the chat template: %v", err)
	}
	return out, nil
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	fp, _ := s.fpOnce()
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list",
		"data": []any{map[string]any{
			"id": s.cfg.Model.ID, "object": "model", "created": s.created, "owned_by": "mlxgo",
			"x_mlxgo": map[string]any{"artifact_fingerprint": fp, "context_length": s.cfg.Model.ContextLength},
		}},
	})
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

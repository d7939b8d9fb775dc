package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/mlxgo/mlxgo/gen"
)

// Composition is a request's execution composition (DESIGN.md §9), sent as
// the x_mlxgo extension field: what ran, how, and what it is claimed to
// equal. The Model sets the fixed part; the server fills in the rest per
// request, from what was actually resolved.
type Composition struct {
	ArtifactFingerprint string `json:"artifact_fingerprint"`
	ModelRuntime        string `json:"model_runtime"` // e.g. "mlxgo dev, MLX 0.32.4 (cpu)"
	WeightScheme        string `json:"weight_scheme"` // activation dtype and quantization
	KVScheme            string `json:"kv_scheme"`     // KV cache dtype and quantization
	Scheduling          string `json:"scheduling"`    // serial or continuous
	BatchRows           int    `json:"batch_rows"`    // rows in the batch at admission (prefilling or decoding), itself included
	CachedPromptTokens  int    `json:"cached_tokens"` // prompt tokens from the prompt cache
	Sampling            string `json:"sampling"`      // the resolved sampler and processors
	// RequestFeatures are the output features in effect: the tool-call
	// format read, the reasoning split, log-probabilities ("" when none).
	RequestFeatures  string `json:"request_features,omitempty"`
	FidelityContract string `json:"fidelity_contract"`
}

type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// response builds the bodies and chunks of one request's answer. It also
// holds the answer's routing state: the router that splits chat text into
// content, reasoning and tool calls, and the log-probabilities collected
// for it.
type response struct {
	s      *Server
	chat   bool
	id     string
	model  string
	object string
	p      *params
	route  *router         // chat only; nil: all text is content
	lps    *logprobLog     // nil: no log-probabilities asked for
	legacy *legacyLogprobs // completions' logprobs shape
	calls  int             // tool calls sent so far (a stream's delta index)
	// features describes the resolved output features for x_mlxgo.
	features string
}

// describeFeatures records the output features resolved for a request:
// the tool-call format (mlx-lm's parser name) and the reasoning markers
// its text is routed by, and the log-probabilities asked for.
func describeFeatures(p *params, think *thinkMarkers, tools *toolFormat) string {
	var f []string
	if tools != nil {
		f = append(f, fmt.Sprintf("tool_calls=%s tools=%d", tools.name, len(p.tools.tools)))
	}
	if think != nil && p.chat {
		f = append(f, "reasoning_split="+think.start+"..."+think.end)
	}
	if p.logprobs {
		f = append(f, fmt.Sprintf("logprobs top=%d", p.topLogprobs))
	}
	return strings.Join(f, " ")
}

func (s *Server) newResponse(p *params) *response {
	r := &response{s: s, chat: p.chat, model: s.cfg.Model.ID, p: p}
	if p.chat {
		r.id, r.object = newID("chatcmpl-"), "chat.completion"
	} else {
		r.id, r.object = newID("cmpl-"), "text_completion"
	}
	return r
}

func (r *response) usage(res Result) usage {
	var u usage
	u.PromptTokens = res.Stats.PromptTokens + res.CachedTokens
	u.CompletionTokens = res.Stats.GeneratedTokens
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	u.PromptTokensDetails.CachedTokens = res.CachedTokens
	return u
}

func (r *response) composition(res Result) Composition {
	c := r.s.cfg.Model.Composition
	c.ArtifactFingerprint, _ = r.s.fpOnce()
	c.Scheduling, c.BatchRows = res.Scheduling, res.BatchRows
	if c.Scheduling == "" {
		// A Result from before admission (an error) has none.
		c.Scheduling, c.BatchRows = SchedulingSerial, 1
	}
	c.CachedPromptTokens = res.CachedTokens
	c.Sampling = describeSampling(r.p)
	c.RequestFeatures = r.features
	return c
}

// describeSampling records the resolved sampler, defaults included.
func describeSampling(p *params) string {
	s := p.sampler
	out := "greedy"
	if !s.Greedy() {
		out = fmt.Sprintf("temp=%g top_p=%g top_k=%d min_p=%g", s.Temp, s.TopP, s.TopK, s.MinP)
	}
	if p.seed != nil {
		out += fmt.Sprintf(" seed=%d", *p.seed)
	}
	if pr := p.procs; pr.RepetitionPenalty != 0 || pr.PresencePenalty != 0 || pr.FrequencyPenalty != 0 || len(pr.LogitBias) > 0 {
		out += fmt.Sprintf(" repetition_penalty=%g presence_penalty=%g frequency_penalty=%g logit_bias=%d",
			pr.RepetitionPenalty, pr.PresencePenalty, pr.FrequencyPenalty, len(pr.LogitBias))
	}
	return out
}

func (r *response) finishReason(res Result) string {
	if res.Stats.FinishReason == "" {
		return gen.FinishLength
	}
	if res.Stats.FinishReason == gen.FinishStop && r.route != nil && r.route.madeToolCall() {
		return "tool_calls"
	}
	return res.Stats.FinishReason
}

// push routes one chunk of generated text.
func (r *response) push(text string) piece {
	if r.route == nil {
		return piece{content: text}
	}
	return r.route.push(text)
}

// finish routes what the router still holds once generation has ended.
func (r *response) finish() piece {
	if r.route == nil {
		return piece{}
	}
	return r.route.finish()
}

// logprobs formats the log-probabilities collected since the last call, or
// returns nil (JSON null) when none were asked for.
func (r *response) logprobs() any {
	if r.lps == nil {
		return nil
	}
	items := r.lps.take()
	if r.chat {
		return chatLogprobs(r.s.cfg.Model.Tokenizer, items, r.p.topLogprobs)
	}
	return r.legacy.format(items)
}

// toolCalls is the tool_calls array; a stream's deltas carry an index.
func (r *response) toolCalls(calls []toolCall, stream bool) []any {
	out := make([]any, len(calls))
	for i, c := range calls {
		tc := map[string]any{"id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": c.Arguments}}
		if stream {
			tc["index"] = r.calls
			r.calls++
		}
		out[i] = tc
	}
	return out
}

// full is the non-streaming body.
func (r *response) full(pc piece, res Result) map[string]any {
	choice := map[string]any{"index": 0, "logprobs": r.logprobs(), "finish_reason": r.finishReason(res)}
	if r.chat {
		msg := map[string]any{"role": "assistant", "content": pc.content}
		if pc.reasoning != "" {
			msg["reasoning_content"] = pc.reasoning
		}
		if len(pc.calls) > 0 {
			msg["tool_calls"] = r.toolCalls(pc.calls, false)
			if strings.TrimSpace(pc.content) == "" {
				// A pure tool call (the blank line a template puts between
				// </think> and the call is not an answer): null, as OpenAI
				// sends it.
				msg["content"] = nil
			}
		}
		choice["message"] = msg
	} else {
		choice["text"] = pc.content
	}
	return map[string]any{
		"id": r.id, "object": r.object, "created": r.s.created, "model": r.model,
		"choices": []any{choice}, "usage": r.usage(res), "x_mlxgo": r.composition(res),
	}
}

// chunk is one streamed piece; finish is "" until the last choice chunk.
func (r *response) chunk(pc piece, first bool, finish string) map[string]any {
	choice := map[string]any{"index": 0, "logprobs": r.logprobs(), "finish_reason": nil}
	if finish != "" {
		choice["finish_reason"] = finish
	}
	if r.chat {
		delta := map[string]any{}
		if first {
			delta["role"] = "assistant"
		}
		if pc.content != "" || first {
			delta["content"] = pc.content
		}
		if pc.reasoning != "" {
			delta["reasoning_content"] = pc.reasoning
		}
		if len(pc.calls) > 0 {
			delta["tool_calls"] = r.toolCalls(pc.calls, true)
		}
		choice["delta"] = delta
	} else {
		choice["text"] = pc.content
	}
	c := map[string]any{"id": r.id, "object": r.object + ".chunk", "created": r.s.created, "model": r.model, "choices": []any{choice}}
	if !r.chat {
		c["object"] = r.object
	}
	if r.p.includeUsage {
		c["usage"] = nil
	}
	return c
}

// stream answers with server-sent events as the engine produces text.
func (s *Server) stream(w http.ResponseWriter, j *job, r *response) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return errClientGone
		}
		return rc.Flush()
	}
	if r.chat {
		// The role comes first, before any text, as OpenAI sends it.
		if send(r.chunk(piece{}, true, "")) != nil {
			return
		}
	}
	for {
		ev := j.next()
		if !ev.done {
			// Text held back by the router (a possible marker, a tool
			// call not yet closed) is not sent; its log-probabilities ride
			// on the next chunk that is.
			pc := r.push(ev.text)
			if pc.empty() {
				continue
			}
			if send(r.chunk(pc, false, "")) != nil {
				return // the request context ends; the engine stops at its next token
			}
			continue
		}
		if ev.err != nil {
			send(statusOf(ev.err).body())
			return
		}
		last := r.chunk(r.finish(), false, r.finishReason(ev.res))
		last["x_mlxgo"] = r.composition(ev.res)
		if send(last) != nil {
			return
		}
		if r.p.includeUsage {
			u := map[string]any{"id": r.id, "object": last["object"], "created": s.created, "model": r.model,
				"choices": []any{}, "usage": r.usage(ev.res)}
			if send(u) != nil {
				return
			}
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
		rc.Flush()
		return
	}
}

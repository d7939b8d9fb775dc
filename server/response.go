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
	// SamplingFrom says where each resolved sampling value came from:
	// request, flag, generation_config.json or default (defaults.go).
	SamplingFrom map[string]string `json:"sampling_from,omitempty"`
	// RequestFeatures are the output features in effect: the tool-call
	// format read, the reasoning split, log-probabilities ("" when none).
	RequestFeatures  string `json:"request_features,omitempty"`
	FidelityContract string `json:"fidelity_contract"`
	// Speculative is the acceleration method when a draft model decoded
	// the request (speculative.go); nil otherwise.
	Speculative *Speculation `json:"speculative,omitempty"`
	// Parallelism is how the model is split over processes ("tensor x2
	// over ring", serve --shard); "" for one process.
	Parallelism string `json:"parallelism,omitempty"`
}

type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// response builds the bodies and chunks of one request's answer: one
// choice per completion execution (n of them), each with its own routing
// state.
type response struct {
	s       *Server
	chat    bool
	id      string
	model   string
	object  string
	created int64 // when this response was made (OpenAI's created)
	p       *params
	choices []*choice
	// features describes the resolved output features for x_mlxgo;
	// sampledFrom where each sampling value came from.
	features     string
	sampledFrom  map[string]string
	promptTokens int // the prompt's length, before any of it is found cached
}

// choice is the answer state of one completion execution: the router that
// splits chat text into content, reasoning and tool calls, the
// log-probabilities collected for it, and what a stream has sent.
type choice struct {
	index  int
	route  *router         // chat only; nil: all text is content
	lps    *logprobLog     // nil: no log-probabilities asked for
	legacy *legacyLogprobs // completions' logprobs shape
	calls  int             // tool calls sent so far (a stream's delta index)
	// A stream holds back content that is only whitespace until it knows
	// whether an answer follows: the blank line a template puts before a
	// tool call is not one, and the non-streamed reply has content null.
	held     string
	sentText bool // content other than whitespace has been sent
	all      piece
	res      Result
	done     bool
	stops    *gen.StopMatcher // the job's; read once its final event is in
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
	if p.n > 1 {
		f = append(f, fmt.Sprintf("n=%d", p.n))
	}
	if p.thinkBudget > 0 {
		f = append(f, fmt.Sprintf("thinking_budget=%d(not enforced: max_tokens bounds thinking and answer together)", p.thinkBudget))
	}
	return strings.Join(f, " ")
}

func (s *Server) newResponse(p *params) *response {
	r := &response{s: s, chat: p.chat, model: s.cfg.Model.ID, p: p, created: s.cfg.Now().Unix()}
	switch {
	case p.messagesAPI:
		r.id, r.object = newID("msg_"), "message"
	case p.chat:
		r.id, r.object = newID("chatcmpl-"), "chat.completion"
	default:
		r.id, r.object = newID("cmpl-"), "text_completion"
	}
	for i := range p.n {
		r.choices = append(r.choices, &choice{index: i})
	}
	return r
}

// usage counts the prompt once (every choice continues the same prompt, as
// OpenAI bills it) and the tokens of every choice.
func (r *response) usage() usage {
	var u usage
	first := r.choices[0].res
	u.PromptTokens = first.Stats.PromptTokens + first.CachedTokens
	for _, c := range r.choices {
		u.CompletionTokens += c.res.Stats.GeneratedTokens
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	u.PromptTokensDetails.CachedTokens = first.CachedTokens
	return u
}

func (r *response) composition() Composition {
	c := r.s.cfg.Model.Composition
	c.ArtifactFingerprint, _ = r.s.fpOnce()
	first := r.choices[0].res
	c.Scheduling, c.BatchRows = first.Scheduling, 0
	for _, ch := range r.choices {
		c.BatchRows = max(c.BatchRows, ch.res.BatchRows)
	}
	if c.Scheduling == "" {
		// A Result from before admission (an error) has none.
		c.Scheduling, c.BatchRows = SchedulingSerial, 1
	}
	c.CachedPromptTokens = first.CachedTokens
	c.Sampling = describeSampling(r.p)
	c.SamplingFrom = r.sampledFrom
	c.RequestFeatures = r.features
	c.Speculative = r.speculation()
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
		if p.n > 1 {
			out += "+choice" // choice i draws from seed+i
		}
	}
	if pr := p.procs; pr.RepetitionPenalty != 0 || pr.PresencePenalty != 0 || pr.FrequencyPenalty != 0 || len(pr.LogitBias) > 0 {
		out += fmt.Sprintf(" repetition_penalty=%g presence_penalty=%g frequency_penalty=%g logit_bias=%d",
			pr.RepetitionPenalty, pr.PresencePenalty, pr.FrequencyPenalty, len(pr.LogitBias))
	}
	return out
}

func (c *choice) finishReason() string {
	if c.res.Stats.FinishReason == "" {
		return gen.FinishLength
	}
	if c.res.Stats.FinishReason == gen.FinishStop && c.route != nil && c.route.madeToolCall() {
		return "tool_calls"
	}
	return c.res.Stats.FinishReason
}

// push routes one chunk of generated text.
func (c *choice) push(text string) piece {
	if c.route == nil {
		return piece{content: text}
	}
	return c.route.push(text)
}

// finish routes what the router still holds once generation has ended.
func (c *choice) finish() piece {
	if c.route == nil {
		return piece{}
	}
	return c.route.finish()
}

// add gathers a piece for the non-streamed body.
func (c *choice) add(pc piece) {
	c.all.content += pc.content
	c.all.reasoning += pc.reasoning
	c.all.calls = append(c.all.calls, pc.calls...)
}

// streamed is what of pc a stream sends now: content that is only
// whitespace waits (held) until content that is not follows, and is
// dropped at the end if the choice made tool calls and said nothing else,
// so that the stream adds up to the non-streamed message.
func (c *choice) streamed(pc piece, last bool) piece {
	if c.route == nil || c.route.tools == nil {
		return pc
	}
	text := c.held + pc.content
	c.held = ""
	if !c.sentText && strings.TrimSpace(text) == "" {
		c.held, text = text, ""
		if last && !c.route.madeToolCall() {
			c.held, text = "", c.held
		}
	} else if text != "" {
		c.sentText = true
	}
	pc.content = text
	return pc
}

// logprobs formats the log-probabilities collected since the last call, or
// returns nil (JSON null) when none were asked for.
func (r *response) logprobs(c *choice) any {
	if c.lps == nil {
		return nil
	}
	items := c.lps.take()
	if r.chat {
		return chatLogprobs(r.s.cfg.Model.Tokenizer, items, r.p.topLogprobs)
	}
	return c.legacy.format(items)
}

// toolCalls is the tool_calls array; a stream's deltas carry an index.
func (c *choice) toolCalls(calls []toolCall, stream bool) []any {
	out := make([]any, len(calls))
	for i, tc := range calls {
		call := map[string]any{"id": tc.ID, "type": "function", "function": map[string]any{"name": tc.Name, "arguments": tc.Arguments}}
		if stream {
			call["index"] = c.calls
			c.calls++
		}
		out[i] = call
	}
	return out
}

// full is the non-streaming body.
func (r *response) full() map[string]any {
	choices := make([]any, len(r.choices))
	for i, c := range r.choices {
		pc := c.all
		ch := map[string]any{"index": c.index, "logprobs": r.logprobs(c), "finish_reason": c.finishReason()}
		if r.chat {
			msg := map[string]any{"role": "assistant", "content": pc.content}
			if pc.reasoning != "" {
				// mlx_lm.server's name and the one OpenAI-compatible
				// reasoning clients read.
				msg["reasoning"], msg["reasoning_content"] = pc.reasoning, pc.reasoning
			}
			if len(pc.calls) > 0 {
				msg["tool_calls"] = c.toolCalls(pc.calls, false)
				if strings.TrimSpace(pc.content) == "" {
					// A pure tool call (the blank line a template puts between
					// </think> and the call is not an answer): null, as OpenAI
					// sends it.
					msg["content"] = nil
				}
			}
			ch["message"] = msg
		} else {
			ch["text"] = pc.content
		}
		choices[i] = ch
	}
	return map[string]any{
		"id": r.id, "object": r.object, "created": r.created, "model": r.model,
		"choices": choices, "usage": r.usage(), "x_mlxgo": r.composition(),
	}
}

// chunk is one streamed piece of choice c; finish is "" until its last
// chunk.
func (r *response) chunk(c *choice, pc piece, first bool, finish string) map[string]any {
	ch := map[string]any{"index": c.index, "logprobs": r.logprobs(c), "finish_reason": nil}
	if finish != "" {
		ch["finish_reason"] = finish
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
			delta["reasoning"], delta["reasoning_content"] = pc.reasoning, pc.reasoning
		}
		if len(pc.calls) > 0 {
			delta["tool_calls"] = c.toolCalls(pc.calls, true)
		}
		ch["delta"] = delta
	} else {
		ch["text"] = pc.content
	}
	out := map[string]any{"id": r.id, "object": r.object + ".chunk", "created": r.created, "model": r.model, "choices": []any{ch}}
	if !r.chat {
		out["object"] = r.object
	}
	if r.p.includeUsage {
		out["usage"] = nil
	}
	return out
}

// choiceEvent is an engine event of choice index.
type choiceEvent struct {
	index int
	ev    event
}

// merge reads the events of every job (one per choice) into one channel,
// in the order they come, until each has sent its final event or quit is
// closed.
func merge(jobs []*job, quit <-chan struct{}) <-chan choiceEvent {
	out := make(chan choiceEvent)
	for i, j := range jobs {
		go func() {
			for {
				ev := j.next()
				select {
				case out <- choiceEvent{i, ev}:
				case <-quit:
					return
				}
				if ev.done {
					return
				}
			}
		}()
	}
	return out
}

// collect answers with one body once every choice has ended.
func (s *Server) collect(w http.ResponseWriter, jobs []*job, r *response) {
	if gather(w, jobs, r, func(w http.ResponseWriter, err error) { writeError(w, err) }) {
		writeJSON(w, http.StatusOK, r.full())
	}
}

// streamOne streams one job (Anthropic messages, responses): each piece of
// text through write as it comes, then the final piece once the job is done.
// On the job's error it calls fail, the API's error event. It reports
// whether the job finished and every write went out; a failed write means
// the request context ended, and the engine stops at its next token.
func streamOne(jobs []*job, c *choice, write func(piece) error, fail func(error)) bool {
	quit := make(chan struct{})
	defer close(quit)
	for ce := range merge(jobs, quit) {
		ev := ce.ev
		if !ev.done {
			if write(c.streamed(c.push(ev.text), false)) != nil {
				return false
			}
			continue
		}
		if ev.err != nil {
			fail(ev.err)
			return false
		}
		c.res, c.done = ev.res, true
		return write(c.streamed(c.finish(), true)) == nil
	}
	return false
}

// gather reads every job's events into r's choices until each is done, for
// the non-streamed answers of every API; on a job's error it answers with
// fail (the API's error shape) and reports false.
func gather(w http.ResponseWriter, jobs []*job, r *response, fail func(http.ResponseWriter, error)) bool {
	quit := make(chan struct{})
	defer close(quit)
	events := merge(jobs, quit)
	for left := len(jobs); left > 0; {
		ce := <-events
		c := r.choices[ce.index]
		if !ce.ev.done {
			c.add(c.push(ce.ev.text))
			continue
		}
		if ce.ev.err != nil {
			fail(w, ce.ev.err)
			return false
		}
		c.add(c.finish())
		c.res, c.done = ce.ev.res, true
		left--
	}
	return true
}

// stream answers with server-sent events as the engine produces text.
func (s *Server) stream(w http.ResponseWriter, jobs []*job, r *response) {
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
		for _, c := range r.choices {
			if send(r.chunk(c, piece{}, true, "")) != nil {
				return
			}
		}
	}
	quit := make(chan struct{})
	defer close(quit)
	events := merge(jobs, quit)
	for left := len(jobs); left > 0; {
		ce := <-events
		c, ev := r.choices[ce.index], ce.ev
		if !ev.done {
			// Text held back by the router (a possible marker, a tool
			// call not yet closed) is not sent; its log-probabilities ride
			// on the next chunk that is.
			pc := c.streamed(c.push(ev.text), false)
			if pc.empty() {
				continue
			}
			if send(r.chunk(c, pc, false, "")) != nil {
				return // the request context ends; the engine stops at its next token
			}
			continue
		}
		if ev.err != nil {
			send(statusOf(ev.err).body())
			return
		}
		c.res, c.done = ev.res, true
		left--
		last := r.chunk(c, c.streamed(c.finish(), true), false, c.finishReason())
		if left == 0 {
			last["x_mlxgo"] = r.composition()
		}
		if send(last) != nil {
			return
		}
	}
	if r.p.includeUsage {
		u := map[string]any{"id": r.id, "object": r.object + ".chunk", "created": r.created, "model": r.model,
			"choices": []any{}, "usage": r.usage()}
		if !r.chat {
			u["object"] = r.object
		}
		if send(u) != nil {
			return
		}
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	rc.Flush()
}

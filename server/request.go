package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/mlxgo/mlxgo/gen"
)

// commonFields are the fields /v1/chat/completions and /v1/completions share.
// Pointers tell "absent" from zero; fields we cannot honour are decoded so
// that a request using them is refused by name instead of silently served.
type commonFields struct {
	Model                 string             `json:"model"`
	MaxTokens             *int               `json:"max_tokens"`
	MaxCompletionTokens   *int               `json:"max_completion_tokens"`
	Temperature           *float64           `json:"temperature"`
	TopP                  *float64           `json:"top_p"`
	TopK                  *int               `json:"top_k"`
	MinP                  *float64           `json:"min_p"`
	XTCProbability        *float64           `json:"xtc_probability"` // mlx_lm.server's
	XTCThreshold          *float64           `json:"xtc_threshold"`
	Seed                  *int64             `json:"seed"`
	Stop                  json.RawMessage    `json:"stop"`
	PresencePenalty       *float64           `json:"presence_penalty"`
	PresenceContextSize   *int               `json:"presence_context_size"`
	FrequencyPenalty      *float64           `json:"frequency_penalty"`
	FrequencyContextSize  *int               `json:"frequency_context_size"`
	RepetitionPenalty     *float64           `json:"repetition_penalty"`
	RepetitionContextSize *int               `json:"repetition_context_size"`
	LogitBias             map[string]float64 `json:"logit_bias"`
	Logprobs              json.RawMessage    `json:"logprobs"` // bool (chat) or int (completions)
	TopLogprobs           *int               `json:"top_logprobs"`
	N                     *int               `json:"n"`
	Stream                bool               `json:"stream"`
	StreamOptions         *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type chatBody struct {
	commonFields
	Messages           []chatMessage   `json:"messages"`
	Tools              json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	ResponseFormat     json.RawMessage `json:"response_format"`
	ChatTemplateKwargs map[string]any  `json:"chat_template_kwargs"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       *string         `json:"name"`
	ToolCalls  json.RawMessage `json:"tool_calls"`
	ToolCallID *string         `json:"tool_call_id"`
}

type completionBody struct {
	commonFields
	Prompt json.RawMessage `json:"prompt"`
	Echo   bool            `json:"echo"`
	Suffix *string         `json:"suffix"`
	BestOf *int            `json:"best_of"`
}

// params is a validated request, ready to tokenize and run.
type params struct {
	chat         bool
	model        string
	adapter      string         // the adapters field (adapters.go)
	messages     []byte         // chat: the messages as a JSON array, content flattened to text
	kwargs       map[string]any // chat: chat_template_kwargs
	prompt       string         // completions: the prompt text
	promptIDs    []int32        // completions: a prompt given as token ids
	maxTokens    int            // 0: the server's default
	sampler      gen.SamplerOptions
	procs        gen.ProcessorOptions
	seed         *uint64
	stops        []string
	stream       bool
	includeUsage bool
	tools        toolRequest // chat: tools and tool_choice
	format       *constraint // chat: response_format's grammar; nil: free text
	logprobs     bool        // return each generated token's log-probability
	topLogprobs  int         // and this many alternatives (0..maxTopLogprobs)
	n            int         // choices to generate (1..maxChoices)
	messagesAPI  bool        // Anthropic's /v1/messages (messages.go)
	thinkBudget  int         // its thinking.budget_tokens (recorded, not enforced)
	// given names the sampling fields the request set itself; the others
	// take the server's defaults (defaults.go).
	given map[string]bool
	// draft is what the request asks of speculative decoding (speculative.go).
	draft draftRequest
}

// maxChoices bounds n, as OpenAI does.
const maxChoices = 128

// decodeChat parses and validates a /v1/chat/completions body.
func decodeChat(data []byte) (*params, error) {
	var b chatBody
	if err := unmarshalObject(data, &b); err != nil {
		return nil, err
	}
	if err := refuseUnhonoured(data); err != nil {
		return nil, err
	}
	p, err := b.commonFields.params()
	if err != nil {
		return nil, err
	}
	p.chat = true
	if p.format, err = decodeResponseFormat(b.ResponseFormat); err != nil {
		return nil, err
	}
	if p.tools, err = decodeToolRequest(b.Tools, b.ToolChoice); err != nil {
		return nil, err
	}
	if !isNull(b.Logprobs) {
		if json.Unmarshal(b.Logprobs, &p.logprobs) != nil {
			return nil, invalidf("logprobs", "logprobs must be a boolean")
		}
	}
	if c := b.TopLogprobs; c != nil {
		if *c < 0 || *c > maxTopLogprobs {
			return nil, invalidf("top_logprobs", "top_logprobs must be between 0 and %d", maxTopLogprobs)
		}
		if *c > 0 && !p.logprobs {
			return nil, invalidf("top_logprobs", "top_logprobs needs logprobs set to true")
		}
		p.topLogprobs = *c
	}
	if len(b.Messages) == 0 {
		return nil, invalidf("messages", "messages must be a non-empty array")
	}
	if p.messages, err = encodeMessages(b.Messages); err != nil {
		return nil, err
	}
	p.kwargs = b.ChatTemplateKwargs
	return p, nil
}

// decodeCompletion parses and validates a /v1/completions body.
func decodeCompletion(data []byte) (*params, error) {
	var b completionBody
	if err := unmarshalObject(data, &b); err != nil {
		return nil, err
	}
	if err := refuseUnhonoured(data); err != nil {
		return nil, err
	}
	p, err := b.commonFields.params()
	if err != nil {
		return nil, err
	}
	switch {
	case b.Echo:
		return nil, unsupported("echo", "the prompt is not echoed")
	case b.Suffix != nil && *b.Suffix != "":
		return nil, unsupported("suffix", "insertion is not implemented")
	case b.BestOf != nil && *b.BestOf != p.n:
		return nil, unsupported("best_of", "choices are not ranked: best_of must equal n (or be left out)")
	case b.TopLogprobs != nil:
		return nil, invalidf("top_logprobs", "top_logprobs is a chat field; /v1/completions takes logprobs: N")
	}
	if !isNull(b.Logprobs) {
		// The legacy field: how many alternatives to list per token.
		var n int
		if json.Unmarshal(b.Logprobs, &n) != nil || n < 0 || n > maxTopLogprobs {
			return nil, invalidf("logprobs", "logprobs must be an integer between 0 and %d", maxTopLogprobs)
		}
		p.logprobs, p.topLogprobs = true, n
	}
	if err := p.decodePrompt(b.Prompt); err != nil {
		return nil, err
	}
	return p, nil
}

// unmarshalObject decodes a JSON object body; anything else is a 400.
func unmarshalObject(data []byte, v any) error {
	if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
		return invalidf("", "the request body must be a JSON object")
	}
	return json.Unmarshal(data, v)
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// params checks the shared fields against what gen accepts.
func (c *commonFields) params() (*params, error) {
	p := &params{model: c.Model, stream: c.Stream, n: 1, given: map[string]bool{}}
	if c.StreamOptions != nil {
		if !c.Stream {
			return nil, invalidf("stream_options", "stream_options is only allowed when stream is true")
		}
		p.includeUsage = c.StreamOptions.IncludeUsage
	}
	if c.N != nil {
		if *c.N < 1 || *c.N > maxChoices {
			return nil, invalidf("n", "n must be between 1 and %d", maxChoices)
		}
		p.n = *c.N
	}
	for _, m := range []struct {
		name string
		v    *int
	}{{"max_tokens", c.MaxTokens}, {"max_completion_tokens", c.MaxCompletionTokens}} {
		if m.v != nil {
			if *m.v < 1 {
				return nil, invalidf(m.name, "%s must be at least 1", m.name)
			}
			p.maxTokens = *m.v
			p.given["max_tokens"] = true
		}
	}
	for _, f := range []struct {
		name string
		v    *float64
	}{{"temperature", c.Temperature}, {"top_p", c.TopP}, {"min_p", c.MinP}, {"presence_penalty", c.PresencePenalty}, {"frequency_penalty", c.FrequencyPenalty}, {"repetition_penalty", c.RepetitionPenalty}} {
		if f.v != nil && (math.IsNaN(*f.v) || math.IsInf(*f.v, 0)) {
			return nil, invalidf(f.name, "%s must be a finite number", f.name)
		}
	}
	if c.Temperature != nil {
		if *c.Temperature < 0 || *c.Temperature > 2 {
			return nil, invalidf("temperature", "temperature must be between 0 and 2")
		}
		p.sampler.Temp = *c.Temperature
		p.given["temperature"] = true
	}
	if c.TopP != nil {
		if *c.TopP <= 0 || *c.TopP > 1 {
			return nil, invalidf("top_p", "top_p must be in (0, 1]")
		}
		p.sampler.TopP = *c.TopP
		p.given["top_p"] = true
	}
	if c.MinP != nil {
		if *c.MinP < 0 || *c.MinP > 1 {
			return nil, invalidf("min_p", "min_p must be between 0 and 1")
		}
		p.sampler.MinP = *c.MinP
		p.given["min_p"] = true
	}
	if c.TopK != nil {
		if *c.TopK < 0 {
			return nil, invalidf("top_k", "top_k must not be negative")
		}
		p.sampler.TopK = *c.TopK
		p.given["top_k"] = true
	}
	// XTC as mlx_lm.server reads it: probability 0 (off) and threshold 0.1
	// unless given; the special tokens it spares are set in options().
	p.sampler.XTCThreshold = gen.DefaultXTCThreshold
	if c.XTCProbability != nil {
		if *c.XTCProbability < 0 || *c.XTCProbability > 1 {
			return nil, invalidf("xtc_probability", "xtc_probability must be between 0 and 1")
		}
		p.sampler.XTCProbability = *c.XTCProbability
	}
	if c.XTCThreshold != nil {
		if *c.XTCThreshold < 0 || *c.XTCThreshold > 0.5 {
			return nil, invalidf("xtc_threshold", "xtc_threshold must be between 0 and 0.5")
		}
		p.sampler.XTCThreshold = *c.XTCThreshold
	}
	if c.Seed != nil {
		s := uint64(*c.Seed)
		p.seed = &s
	}
	if c.PresencePenalty != nil {
		if *c.PresencePenalty < -2 || *c.PresencePenalty > 2 {
			return nil, invalidf("presence_penalty", "presence_penalty must be between -2 and 2")
		}
		p.procs.PresencePenalty = *c.PresencePenalty
	}
	if c.FrequencyPenalty != nil {
		if *c.FrequencyPenalty < -2 || *c.FrequencyPenalty > 2 {
			return nil, invalidf("frequency_penalty", "frequency_penalty must be between -2 and 2")
		}
		p.procs.FrequencyPenalty = *c.FrequencyPenalty
	}
	if c.RepetitionPenalty != nil {
		if *c.RepetitionPenalty < 0 {
			return nil, invalidf("repetition_penalty", "repetition_penalty must not be negative")
		}
		p.procs.RepetitionPenalty = *c.RepetitionPenalty
		p.given["repetition_penalty"] = true
	}
	for _, cs := range []struct {
		name string
		v    *int
		dst  *int
	}{
		{"repetition_context_size", c.RepetitionContextSize, &p.procs.RepetitionContextSize},
		{"presence_context_size", c.PresenceContextSize, &p.procs.PresenceContextSize},
		{"frequency_context_size", c.FrequencyContextSize, &p.procs.FrequencyContextSize},
	} {
		if cs.v != nil {
			if *cs.v < 1 {
				return nil, invalidf(cs.name, "%s must be at least 1", cs.name)
			}
			*cs.dst = *cs.v
		}
	}
	if len(c.LogitBias) > 0 {
		p.procs.LogitBias = make(map[int32]float32, len(c.LogitBias))
		for k, v := range c.LogitBias {
			id, err := strconv.ParseInt(k, 10, 32)
			if err != nil || id < 0 {
				return nil, invalidf("logit_bias", "logit_bias keys must be token ids, not %q", k)
			}
			if math.IsNaN(v) || v < -100 || v > 100 {
				return nil, invalidf("logit_bias", "logit_bias values must be between -100 and 100")
			}
			p.procs.LogitBias[int32(id)] = float32(v)
		}
	}
	stops, err := decodeStop(c.Stop)
	if err != nil {
		return nil, err
	}
	p.stops = stops
	return p, nil
}

// decodeStop accepts a string or an array of up to 4 strings (OpenAI's limit).
func decodeStop(raw json.RawMessage) ([]string, error) {
	if isNull(raw) {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, invalidf("stop", "stop must be a string or an array of strings")
	}
	if len(many) > 4 {
		return nil, invalidf("stop", "stop takes at most 4 strings")
	}
	return many, nil
}

// decodePrompt accepts a string, an array of one string, or an array of
// token ids; batches of prompts are refused (one choice per request).
func (p *params) decodePrompt(raw json.RawMessage) error {
	if isNull(raw) {
		return invalidf("prompt", "prompt is required")
	}
	if json.Unmarshal(raw, &p.prompt) == nil {
		if p.prompt == "" {
			return invalidf("prompt", "prompt must not be empty")
		}
		return nil
	}
	var texts []string
	if json.Unmarshal(raw, &texts) == nil {
		if len(texts) != 1 {
			return unsupported("prompt", "one prompt per request")
		}
		p.prompt = texts[0]
		if p.prompt == "" {
			return invalidf("prompt", "prompt must not be empty")
		}
		return nil
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '[' {
		return invalidf("prompt", "prompt must be a string, an array of one string, or an array of token ids")
	}
	ids, err := decodeTokenIDs(raw, "prompt")
	p.promptIDs = ids
	return err
}

// encodeMessages checks each message and writes them as a JSON array for the
// chat template: role, content (text parts joined, as mlx_lm.server does),
// then the optional fields in a fixed order, raw values kept byte for byte so
// tool-call arguments keep their key order.
func encodeMessages(msgs []chatMessage) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, m := range msgs {
		param := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "system", "user", "assistant", "tool", "developer":
		case "":
			return nil, invalidf(param+".role", "%s.role is required", param)
		default:
			return nil, invalidf(param+".role", "%s.role %q is not one of system, user, assistant, tool, developer", param, m.Role)
		}
		content, err := flattenContent(m.Content, param+".content", m.Role == "assistant" && !isNull(m.ToolCalls))
		if err != nil {
			return nil, err
		}
		if i > 0 {
			buf.WriteByte(',')
		}
		role, _ := json.Marshal(m.Role)
		fmt.Fprintf(&buf, `{"role":%s,"content":%s`, role, content)
		if m.Name != nil {
			name, _ := json.Marshal(*m.Name)
			fmt.Fprintf(&buf, `,"name":%s`, name)
		}
		if !isNull(m.ToolCalls) {
			calls, err := encodeToolCalls(m.ToolCalls, param+".tool_calls")
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(&buf, `,"tool_calls":%s`, calls)
		}
		if m.ToolCallID != nil {
			id, _ := json.Marshal(*m.ToolCallID)
			fmt.Fprintf(&buf, `,"tool_call_id":%s`, id)
		}
		buf.WriteByte('}')
	}
	buf.WriteByte(']')
	return buf.Bytes(), nil
}

// flattenContent returns content as a JSON string ("" for null where allowed).
func flattenContent(raw json.RawMessage, param string, nullOK bool) ([]byte, error) {
	if isNull(raw) {
		if nullOK {
			// An assistant turn that only calls tools: templates read
			// message.content, so it becomes "" as in mlx_lm.server.
			return []byte(`""`), nil
		}
		return nil, invalidf(param, "%s is required", param)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return json.Marshal(s)
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return nil, invalidf(param, "%s must be a string or an array of text parts", param)
	}
	var text string
	for j, part := range parts {
		if part.Type != "text" {
			return nil, unsupported(fmt.Sprintf("%s[%d].type", param, j), fmt.Sprintf("only text parts are accepted, not %q", part.Type))
		}
		if part.Text == nil {
			return nil, invalidf(fmt.Sprintf("%s[%d].text", param, j), "a text part needs text")
		}
		text += *part.Text
	}
	return json.Marshal(text)
}

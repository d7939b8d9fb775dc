package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/mlxgo/mlxgo/gen"
)

// This file is Anthropic's Messages API, POST /v1/messages and
// /v1/messages/count_tokens: the request becomes the same chat params as
// /v1/chat/completions (system and messages through the chat template,
// tool_use and tool_result blocks as tool calls and tool messages, tools as
// function tools), runs as one completion execution, and is answered in
// Anthropic's shapes, errors included.

type messagesBody struct {
	Model         string           `json:"model"`
	MaxTokens     *int             `json:"max_tokens"`
	System        json.RawMessage  `json:"system"`
	Messages      []messagesTurn   `json:"messages"`
	StopSequences []string         `json:"stop_sequences"`
	Temperature   *float64         `json:"temperature"`
	TopP          *float64         `json:"top_p"`
	TopK          *int             `json:"top_k"`
	Stream        bool             `json:"stream"`
	Tools         []messagesTool   `json:"tools"`
	ToolChoice    *messagesChoice  `json:"tool_choice"`
	Thinking      *messagesThink   `json:"thinking"`
	MCPServers    []map[string]any `json:"mcp_servers"`
}

type messagesTurn struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// messagesBlock is any content block; the fields used depend on Type.
type messagesBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

type messagesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type messagesChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
}

type messagesThink struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens"`
}

// decodeMessages parses and validates a /v1/messages body into chat params;
// forCount (count_tokens) does not require max_tokens.
func decodeMessages(data []byte, forCount bool) (*params, error) {
	var b messagesBody
	if err := unmarshalObject(data, &b); err != nil {
		return nil, err
	}
	if b.MaxTokens == nil && !forCount {
		return nil, invalidf("max_tokens", "max_tokens is required")
	}
	if len(b.MCPServers) > 0 {
		return nil, unsupported("mcp_servers", "MCP servers are not implemented")
	}
	if b.Temperature != nil && (*b.Temperature < 0 || *b.Temperature > 1) {
		return nil, invalidf("temperature", "temperature must be between 0 and 1")
	}
	c := commonFields{Model: b.Model, MaxTokens: b.MaxTokens, Temperature: b.Temperature, TopP: b.TopP, TopK: b.TopK, Stream: b.Stream}
	if forCount {
		c.MaxTokens, c.Stream = nil, false
	}
	p, err := c.params()
	if err != nil {
		return nil, err
	}
	p.chat, p.messagesAPI = true, true
	for _, s := range b.StopSequences {
		if s != "" {
			p.stops = append(p.stops, s)
		}
	}
	if th := b.Thinking; th != nil {
		switch th.Type {
		case "enabled":
			// budget_tokens is not enforced: max_tokens bounds thinking and
			// answer together (recorded in x_mlxgo.request_features).
			p.kwargs = map[string]any{"enable_thinking": true}
			p.thinkBudget = th.BudgetTokens
		case "disabled":
			p.kwargs = map[string]any{"enable_thinking": false}
		default:
			return nil, invalidf("thinking.type", "thinking.type must be \"enabled\" or \"disabled\", not %q", th.Type)
		}
	}
	tools, choice, err := messagesTools(b.Tools, b.ToolChoice)
	if err != nil {
		return nil, err
	}
	if p.tools, err = decodeToolRequest(tools, choice); err != nil {
		return nil, err
	}
	msgs, err := messagesToChat(b.System, b.Messages)
	if err != nil {
		return nil, err
	}
	if p.messages, err = encodeMessages(msgs); err != nil {
		return nil, err
	}
	return p, nil
}

// messagesTools turns Anthropic's tools and tool_choice into OpenAI's.
func messagesTools(tools []messagesTool, choice *messagesChoice) (json.RawMessage, json.RawMessage, error) {
	var rawChoice json.RawMessage
	if choice != nil {
		switch choice.Type {
		case "auto":
			rawChoice = json.RawMessage(`"auto"`)
		case "none":
			rawChoice = json.RawMessage(`"none"`)
		case "any":
			rawChoice = json.RawMessage(`"required"`) // a grammar forces a call (grammar.go)
		case "tool":
			if choice.Name == "" {
				return nil, nil, invalidf("tool_choice.name", "tool_choice of type tool needs the tool's name")
			}
			named, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": choice.Name}})
			rawChoice = named
		default:
			return nil, nil, invalidf("tool_choice.type", "tool_choice.type must be auto, any, tool or none, not %q", choice.Type)
		}
		if choice.DisableParallelToolUse {
			return nil, nil, unsupported("tool_choice.disable_parallel_tool_use", "the number of tool calls per turn cannot be limited")
		}
	}
	if len(tools) == 0 {
		return nil, rawChoice, nil
	}
	out := make([]any, len(tools))
	for i, t := range tools {
		param := fmt.Sprintf("tools[%d]", i)
		if t.Type != "" && t.Type != "custom" {
			return nil, nil, unsupported(param+".type", fmt.Sprintf("server tools (%q) are not implemented; give custom tools with input_schema", t.Type))
		}
		if t.Name == "" {
			return nil, nil, invalidf(param+".name", "%s.name is required", param)
		}
		fn := map[string]any{"name": t.Name}
		if t.Description != "" {
			fn["description"] = t.Description
		}
		if !isNull(t.InputSchema) {
			fn["parameters"] = t.InputSchema
		}
		out[i] = map[string]any{"type": "function", "function": fn}
	}
	raw, err := json.Marshal(out)
	return raw, rawChoice, err
}

// messagesToChat is the conversation as chat messages for the template:
// the system prompt first; a user turn's tool_result blocks become tool
// messages, then its text a user message; an assistant turn's text is its
// content and its tool_use blocks its tool calls. Thinking blocks of
// earlier turns are dropped, as chat templates drop earlier reasoning.
func messagesToChat(system json.RawMessage, turns []messagesTurn) ([]chatMessage, error) {
	var out []chatMessage
	str := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	if !isNull(system) {
		text, err := blocksText(system, "system")
		if err != nil {
			return nil, err
		}
		out = append(out, chatMessage{Role: "system", Content: str(text)})
	}
	if len(turns) == 0 {
		return nil, invalidf("messages", "messages must be a non-empty array")
	}
	for i, t := range turns {
		param := fmt.Sprintf("messages[%d]", i)
		if t.Role != "user" && t.Role != "assistant" {
			return nil, invalidf(param+".role", "%s.role must be \"user\" or \"assistant\", not %q", param, t.Role)
		}
		var text string
		if json.Unmarshal(t.Content, &text) == nil {
			out = append(out, chatMessage{Role: t.Role, Content: str(text)})
			continue
		}
		var blocks []messagesBlock
		if json.Unmarshal(t.Content, &blocks) != nil {
			return nil, invalidf(param+".content", "%s.content must be a string or an array of content blocks", param)
		}
		var texts strings.Builder
		var calls []any
		for j, bl := range blocks {
			bp := fmt.Sprintf("%s.content[%d]", param, j)
			switch {
			case bl.Type == "text":
				texts.WriteString(bl.Text)
			case bl.Type == "thinking" || bl.Type == "redacted_thinking":
				if t.Role != "assistant" {
					return nil, invalidf(bp+".type", "%s: thinking blocks belong to assistant turns", bp)
				}
			case bl.Type == "tool_use" && t.Role == "assistant":
				args := bl.Input
				if isNull(args) {
					args = json.RawMessage(`{}`)
				}
				if bl.Name == "" {
					return nil, invalidf(bp+".name", "%s.name is required", bp)
				}
				calls = append(calls, map[string]any{"id": bl.ID, "type": "function",
					"function": map[string]any{"name": bl.Name, "arguments": args}})
			case bl.Type == "tool_result" && t.Role == "user":
				result := ""
				if !isNull(bl.Content) {
					var err error
					if result, err = blocksText(bl.Content, bp+".content"); err != nil {
						return nil, err
					}
				}
				if bl.IsError {
					result = "Error: " + result
				}
				id := bl.ToolUseID
				out = append(out, chatMessage{Role: "tool", Content: str(result), ToolCallID: &id})
			default:
				return nil, unsupported(bp+".type", fmt.Sprintf("%q blocks are not accepted in a %s turn; only text, tool_use (assistant) and tool_result (user)", bl.Type, t.Role))
			}
		}
		if len(calls) > 0 {
			raw, _ := json.Marshal(calls)
			out = append(out, chatMessage{Role: "assistant", Content: str(texts.String()), ToolCalls: raw})
		} else if texts.Len() > 0 || t.Role == "assistant" {
			out = append(out, chatMessage{Role: t.Role, Content: str(texts.String())})
		}
	}
	return out, nil
}

// blocksText is a string, or the text of an array of text blocks.
func blocksText(raw json.RawMessage, param string) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var blocks []messagesBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return "", invalidf(param, "%s must be a string or an array of text blocks", param)
	}
	var b strings.Builder
	for j, bl := range blocks {
		if bl.Type != "text" {
			return "", unsupported(fmt.Sprintf("%s[%d].type", param, j), fmt.Sprintf("only text blocks are accepted, not %q", bl.Type))
		}
		b.WriteString(bl.Text)
	}
	return b.String(), nil
}

func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request) {
	p, ok := s.decodeBody(w, r, func(b []byte) (*params, error) { return decodeMessages(b, false) }, writeAnthropicError)
	if !ok {
		return
	}
	rs, jobs, ok := s.start(w, r, p, writeAnthropicError)
	if !ok {
		return
	}
	if p.stream {
		s.streamMessage(w, jobs, rs)
		return
	}
	if !gather(w, jobs, rs, writeAnthropicError) {
		return
	}
	c := rs.choices[0]
	var content []any
	if c.all.reasoning != "" {
		content = append(content, map[string]any{"type": "thinking", "thinking": c.all.reasoning, "signature": ""})
	}
	if c.all.content != "" && (len(c.all.calls) == 0 || strings.TrimSpace(c.all.content) != "") {
		content = append(content, map[string]any{"type": "text", "text": c.all.content})
	}
	for _, call := range c.all.calls {
		content = append(content, toolUseBlock(call))
	}
	if content == nil {
		content = []any{}
	}
	reason, seq := rs.stopReason(c)
	writeJSON(w, http.StatusOK, map[string]any{
		"id": rs.id, "type": "message", "role": "assistant", "model": rs.model, "content": content,
		"stop_reason": reason, "stop_sequence": seq, "usage": messagesUsage(c.res), "x_mlxgo": rs.composition(),
	})
}

// handleCountTokens is POST /v1/messages/count_tokens: the prompt's length
// after the chat template, as the model would see it.
func (s *Server) handleCountTokens(w http.ResponseWriter, r *http.Request) {
	p, ok := s.decodeBody(w, r, func(b []byte) (*params, error) { return decodeMessages(b, true) }, writeAnthropicError)
	if !ok {
		return
	}
	feat := s.tmpl.features(s.cfg.Model.Tokenizer)
	if err := feat.check(p); err != nil {
		writeAnthropicError(w, err)
		return
	}
	ids, err := s.tokenize(p, feat)
	if err != nil {
		writeAnthropicError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"input_tokens": len(ids)})
}

func toolUseBlock(c toolCall) map[string]any {
	return map[string]any{"type": "tool_use", "id": "toolu_" + strings.TrimPrefix(c.ID, "call_"), "name": c.Name,
		"input": json.RawMessage(c.Arguments)}
}

// stopReason is Anthropic's stop_reason and stop_sequence for a choice.
func (r *response) stopReason(c *choice) (string, any) {
	switch {
	case c.route != nil && c.route.madeToolCall():
		return "tool_use", nil
	case c.res.Stats.FinishReason == gen.FinishLength || c.res.Stats.FinishReason == "":
		return "max_tokens", nil
	case c.stops != nil && c.stops.Stopped():
		return "stop_sequence", c.stops.Matched()
	default:
		return "end_turn", nil
	}
}

// messagesUsage counts as Anthropic does: input_tokens are the prompt tokens
// not read from the prompt cache.
func messagesUsage(res Result) map[string]int {
	return map[string]int{"input_tokens": res.Stats.PromptTokens, "output_tokens": res.Stats.GeneratedTokens,
		"cache_read_input_tokens": res.CachedTokens, "cache_creation_input_tokens": 0}
}

// streamMessage answers with Anthropic's event sequence: message_start,
// then per content block (thinking, text, tool_use) content_block_start,
// its deltas and content_block_stop, then message_delta and message_stop.
func (s *Server) streamMessage(w http.ResponseWriter, jobs []*job, r *response) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(name string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b); err != nil {
			return errClientGone
		}
		return rc.Flush()
	}
	if send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": r.id, "type": "message", "role": "assistant", "model": r.model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]int{"input_tokens": r.promptTokens, "output_tokens": 0},
	}}) != nil {
		return
	}
	index, open := -1, "" // the open block's index and type
	closeBlock := func() error {
		if open == "" {
			return nil
		}
		open = ""
		return send("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
	}
	openBlock := func(kind string, block map[string]any) error {
		if err := closeBlock(); err != nil {
			return err
		}
		index, open = index+1, kind
		return send("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": block})
	}
	delta := func(d map[string]any) error {
		return send("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": d})
	}
	write := func(pc piece) error {
		if pc.reasoning != "" {
			if open != "thinking" {
				if err := openBlock("thinking", map[string]any{"type": "thinking", "thinking": "", "signature": ""}); err != nil {
					return err
				}
			}
			if err := delta(map[string]any{"type": "thinking_delta", "thinking": pc.reasoning}); err != nil {
				return err
			}
		}
		if pc.content != "" {
			if open != "text" {
				if err := openBlock("text", map[string]any{"type": "text", "text": ""}); err != nil {
					return err
				}
			}
			if err := delta(map[string]any{"type": "text_delta", "text": pc.content}); err != nil {
				return err
			}
		}
		for _, call := range pc.calls {
			b := toolUseBlock(call)
			args := string(b["input"].(json.RawMessage))
			b["input"] = map[string]any{}
			if err := openBlock("tool_use", b); err != nil {
				return err
			}
			if err := delta(map[string]any{"type": "input_json_delta", "partial_json": args}); err != nil {
				return err
			}
			if err := closeBlock(); err != nil {
				return err
			}
		}
		return nil
	}
	c := r.choices[0]
	if !streamOne(jobs, c, write, func(err error) {
		ae := statusOf(err)
		send("error", map[string]any{"type": "error", "error": map[string]any{"type": anthropicType(ae.status), "message": ae.message}})
	}) || closeBlock() != nil {
		return
	}
	reason, seq := r.stopReason(c)
	if send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": reason, "stop_sequence": seq}, "usage": messagesUsage(c.res),
		"x_mlxgo": r.composition()}) != nil {
		return
	}
	send("message_stop", map[string]any{"type": "message_stop"})
}

// anthropicType is Anthropic's error type for an HTTP status.
func anthropicType(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusMethodNotAllowed:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable:
		return "overloaded_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	default:
		return "api_error"
	}
}

// writeAnthropicError writes err in Anthropic's error shape, with the
// status statusOf gives it.
func writeAnthropicError(w http.ResponseWriter, err error) {
	ae := statusOf(err)
	if ae.status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	msg := ae.message
	if ae.param != "" && !strings.Contains(msg, ae.param) {
		msg = ae.param + ": " + msg
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.Encode(map[string]any{"type": "error", "error": map[string]any{"type": anthropicType(ae.status), "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(ae.status)
	w.Write(buf.Bytes())
}

package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/mlxgo/mlxgo/gen"
)

// This file is OpenAI's Responses API, POST /v1/responses and GET
// /v1/responses/{id}: the input (a string, or message, function_call and
// function_call_output items), the instructions and the stored
// conversation of previous_response_id become the same chat params as
// /v1/chat/completions, run as one completion execution, and are answered
// as output items (reasoning, message, function_call) in the Responses
// shapes, streamed as its event chain.

type responsesBody struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"`
	Instructions       *string         `json:"instructions"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	Temperature        *float64        `json:"temperature"`
	TopP               *float64        `json:"top_p"`
	Stream             bool            `json:"stream"`
	Tools              []responsesTool `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Store              *bool           `json:"store"`
	Metadata           json.RawMessage `json:"metadata"`
	Text               *struct {
		Format json.RawMessage `json:"format"`
	} `json:"text"`
}

type responsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// responsesItem is any input item; the fields used depend on Type (a
// message item may leave Type out).
type responsesItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// responsesUnhonoured are the Responses fields mlxgo reads and cannot
// honour, with the values that ask for nothing (the rule of unhonoured.go).
var responsesUnhonoured = map[string]unhonouredField{
	"background":          {"background responses are not implemented", isFalse},
	"conversation":        {"conversations are not stored; chain responses with previous_response_id", nil},
	"include":             {"no extra output data can be included", isEmptyArray},
	"max_tool_calls":      {"the number of tool calls cannot be limited", nil},
	"parallel_tool_calls": {"the number of tool calls per turn cannot be limited", isTrue},
	"prompt":              {"prompt templates are not implemented", nil},
	"reasoning":           {"the reasoning effort and summaries cannot be set; the reasoning the model writes is returned as a reasoning item", isEmptyObject},
	"top_logprobs":        {"log-probabilities are not implemented on /v1/responses; use /v1/chat/completions", isZero},
	"truncation":          {"the conversation is never truncated: a prompt over the context is a 400", isDisabled},
	"service_tier":        {"there is one service tier", isAutoTier},
}

// responsesReq is what a request adds to its chat params: the conversation
// to store (its input after the previous response's, without instructions,
// which OpenAI does not carry over) and what the response object echoes.
type responsesReq struct {
	body     responsesBody
	convo    []chatMessage
	store    bool
	toolsOut []any
	choice   string
}

// decodeResponses parses and validates a /v1/responses body into chat
// params, reading previous_response_id's conversation from store.
func decodeResponses(data []byte, store *responseStore) (*params, *responsesReq, error) {
	rq := &responsesReq{store: true, choice: "auto"}
	b := &rq.body
	if err := unmarshalObject(data, b); err != nil {
		return nil, nil, err
	}
	if err := refuseFields(data, responsesUnhonoured); err != nil {
		return nil, nil, err
	}
	if b.Store != nil {
		rq.store = *b.Store
	}
	c := commonFields{Model: b.Model, MaxTokens: b.MaxOutputTokens, Temperature: b.Temperature, TopP: b.TopP, Stream: b.Stream}
	p, err := c.params()
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) && ae.param == "max_tokens" {
			ae.param, ae.message = "max_output_tokens", strings.ReplaceAll(ae.message, "max_tokens", "max_output_tokens")
		}
		return nil, nil, err
	}
	if b.Text != nil {
		if p.format, err = decodeTextFormat(b.Text.Format); err != nil {
			return nil, nil, err
		}
	}
	p.chat = true
	tools, err := responsesTools(b.Tools)
	if err != nil {
		return nil, nil, err
	}
	if p.tools, err = decodeToolRequest(tools, b.ToolChoice); err != nil {
		return nil, nil, err
	}
	if p.tools.none {
		rq.choice = "none"
	}
	rq.toolsOut = make([]any, len(b.Tools))
	for i, t := range b.Tools {
		rq.toolsOut[i] = t
	}
	if id := b.PreviousResponseID; id != nil && *id != "" {
		prev, ok := store.get(*id)
		if !ok {
			e := invalidf("previous_response_id", "previous response with id %q not found: it was not stored (store: false), or the store (--response-store) dropped it", *id)
			e.code = "previous_response_not_found"
			return nil, nil, e
		}
		rq.convo = append(rq.convo, prev.convo...)
	}
	input, err := responsesInput(b.Input)
	if err != nil {
		return nil, nil, err
	}
	rq.convo = append(rq.convo, input...)
	msgs := rq.convo
	if b.Instructions != nil && *b.Instructions != "" {
		sys, _ := json.Marshal(*b.Instructions)
		msgs = append([]chatMessage{{Role: "system", Content: sys}}, msgs...)
	}
	if len(msgs) == 0 {
		return nil, nil, invalidf("input", "input must be a non-empty string or array of items")
	}
	if p.messages, err = encodeMessages(msgs); err != nil {
		return nil, nil, err
	}
	return p, rq, nil
}

// responsesTools turns Responses function tools into chat ones.
func responsesTools(tools []responsesTool) (json.RawMessage, error) {
	if len(tools) == 0 {
		return nil, nil
	}
	type function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	}
	type tool struct {
		Type     string   `json:"type"`
		Function function `json:"function"`
	}
	out := make([]tool, len(tools))
	for i, t := range tools {
		param := fmt.Sprintf("tools[%d]", i)
		switch {
		case t.Type != "function":
			return nil, unsupported(param+".type", fmt.Sprintf("only function tools are accepted, not %q", t.Type))
		case t.Name == "":
			return nil, invalidf(param+".name", "%s.name is required", param)
		case t.Strict != nil && *t.Strict:
			return nil, unsupported(param+".strict", "strict schema adherence needs constrained decoding; give strict: false")
		}
		fn := function{Name: t.Name, Description: t.Description}
		if !isNull(t.Parameters) {
			fn.Parameters = t.Parameters
		}
		out[i] = tool{Type: "function", Function: fn}
	}
	return json.Marshal(out)
}

// responsesInput is the input as chat messages: a string is one user
// message; function_call items join the assistant message before them as
// its tool calls, function_call_output items become tool messages, and
// reasoning items are dropped, as chat templates drop earlier reasoning.
func responsesInput(raw json.RawMessage) ([]chatMessage, error) {
	str := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	if isNull(raw) {
		return nil, invalidf("input", "input is required")
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return []chatMessage{{Role: "user", Content: str(text)}}, nil
	}
	var items []responsesItem
	if t := bytes.TrimSpace(raw); t[0] != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, invalidf("input", "input must be a string or an array of input items")
	}
	var out []chatMessage
	var calls []any
	flush := func() {
		if len(calls) == 0 {
			return
		}
		rawCalls, _ := json.Marshal(calls)
		if n := len(out); n > 0 && out[n-1].Role == "assistant" && isNull(out[n-1].ToolCalls) {
			out[n-1].ToolCalls = rawCalls
		} else {
			out = append(out, chatMessage{Role: "assistant", Content: str(""), ToolCalls: rawCalls})
		}
		calls = nil
	}
	for i, it := range items {
		param := fmt.Sprintf("input[%d]", i)
		switch it.Type {
		case "", "message":
			flush()
			switch it.Role {
			case "user", "assistant", "system", "developer":
			default:
				return nil, invalidf(param+".role", "%s.role must be user, assistant, system or developer, not %q", param, it.Role)
			}
			text, err := responsesText(it.Content, param+".content")
			if err != nil {
				return nil, err
			}
			out = append(out, chatMessage{Role: it.Role, Content: str(text)})
		case "function_call":
			if it.Name == "" || it.CallID == "" {
				return nil, invalidf(param, "%s: a function_call item needs call_id and name", param)
			}
			args := it.Arguments
			if args == "" {
				args = "{}"
			}
			if !json.Valid([]byte(args)) {
				return nil, invalidf(param+".arguments", "%s.arguments must be a JSON string holding JSON", param)
			}
			calls = append(calls, map[string]any{"id": it.CallID, "type": "function",
				"function": map[string]any{"name": it.Name, "arguments": args}})
		case "function_call_output":
			flush()
			if it.CallID == "" {
				return nil, invalidf(param+".call_id", "%s.call_id is required", param)
			}
			result, err := responsesText(it.Output, param+".output")
			if err != nil {
				return nil, err
			}
			id := it.CallID
			out = append(out, chatMessage{Role: "tool", Content: str(result), ToolCallID: &id})
		case "reasoning":
		default:
			return nil, unsupported(param+".type", fmt.Sprintf("%q items are not accepted; only message, function_call, function_call_output and reasoning", it.Type))
		}
	}
	flush()
	return out, nil
}

// responsesText is a string, or the text of input_text/output_text parts.
func responsesText(raw json.RawMessage, param string) (string, error) {
	if isNull(raw) {
		return "", invalidf(param, "%s is required", param)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", invalidf(param, "%s must be a string or an array of text parts", param)
	}
	var b strings.Builder
	for j, part := range parts {
		pp := fmt.Sprintf("%s[%d]", param, j)
		if part.Type != "input_text" && part.Type != "output_text" {
			return "", unsupported(pp+".type", fmt.Sprintf("only input_text and output_text parts are accepted, not %q", part.Type))
		}
		if part.Text == nil {
			return "", invalidf(pp+".text", "%s needs text", pp)
		}
		b.WriteString(*part.Text)
	}
	return b.String(), nil
}

func (s *Server) handleResponses(w http.ResponseWriter, r *http.Request) {
	var rq *responsesReq
	p, ok := s.decodeBody(w, r, func(b []byte) (*params, error) {
		p, q, err := decodeResponses(b, s.responses)
		rq = q
		return p, err
	}, writeOpenAIError)
	if !ok {
		return
	}
	rs, jobs, ok := s.start(w, r, p, writeResponsesError)
	if !ok {
		return
	}
	rs.id, rs.object = newID("resp_"), "response"
	ro := &responseOut{r: rs, rq: rq}
	if p.stream {
		s.streamResponse(w, jobs, ro)
		return
	}
	if !gather(w, jobs, rs, func(w http.ResponseWriter, err error) { writeError(w, err) }) {
		return
	}
	c := rs.choices[0]
	ro.items = ro.outputItems(c.all)
	body := ro.object("completed")
	s.keep(ro, body)
	writeJSON(w, http.StatusOK, body)
}

// writeResponsesError is writeError naming input where the chat path
// names messages (a prompt over the context, a template that refuses it).
func writeResponsesError(w http.ResponseWriter, err error) {
	if ae := statusOf(err); ae.param == "messages" {
		e := *ae
		e.param = "input"
		err = &e
	}
	writeError(w, err)
}

// handleResponse is GET /v1/responses/{id}: a stored response object.
func (s *Server) handleResponse(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if prev, ok := s.responses.get(id); ok {
		writeJSON(w, http.StatusOK, prev.body)
		return
	}
	writeError(w, &apiError{status: http.StatusNotFound, typ: "invalid_request_error", code: "not_found",
		message: fmt.Sprintf("response with id %q not found: it was not stored (store: false), or the store (--response-store) dropped it", id)})
}

// keep stores a finished response for previous_response_id, unless the
// request said store: false.
func (s *Server) keep(ro *responseOut, body map[string]any) {
	if !ro.rq.store {
		return
	}
	convo := append([]chatMessage(nil), ro.rq.convo...)
	str := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	var text strings.Builder
	var calls []any
	for _, it := range ro.items {
		switch it["type"] {
		case "message":
			for _, part := range it["content"].([]any) {
				text.WriteString(part.(map[string]any)["text"].(string))
			}
		case "function_call":
			calls = append(calls, map[string]any{"id": it["call_id"], "type": "function",
				"function": map[string]any{"name": it["name"], "arguments": it["arguments"]}})
		}
	}
	m := chatMessage{Role: "assistant", Content: str(text.String())}
	if len(calls) > 0 {
		m.ToolCalls, _ = json.Marshal(calls)
	}
	s.responses.put(ro.r.id, storedResponse{convo: append(convo, m), body: body})
}

// responseOut builds one response object and its output items.
type responseOut struct {
	r     *response
	rq    *responsesReq
	items []map[string]any
}

// outputItems are the finished output: reasoning, the message (unless the
// model only called tools), then one function_call item per call.
func (ro *responseOut) outputItems(pc piece) []map[string]any {
	status := ro.itemStatus()
	var items []map[string]any
	if pc.reasoning != "" {
		items = append(items, reasoningItem(newID("rs_"), pc.reasoning, status))
	}
	if len(pc.calls) == 0 || strings.TrimSpace(pc.content) != "" {
		items = append(items, messageItem(newID("msg_"), pc.content, status))
	}
	for _, call := range pc.calls {
		items = append(items, functionCallItem(newID("fc_"), call, "completed"))
	}
	return items
}

func (ro *responseOut) itemStatus() string {
	if c := ro.r.choices[0]; c.done && c.finishReason() == gen.FinishLength {
		return "incomplete"
	}
	return "completed"
}

func reasoningItem(id, text, status string) map[string]any {
	content := []any{}
	if text != "" {
		content = append(content, map[string]any{"type": "reasoning_text", "text": text})
	}
	return map[string]any{"id": id, "type": "reasoning", "summary": []any{}, "content": content, "status": status}
}

func messageItem(id, text, status string) map[string]any {
	content := []any{}
	if status != "in_progress" {
		content = append(content, outputText(text))
	}
	return map[string]any{"id": id, "type": "message", "status": status, "role": "assistant", "content": content}
}

func outputText(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
}

func functionCallItem(id string, c toolCall, status string) map[string]any {
	return map[string]any{"id": id, "type": "function_call", "status": status, "call_id": c.ID, "name": c.Name, "arguments": c.Arguments}
}

// object is the response object; status "completed" becomes "incomplete"
// when max_output_tokens ended the output. "in_progress" has no output or
// usage yet.
func (ro *responseOut) object(status string) map[string]any {
	r, b := ro.r, ro.rq.body
	var incomplete any
	if status == "completed" && ro.itemStatus() == "incomplete" {
		status, incomplete = "incomplete", map[string]any{"reason": "max_output_tokens"}
	}
	output := make([]any, len(ro.items))
	for i, it := range ro.items {
		output[i] = it
	}
	metadata := any(map[string]any{})
	if !isNull(b.Metadata) {
		metadata = b.Metadata
	}
	out := map[string]any{
		"id": r.id, "object": "response", "created_at": r.created, "status": status, "model": r.model,
		"output": output, "error": nil, "incomplete_details": incomplete,
		"instructions": b.Instructions, "max_output_tokens": b.MaxOutputTokens,
		"temperature": r.p.sampler.Temp, "top_p": r.p.sampler.TopP,
		"tools": ro.rq.toolsOut, "tool_choice": ro.rq.choice, "parallel_tool_calls": true,
		"previous_response_id": b.PreviousResponseID, "store": ro.rq.store, "metadata": metadata,
		"text": map[string]any{"format": map[string]any{"type": "text"}}, "truncation": "disabled",
		"reasoning": map[string]any{"effort": nil, "summary": nil}, "usage": nil,
	}
	if status != "in_progress" {
		u := r.usage()
		out["usage"] = map[string]any{"input_tokens": u.PromptTokens, "output_tokens": u.CompletionTokens, "total_tokens": u.TotalTokens,
			"input_tokens_details": map[string]int{"cached_tokens": u.PromptTokensDetails.CachedTokens}}
		out["x_mlxgo"] = r.composition()
	}
	return out
}

func isFalse(raw json.RawMessage, _ map[string]json.RawMessage) bool {
	var b bool
	return json.Unmarshal(raw, &b) == nil && !b
}

// isEmptyObject: an object whose members are all null ({} or
// {"effort": null}) asks for nothing.
func isEmptyObject(raw json.RawMessage, _ map[string]json.RawMessage) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return false
	}
	for _, v := range m {
		if !isNull(v) {
			return false
		}
	}
	return true
}

func isDisabled(raw json.RawMessage, _ map[string]json.RawMessage) bool {
	var s string
	return json.Unmarshal(raw, &s) == nil && s == "disabled"
}

func isAutoTier(raw json.RawMessage, _ map[string]json.RawMessage) bool {
	var s string
	return json.Unmarshal(raw, &s) == nil && (s == "auto" || s == "default")
}

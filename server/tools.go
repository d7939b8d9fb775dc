package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mlxgo/mlxgo/tok"
)

// toolFormat is how a model writes tool calls: text between start and end
// markers, read by parse. The formats and how one is chosen are mlx-lm
// 0.32.2's (tokenizer_utils._infer_tool_parser, mlx_lm/tool_parsers).
type toolFormat struct {
	name       string // mlx-lm's tool parser name
	start, end string // end "" : the call runs to the end of the text
	// parse reads the text between the markers; nil means mlxgo recognises
	// the format but cannot read it yet, so tools are refused, not ignored.
	parse func(text string, tools []toolDef) ([]toolCall, error)
}

// toolFormats are mlx-lm's parsers with their markers; the ones mlxgo can
// parse have a parse function.
var toolFormats = map[string]toolFormat{
	"json_tools":     {name: "json_tools", start: "<tool_call>", end: "</tool_call>", parse: parseJSONTools},
	"qwen3_coder":    {name: "qwen3_coder", start: "<tool_call>", end: "</tool_call>", parse: parseQwen3Coder},
	"minimax_m2":     {name: "minimax_m2", start: "<minimax:tool_call>", end: "</minimax:tool_call>"},
	"gemma4":         {name: "gemma4", start: "<|tool_call>", end: "<tool_call|>", parse: parseGemma4},
	"function_gemma": {name: "function_gemma", start: "<start_function_call>", end: "<end_function_call>"},
	"longcat":        {name: "longcat", start: "<longcat_tool_call>", end: "</longcat_tool_call>"},
	"glm47":          {name: "glm47", start: "<tool_call>", end: "</tool_call>"},
	"pythonic":       {name: "pythonic", start: "<|tool_call_start|>", end: "<|tool_call_end|>"},
	"kimi_k2":        {name: "kimi_k2", start: "<|tool_calls_section_begin|>", end: "<|tool_calls_section_end|>"},
	"kimi_k3":        {name: "kimi_k3", start: "<|open|>tools<|sep|>", end: "<|close|>tools<|sep|>"},
	"minicpm5":       {name: "minicpm5", start: "<function name=", end: "</function>"},
	"mistral":        {name: "mistral", start: "[TOOL_CALLS]", parse: parseMistral},
	"muse_spark":     {name: "muse_spark", start: "<atem:function_calls>", end: "</atem:function_calls>"},
}

// inferToolFormat picks the format the way mlx-lm does: by markers in the
// chat template, in mlx-lm's order (more specific formats first), then by
// tool-call tokens in the vocabulary. nil: the model has no tool calling.
func inferToolFormat(template string, t *tok.Tokenizer) *toolFormat {
	has := func(s string) bool { return strings.Contains(template, s) }
	var name string
	switch {
	case template == "":
	case has("<minimax:tool_call>"):
		name = "minimax_m2"
	case has("<|tool_call>") && has("<tool_call|>"):
		name = "gemma4"
	case has("<start_function_call>"):
		name = "function_gemma"
	case has("<longcat_tool_call>"):
		name = "longcat"
	case has("<arg_key>"):
		name = "glm47"
	case has("<|tool_list_start|>") || has("<|tool_call_start|>"):
		name = "pythonic"
	case has(`<tool_call>\n<function=`) || has("<tool_call>\n<function="):
		name = "qwen3_coder"
	case has("<|tool_calls_section_begin|>"):
		name = "kimi_k2"
	case has(`<function name="`) && has(`<param name="`):
		name = "minicpm5"
	case has("[TOOL_CALLS]"):
		name = "mistral"
	case has("<atem:function_calls>"):
		name = "muse_spark"
	case has("<tool_call>") && has("tool_call.name"):
		name = "json_tools"
	}
	if name == "" && t != nil {
		inVocab := func(toks ...string) bool {
			for _, s := range toks {
				if _, ok := t.TokenToID(s); !ok {
					return false
				}
			}
			return true
		}
		switch {
		case inVocab("<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"):
			name = "kimi_k3"
		case inVocab("<|tool_call_start|>", "<|tool_call_end|>"):
			name = "pythonic"
		}
	}
	if name == "" {
		return nil
	}
	f := toolFormats[name]
	return &f
}

// toolDef is the part of a tool definition the parsers use: parameter types
// turn qwen3_coder's untyped parameter text into JSON values.
type toolDef struct {
	Type     string `json:"type"`
	Function *struct {
		Name       string `json:"name"`
		Parameters *struct {
			Properties map[string]struct {
				Type any `json:"type"`
			} `json:"properties"`
		} `json:"parameters"`
	} `json:"function"`
}

// toolCall is one parsed call, in OpenAI's terms.
type toolCall struct {
	ID        string
	Name      string
	Arguments string // a JSON object, as text
}

// toolRequest is what decodeChat makes of tools and tool_choice.
type toolRequest struct {
	tools []any     // for the chat template, key order kept; nil: none
	defs  []toolDef // for the parsers
	none  bool      // tool_choice "none": the model is not shown tools and nothing is parsed
	// force is tool_choice "required" or the name of the function it
	// forces ("": the model chooses); params are each tool's parameters
	// schema, for the grammar that forces the call (grammar.go).
	force  string
	params map[string]json.RawMessage
}

// decodeToolRequest validates tools and tool_choice: "auto" (the default),
// "none", and "required" or a named function, which a grammar then forces
// (mlx_lm.server ignores tool_choice).
func decodeToolRequest(rawTools, rawChoice json.RawMessage) (toolRequest, error) {
	var tr toolRequest
	if !isNull(rawChoice) {
		var choice string
		if json.Unmarshal(rawChoice, &choice) != nil {
			var named struct {
				Type     string `json:"type"`
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			}
			if json.Unmarshal(rawChoice, &named) != nil || named.Type != "function" || named.Function.Name == "" {
				return tr, invalidf("tool_choice", `tool_choice must be "none", "auto", "required" or {"type": "function", "function": {"name": ...}}`)
			}
			tr.force = named.Function.Name
		}
		switch choice {
		case "", "auto":
		case "none":
			tr.none = true
		case "required":
			tr.force = "required"
		default:
			return tr, invalidf("tool_choice", `tool_choice must be "none", "auto", "required" or an object naming a function, not %q`, choice)
		}
	}
	if isNull(rawTools) {
		if tr.force != "" {
			return tr, invalidf("tool_choice", "tool_choice forces a tool call, but the request has no tools")
		}
		return tr, nil
	}
	var raw []json.RawMessage
	if json.Unmarshal(rawTools, &raw) != nil {
		return tr, invalidf("tools", "tools must be an array of tool definitions")
	}
	if len(raw) == 0 {
		if tr.force != "" {
			return tr, invalidf("tool_choice", "tool_choice forces a tool call, but the request has no tools")
		}
		return tr, nil
	}
	tr.defs = make([]toolDef, len(raw))
	tr.tools = make([]any, len(raw))
	for i, r := range raw {
		param := fmt.Sprintf("tools[%d]", i)
		d := &tr.defs[i]
		if t := bytes.TrimSpace(r); len(t) == 0 || t[0] != '{' || json.Unmarshal(r, d) != nil {
			return tr, invalidf(param, "%s must be an object {\"type\":\"function\",\"function\":{...}}", param)
		}
		if d.Type != "function" {
			return tr, unsupported(param+".type", fmt.Sprintf("only function tools are accepted, not %q", d.Type))
		}
		if d.Function == nil || d.Function.Name == "" {
			return tr, invalidf(param+".function.name", "%s.function.name is required", param)
		}
		tr.tools[i] = json.RawMessage(bytes.TrimSpace(r))
		var fn struct {
			Function struct {
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		_ = json.Unmarshal(r, &fn) // r is an object: checked above
		if tr.params == nil {
			tr.params = map[string]json.RawMessage{}
		}
		tr.params[d.Function.Name] = fn.Function.Parameters
	}
	if tr.force != "" && tr.force != "required" {
		if _, ok := tr.params[tr.force]; !ok {
			return tr, invalidf("tool_choice", "tool_choice names function %q, which is not among the tools", tr.force)
		}
	}
	if tr.none {
		// The model is not told about tools it may not call.
		tr.tools = nil
	}
	return tr, nil
}

// encodeToolCalls rewrites an assistant message's tool_calls for the chat
// template: each function's arguments, a JSON string in OpenAI's shape,
// becomes the object it holds, as mlx_lm.server does, so templates that
// iterate arguments or print them with tojson see an object. Key order is
// kept.
func encodeToolCalls(raw json.RawMessage, param string) ([]byte, error) {
	var calls []json.RawMessage
	if json.Unmarshal(raw, &calls) != nil {
		return nil, invalidf(param, "%s must be an array", param)
	}
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, c := range calls {
		if i > 0 {
			buf.WriteByte(',')
		}
		p := fmt.Sprintf("%s[%d]", param, i)
		var call struct {
			Function *struct {
				Arguments json.RawMessage `json:"arguments"`
			} `json:"function"`
		}
		if t := bytes.TrimSpace(c); len(t) == 0 || t[0] != '{' || json.Unmarshal(c, &call) != nil {
			return nil, invalidf(p, "%s must be an object with a function", p)
		}
		if call.Function == nil {
			return nil, invalidf(p+".function", "%s.function is required", p)
		}
		var args string
		if json.Unmarshal(call.Function.Arguments, &args) != nil || args == "" {
			// Already an object (or absent): the template gets it as is.
			buf.Write(bytes.TrimSpace(c))
			continue
		}
		if !json.Valid([]byte(args)) {
			return nil, invalidf(p+".function.arguments", "%s.function.arguments must be a JSON string holding JSON", p)
		}
		out, err := replaceKey(c, "function", func(fn json.RawMessage) (json.RawMessage, error) {
			return replaceKey(fn, "arguments", func(json.RawMessage) (json.RawMessage, error) {
				return json.RawMessage(args), nil
			})
		})
		if err != nil {
			return nil, invalidf(p, "cannot read %s: %v", p, err)
		}
		buf.Write(out)
	}
	buf.WriteByte(']')
	return buf.Bytes(), nil
}

// replaceKey returns the JSON object obj with key's value replaced by f's
// result, every other member kept in its order and bytes.
func replaceKey(obj json.RawMessage, key string, f func(json.RawMessage) (json.RawMessage, error)) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("expected a JSON object")
	}
	var buf bytes.Buffer
	buf.WriteByte('{')
	for n := 0; dec.More(); n++ {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if k == key {
			if v, err = f(v); err != nil {
				return nil, err
			}
		}
		if n > 0 {
			buf.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

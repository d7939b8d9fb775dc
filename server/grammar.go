package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/mlxgo/mlxgo/gen"
	"github.com/mlxgo/mlxgo/mlx"
)

// constraint is the grammar a request asks generation to follow (structured
// output): a kind the engine reads (mlx.GrammarJSONSchema, ...), its source,
// and what the request said, as the execution composition records it.
type constraint struct {
	kind   string
	source string
	what   string // "json_object", "json_schema:NAME", ...
	param  string // the request field it came from, for errors
}

// jsonObjectSchema is response_format {"type": "json_object"}: any JSON object.
const jsonObjectSchema = `{"type":"object"}`

// decodeResponseFormat reads OpenAI's response_format: "text" (or absent)
// is no constraint; "json_object" is any object; "json_schema" is
// {json_schema: {name, schema, strict}}. strict is honoured either way: the
// grammar holds the output to the schema, and a schema the engine cannot
// enforce is a 400 naming what it cannot (never a looser schema).
func decodeResponseFormat(raw json.RawMessage) (*constraint, error) {
	if isNull(raw) {
		return nil, nil
	}
	var f struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict *bool           `json:"strict"`
		} `json:"json_schema"`
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' || json.Unmarshal(raw, &f) != nil {
		return nil, invalidf("response_format", `response_format must be an object such as {"type": "json_object"}`)
	}
	switch f.Type {
	case "text":
		return nil, nil
	case "json_object":
		return &constraint{kind: mlx.GrammarJSONSchema, source: jsonObjectSchema, what: "json_object", param: "response_format"}, nil
	case "json_schema":
		if f.JSONSchema == nil {
			return nil, invalidf("response_format.json_schema", "response_format of type json_schema needs json_schema: {name, schema}")
		}
		s := bytes.TrimSpace(f.JSONSchema.Schema)
		if len(s) == 0 || isNull(s) {
			return nil, invalidf("response_format.json_schema.schema", "response_format.json_schema.schema is required")
		}
		if s[0] != '{' && !bytes.Equal(s, []byte("true")) && !bytes.Equal(s, []byte("false")) {
			return nil, invalidf("response_format.json_schema.schema", "response_format.json_schema.schema must be a JSON Schema object")
		}
		name := f.JSONSchema.Name
		if name == "" {
			name = "schema"
		}
		return &constraint{kind: mlx.GrammarJSONSchema, source: string(s), what: "json_schema:" + name, param: "response_format"}, nil
	default:
		return nil, invalidf("response_format.type", `response_format.type must be "text", "json_object" or "json_schema", not %q`, f.Type)
	}
}

// decodeTextFormat reads the Responses API's text.format, response_format
// flattened: {"type": "json_schema", "name", "schema", "strict"}.
func decodeTextFormat(raw json.RawMessage) (*constraint, error) {
	if isNull(raw) {
		return nil, nil
	}
	var f struct {
		Type   string          `json:"type"`
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' || json.Unmarshal(raw, &f) != nil {
		return nil, invalidf("text.format", `text.format must be an object such as {"type": "json_object"}`)
	}
	rf := raw
	if f.Type == "json_schema" {
		if len(bytes.TrimSpace(f.Schema)) == 0 || isNull(f.Schema) {
			return nil, invalidf("text.format.schema", "text.format of type json_schema needs a schema")
		}
		rf, _ = json.Marshal(map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": f.Name, "schema": f.Schema, "strict": f.Strict}})
	}
	c, err := decodeResponseFormat(rf)
	if e, ok := err.(*apiError); ok {
		e.param = strings.Replace(strings.Replace(e.param, "response_format.json_schema", "text.format", 1), "response_format", "text.format", 1)
	}
	if c != nil {
		c.param = "text.format"
	}
	return c, err
}

// toolCallGrammar is tool_choice "required" (one call or more, to any of
// the declared tools) or {"type": "function", "function": {"name": N}}
// (exactly one call, to N), as a Lark grammar over the json_tools format
// (Qwen2.5, Qwen3, Hermes templates):
//
//	<tool_call>
//	{"name": "N", "arguments": {...}}
//	</tool_call>
//
// with the arguments held to the tool's parameters schema. A think block
// may come first, for reasoning templates (its text without "<", a
// limitation of the grammar). Other tool formats are refused by name.
func toolCallGrammar(f *toolFormat, params map[string]json.RawMessage, only string) (*constraint, error) {
	if f == nil {
		return nil, unsupported("tool_choice", "this model's chat template has no tool calling")
	}
	if f.name != "json_tools" {
		return nil, unsupported("tool_choice", fmt.Sprintf("forcing tool calls is implemented for the json_tools format (Qwen, Hermes), not this model's %s", f.name))
	}
	names := make([]string, 0, len(params))
	for n := range params {
		if only == "" || n == only {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		if only != "" {
			return nil, invalidf("tool_choice", "tool_choice names function %q, which is not among the tools", only)
		}
		return nil, invalidf("tool_choice", "tool_choice \"required\" needs at least one tool")
	}
	sort.Strings(names)
	// Written by hand, not marshalled from a map: the schema's property
	// order is the order generated, and the templates put the name first.
	var calls []string
	for _, n := range names {
		args := json.RawMessage(`{"type":"object"}`)
		if p := bytes.TrimSpace(params[n]); len(p) > 0 && !isNull(p) {
			args = p
		}
		qn, _ := json.Marshal(n)
		calls = append(calls, fmt.Sprintf(`{"type":"object","properties":{"name":{"const":%s},"arguments":%s},"required":["name","arguments"],"additionalProperties":false}`, qn, args))
	}
	js := fmt.Sprintf(`{"anyOf":[%s],"x-guidance":%s}`, strings.Join(calls, ","), gen.JSONLayout)
	if len(calls) == 1 {
		js = calls[0][:len(calls[0])-1] + `,"x-guidance":` + gen.JSONLayout + `}`
	}
	repeat := ` ("\n" call)*`
	what := "tool_choice:required"
	if only != "" {
		repeat, what = "", "tool_choice:"+only
	}
	lark := "start: think? call" + repeat + "\n" +
		"think: \"<think>\" /[^<]*/ \"</think>\" /[ \\n]*/\n" +
		"call: \"<tool_call>\\n\" %json " + js + " \"\\n</tool_call>\"\n"
	return &constraint{kind: mlx.GrammarLark, source: lark, what: what}, nil
}

// constrain resolves the request's constraint — a forced tool call, else
// response_format — compiles it against the model's vocabulary and sets
// o.Grammar. A schema or grammar the engine cannot enforce is a 400 with its
// reason.
func (s *Server) constrain(p *params, tools *toolFormat, o *gen.Options) (*constraint, error) {
	var c *constraint
	param := "response_format"
	if p.format != nil {
		param = p.format.param
	}
	if p.tools.force != "" {
		if p.format != nil {
			return nil, invalidf(param, "%s and a tool_choice that forces a call cannot both constrain one reply", param)
		}
		only := p.tools.force
		if only == "required" {
			only = ""
		}
		var err error
		if c, err = toolCallGrammar(tools, p.tools.params, only); err != nil {
			return nil, err
		}
		param = "tool_choice"
	} else {
		c = p.format
	}
	if c == nil {
		return nil, nil
	}
	if s.cfg.Model.Grammars == nil {
		return nil, unsupported(param, "structured output is not available for this model")
	}
	gr, err := s.cfg.Model.Grammars.Compile(c.kind, c.source)
	if err != nil {
		if errors.Is(err, gen.ErrGrammar) {
			return nil, invalidf(param, "%s cannot be enforced: %v", param, err)
		}
		return nil, err
	}
	o.Grammar = gr
	return c, nil
}
